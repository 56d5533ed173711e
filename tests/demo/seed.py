"""Seed a demo server's database for a test: `python -m tests.demo.seed <password>` in the
server's environment. Prints the member's API token as JSON on the last line of its output.

Tenants `vision` and `nlp` each get a quota of 10 whole A100-80GB GPUs and a generous
auto-approve policy (up to 10 GPU-eq for 24 hours), and `dev` is a developer in both.
"""

import json
import sys

import django

django.setup()

from portal.accounts.services import user_create  # noqa: E402  (needs Django set up)
from portal.accounts.tokens import api_token_create  # noqa: E402
from portal.catalog.models import Offering  # noqa: E402
from portal.catalog.presets import catalog_presets_load  # noqa: E402
from tenants.models import MemberRole  # noqa: E402
from tenants.services import membership_set, quota_set, tenant_create  # noqa: E402

TENANTS = ("vision", "nlp")
OFFERING = "a100-80gb-whole"
QUOTA_GPUS = 10


def seed(password: str) -> str:
    catalog_presets_load(actor=None)
    gpu_model = Offering.objects.get(slug=OFFERING).gpu_model
    member = user_create(actor=None, username="dev", email="dev@example.org", password=password)
    for slug in TENANTS:
        tenant = tenant_create(
            actor=None,
            slug=slug,
            name=slug.capitalize(),
            auto_approve_gpu_eq=str(QUOTA_GPUS),
            auto_approve_hours=24,
        )
        quota_set(actor=None, tenant=tenant, gpu_model=gpu_model, gpu_eq=QUOTA_GPUS)
        membership_set(actor=None, tenant=tenant, user=member, role=MemberRole.DEVELOPER)
    return api_token_create(actor=member, name="load test").text


if __name__ == "__main__":
    print(json.dumps({"token": seed(sys.argv[1])}))  # noqa: T201  (read by the test that ran it)
