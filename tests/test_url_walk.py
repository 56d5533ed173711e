"""Every URL the project defines x every persona, anonymous and an outsider: the expected status.

A route missing from ROUTES fails `test_every_route_is_walked`, so a new view cannot forget
its access check. Tenant-scoped routes point at tenant A; the outsider is in tenant B.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from portal.accounts.services import user_create
from portal.accounts.tokens import api_token_create
from portal.allocations.services import gpu_request_extend, gpu_request_submit
from portal.billing.pricing import current_month
from portal.billing.services import budget_set
from portal.catalog.services import gpu_pool_create, notebook_image_create, offering_create
from portal.cluster.models import ProvisioningRun
from portal.cluster.services import cluster_create
from portal.directory.services import directory_member_queue
from portal.workloads.services import notebook_launch
from tenants.models import MemberRole
from tenants.services import membership_set, quota_request_create, quota_set
from tests.tenants.factories import a100, mig_backend

PERSONAS = ("anonymous", "developer", "lead", "outsider", "finance_user", "admin_user")

# route name -> (method, kwargs name, expected status per persona, in PERSONAS order)
ROUTES: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "start": ("get", "", (302, 302, 302, 302, 302, 302)),
    "home": ("get", "", (302, 200, 200, 200, 200, 200)),
    # A panel of the Home: only for the personas whose Home shows it (a member's own notebooks).
    "home-panel": ("get", "home_panel", (302, 200, 200, 200, 404, 404)),
    "healthz": ("get", "", (200, 200, 200, 200, 200, 200)),
    "readyz": ("get", "", (200, 200, 200, 200, 200, 200)),
    "metrics": ("get", "", (200, 200, 200, 200, 200, 200)),
    "accounts:login": ("get", "", (200, 302, 302, 302, 302, 302)),
    "accounts:logout": ("get", "", (405, 405, 405, 405, 405, 405)),
    # SSO is off in the walk: its routes do not exist (tests/accounts/test_sso.py has them on).
    "accounts:oidc-login": ("get", "", (404, 404, 404, 404, 404, 404)),
    "accounts:oidc-callback": ("get", "", (404, 404, 404, 404, 404, 404)),
    "accounts:identity": ("get", "", (302, 404, 404, 404, 404, 200)),
    "accounts:profile": ("get", "", (302, 200, 200, 200, 200, 200)),
    # The language switcher: anyone (the cookie); signed in, saved on the profile too.
    "accounts:language": ("post", "", (302, 302, 302, 302, 302, 302)),
    "api:identity": ("get", "", (401, 404, 404, 404, 404, 200)),
    "api:users": ("get", "", (401, 404, 404, 404, 404, 200)),
    # The sync is off in the walk and the queued change pending: retries and reconciles are 409.
    "directory:status": ("get", "", (302, 404, 404, 404, 404, 200)),
    "directory:retry": ("post", "directory_change", (302, 404, 404, 404, 404, 409)),
    "directory:reconcile": ("post", "", (302, 404, 404, 404, 404, 409)),
    "api:directory-changes": ("get", "", (401, 404, 404, 404, 404, 200)),
    "api:directory-change-retry": ("post", "directory_change", (401, 404, 404, 404, 404, 409)),
    "api:directory-reports": ("get", "", (401, 404, 404, 404, 404, 200)),
    "api:directory-reconcile": ("post", "", (401, 404, 404, 404, 404, 409)),
    # The developer's API token: only its owner sees or revokes it.
    "tokens:list": ("get", "", (302, 200, 200, 200, 200, 200)),
    "tokens:revoke": ("post", "api_token", (302, 200, 404, 404, 404, 404)),
    "api:tokens": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:token": ("get", "api_token", (401, 200, 404, 404, 404, 404)),
    "tenants:mine": ("get", "", (302, 200, 200, 200, 200, 200)),
    "tenants:team": ("get", "", (302, 404, 200, 404, 404, 404)),
    "tenants:finance": ("get", "", (302, 404, 404, 404, 200, 200)),
    "tenants:manage": ("get", "", (302, 404, 404, 404, 404, 200)),
    "tenants:create": ("get", "", (302, 404, 404, 404, 404, 200)),
    "tenants:quota-queue": ("get", "", (302, 404, 404, 404, 404, 200)),
    "tenants:detail": ("get", "tenant", (302, 200, 200, 404, 200, 200)),
    # A section of a tenant's page, loaded on its own (its members).
    "tenants:section": ("get", "tenant_section", (302, 200, 200, 404, 200, 200)),
    "tenants:edit": ("get", "tenant", (302, 403, 403, 404, 403, 200)),
    "tenants:state": ("post", "tenant", (302, 403, 403, 404, 403, 400)),
    "tenants:quota-set": ("post", "tenant", (302, 403, 403, 404, 403, 400)),
    "tenants:member-add": ("post", "tenant", (302, 403, 400, 404, 403, 400)),
    # Destructive actions ask first (portal.core.confirm): a POST without the confirmation is 200.
    "tenants:member-remove": ("post", "member", (302, 403, 200, 404, 403, 200)),
    "tenants:quota-request-create": ("post", "tenant", (302, 403, 400, 404, 403, 403)),
    "tenants:quota-request-decide": ("post", "quota_request", (302, 403, 403, 404, 403, 400)),
    "audit": ("get", "", (302, 200, 200, 200, 200, 200)),
    "allocations:mine": ("get", "", (302, 200, 200, 200, 200, 200)),
    "allocations:new": ("get", "", (302, 200, 200, 200, 404, 200)),
    "allocations:preview": ("get", "", (302, 200, 200, 200, 200, 200)),
    "allocations:offerings": ("get", "", (302, 200, 200, 200, 404, 200)),
    "allocations:detail": ("get", "gpu_request", (302, 200, 200, 404, 200, 200)),
    "allocations:transition": ("post", "page_request", (302, 403, 302, 404, 403, 302)),
    "allocations:extend": ("get", "gpu_request", (302, 200, 200, 404, 200, 200)),
    "allocations:extension-decide": ("post", "page_extension", (302, 403, 302, 404, 403, 302)),
    "allocations:approvals": ("get", "", (302, 404, 200, 404, 404, 200)),
    "allocations:approvals-extensions": ("get", "", (302, 404, 200, 404, 404, 200)),
    "allocations:approve-selected": ("post", "", (302, 404, 302, 404, 404, 302)),
    "allocations:all": ("get", "", (302, 404, 404, 404, 200, 200)),
    "workloads:list": ("get", "", (302, 200, 200, 200, 200, 200)),
    "workloads:new": ("get", "", (302, 200, 200, 200, 404, 200)),
    "workloads:preview": ("get", "", (302, 200, 200, 200, 200, 200)),
    # The developer's notebook: the owner, the tenant's lead and admins see it.
    "workloads:detail": ("get", "notebook", (302, 200, 200, 404, 404, 200)),
    "workloads:delete": ("get", "notebook", (302, 200, 200, 404, 404, 200)),
    "workloads:action": ("post", "notebook_snooze", (302, 302, 302, 404, 404, 302)),
    "api:notebooks": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:notebook": ("get", "notebook", (401, 200, 200, 404, 404, 200)),
    # Walked in this order: it is launching, so start is a conflict; stopped, nothing to snooze.
    "api:notebook-start": ("post", "notebook", (401, 409, 409, 404, 404, 409)),
    "api:notebook-stop": ("post", "notebook", (401, 200, 200, 404, 404, 200)),
    "api:notebook-snooze": ("post", "notebook", (401, 409, 409, 404, 404, 409)),
    "catalog:overview": ("get", "", (302, 404, 404, 404, 404, 200)),
    "catalog:model-create": ("get", "", (302, 404, 404, 404, 404, 200)),
    "catalog:model-edit": ("get", "gpu_model", (302, 404, 404, 404, 404, 200)),
    "catalog:backend-create": ("get", "", (302, 404, 404, 404, 404, 200)),
    "catalog:offering-create": ("get", "", (302, 404, 404, 404, 404, 200)),
    "catalog:offering-edit": ("get", "offering", (302, 404, 404, 404, 404, 200)),
    "catalog:pool-create": ("get", "", (302, 404, 404, 404, 404, 200)),
    "catalog:image-create": ("get", "", (302, 404, 404, 404, 404, 200)),
    "catalog:image-edit": ("get", "notebook_image", (302, 404, 404, 404, 404, 200)),
    "api:me": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:audit-events": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:requests": ("get", "", (401, 200, 200, 200, 200, 200)),
    # An empty body names no tenant: bad input for everyone signed in (test_preview has the rest).
    "api:request-preview": ("post", "", (401, 400, 400, 400, 400, 400)),
    "api:request": ("get", "gpu_request", (401, 200, 200, 404, 200, 200)),
    # One pending request of the developer's, walked through in this order, per persona.
    "api:request-approve": ("post", "gpu_request", (401, 403, 200, 404, 403, 200)),
    "api:request-reject": ("post", "gpu_request", (401, 403, 409, 404, 403, 409)),
    "api:request-cancel": ("post", "gpu_request", (401, 200, 409, 404, 403, 409)),
    "api:request-release": ("post", "gpu_request", (401, 409, 200, 404, 409, 200)),
    "api:request-extend": ("post", "gpu_request", (401, 400, 400, 404, 400, 400)),
    "api:request-revoke": ("post", "gpu_request", (401, 403, 403, 404, 403, 400)),
    # The developer's extension waiting for a lead, decided in this order, per persona.
    "api:extensions": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:extension": ("get", "extension", (401, 200, 200, 404, 200, 200)),
    "api:extension-approve": ("post", "extension", (401, 403, 200, 404, 403, 200)),
    "api:extension-reject": ("post", "extension", (401, 403, 409, 404, 403, 409)),
    "api:extension-cancel": ("post", "extension", (401, 200, 409, 404, 403, 409)),
    "api:tenants": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:tenant": ("get", "tenant", (401, 200, 200, 404, 200, 200)),
    "api:members": ("get", "tenant", (401, 200, 200, 404, 200, 200)),
    "api:member": ("delete", "api_member", (401, 403, 204, 404, 403, 204)),
    "api:quota-requests": ("get", "tenant", (401, 403, 200, 404, 200, 200)),
    "api:quota-request-approve": ("post", "quota_request", (401, 403, 403, 404, 403, 200)),
    # after the admin's approval above, the request is decided: 409
    "api:quota-request-reject": ("post", "quota_request", (401, 403, 403, 404, 403, 409)),
    "api:gpu-models": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:gpu-model": ("get", "gpu_model", (401, 200, 200, 200, 200, 200)),
    "api:offerings": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:offering": ("get", "offering", (401, 200, 200, 200, 200, 200)),
    # Pools are part of the catalog: everyone signed in reads them, admins write.
    "api:pools": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:pool": ("get", "pool", (401, 200, 200, 200, 200, 200)),
    "api:notebook-images": ("get", "", (401, 200, 200, 200, 200, 200)),
    # An enabled image: everyone signed in reads it (a disabled one is the admins' alone).
    "api:notebook-image": ("get", "notebook_image", (401, 200, 200, 200, 200, 200)),
    "cluster:capacity": ("get", "", (302, 200, 200, 200, 404, 200)),
    "cluster:tenant-runs": ("get", "tenant", (302, 200, 200, 404, 200, 200)),
    "cluster:run": ("get", "run", (302, 200, 200, 404, 200, 200)),
    # The walk's run is queued, not failed: retrying it is a conflict.
    "cluster:run-retry": ("post", "run", (302, 403, 403, 404, 403, 409)),
    "cluster:clusters": ("get", "", (302, 404, 404, 404, 404, 200)),
    "cluster:create": ("get", "", (302, 404, 404, 404, 404, 200)),
    "cluster:detail": ("get", "cluster", (302, 404, 404, 404, 404, 200)),
    "cluster:edit": ("get", "cluster", (302, 404, 404, 404, 404, 200)),
    "cluster:refresh": ("post", "cluster", (302, 404, 404, 404, 404, 400)),
    "api:capacity": ("get", "", (401, 200, 200, 200, 404, 200)),
    "api:clusters": ("get", "", (401, 404, 404, 404, 404, 200)),
    "api:cluster": ("get", "cluster", (401, 404, 404, 404, 404, 200)),
    "api:provisioning-runs": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:provisioning-run": ("get", "run", (401, 200, 200, 404, 200, 200)),
    "api:provisioning-run-retry": ("post", "run", (401, 403, 403, 404, 403, 409)),
    # Usage: everyone signed in sees their share; the metering windows are the admins'.
    "api:usage": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:usage-windows": ("get", "", (401, 404, 404, 404, 404, 200)),
    # Chargeback: everyone signed in reads the prices and their statements (a developer none);
    # periods are finance's and the admins'. The walk's cluster is not metered, so last month
    # closes at once; reopening it takes an admin and a reason (none given here).
    "api:rate-cards": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:statements": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:spend": ("get", "", (401, 200, 200, 200, 200, 200)),
    "api:statement": ("get", "api_statement", (401, 404, 200, 404, 200, 200)),
    "api:statement-lines": ("get", "api_statement", (401, 404, 200, 404, 200, 200)),
    "api:periods": ("get", "", (401, 404, 404, 404, 200, 200)),
    "api:period-close": ("post", "api_period", (401, 404, 404, 404, 200, 200)),
    "api:period-reopen": ("post", "api_period", (401, 404, 404, 404, 403, 400)),
    # The schema and its docs describe the API, not anyone's data: public.
    "api-schema": ("get", "", (200, 200, 200, 200, 200, 200)),
    "api-docs": ("get", "", (200, 200, 200, 200, 200, 200)),
    # Last: releasing the allocation stops the notebook the routes above use.
    "metering:mine": ("get", "", (302, 200, 200, 200, 200, 200)),
    "metering:tenant": ("get", "tenant", (302, 404, 200, 404, 200, 200)),
    # Its idle allocations, loaded after it (without JavaScript: the page with them).
    "metering:tenant-idle": ("get", "tenant", (302, 404, 200, 404, 200, 200)),
    "metering:all": ("get", "", (302, 404, 404, 404, 200, 200)),
    "metering:idle-remind": ("post", "tenant_allocation", (302, 404, 302, 404, 403, 302)),
    "metering:idle-release": ("post", "tenant_allocation", (302, 404, 200, 404, 403, 200)),
    # Chargeback: finance and admins see every statement, leads their tenants'. The walk's month
    # is the running one: closing it is a conflict; reopening needs an admin and a reason.
    "billing:statements": ("get", "", (302, 404, 200, 404, 200, 200)),
    # A section of the Chargeback page, loaded on its own (the spend chart).
    "billing:section": ("get", "chargeback_section", (302, 404, 200, 404, 200, 200)),
    "billing:statement": ("get", "statement", (302, 404, 200, 404, 200, 200)),
    "billing:statement-download": ("get", "statement_csv", (302, 404, 200, 404, 200, 200)),
    "billing:period-close": ("post", "period", (302, 404, 403, 404, 409, 409)),
    "billing:period-reopen": ("post", "period", (302, 404, 403, 404, 403, 400)),
    "billing:rates": ("get", "", (302, 200, 200, 200, 200, 200)),
    # Budgets: leads, finance and admins read the tenant's; finance and admins set and remove it
    # (the walk's form is empty: 400). Reading comes before removing.
    "api:tenant-budget": ("get", "tenant", (401, 404, 200, 404, 200, 200)),
    "billing:budget-set": ("post", "tenant", (302, 404, 403, 404, 400, 400)),
    "billing:budget-remove": ("post", "tenant", (302, 404, 403, 404, 200, 200)),
}

# Django's own admin has its own sign-in and staff check.
NOT_WALKED_NAMESPACES = ("admin:",)


def defined_routes() -> Iterator[str]:
    def walk(patterns: list[URLPattern | URLResolver], namespace: str) -> Iterator[str]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
                yield from walk(pattern.url_patterns, inner)
            elif pattern.name:
                yield f"{namespace}{pattern.name}"

    for name in walk(get_resolver().url_patterns, ""):
        if not name.startswith(NOT_WALKED_NAMESPACES):
            yield name


def test_every_route_is_walked() -> None:
    missing = sorted(set(defined_routes()) - set(ROUTES))
    assert missing == [], f"add these routes to ROUTES with their expected statuses: {missing}"


@pytest.fixture
def walk_kwargs(
    tenant_a, developer, lead, outsider, finance_user, admin_user
) -> dict[str, dict[str, Any]]:
    model = a100(admin_user)
    backend = mig_backend(admin_user)
    offering = offering_create(
        actor=admin_user, slug="a100-mig-1g", name="A100 1g.10gb", gpu_model=model,
        backend=backend, size="1g.10gb",
        resources={"nvidia.com/mig-1g.10gb": "1"}, gpu_eq="1/7",
    )  # fmt: skip
    notebook_image = notebook_image_create(
        actor=admin_user, slug="minimal", name="Minimal Python",
        image="quay.io/jupyter/minimal-notebook:2025-11-17",
    )  # fmt: skip
    walker = user_create(actor=None, username="walker")
    membership_set(actor=None, tenant=tenant_a, user=walker, role=MemberRole.DEVELOPER)
    api_walker = user_create(actor=None, username="api-walker")
    membership_set(actor=None, tenant=tenant_a, user=api_walker, role=MemberRole.DEVELOPER)
    quota_request = quota_request_create(
        actor=lead, tenant=tenant_a, gpu_model=model, amount=1, reason="walk"
    )
    quota_set(actor=None, tenant=tenant_a, gpu_model=model, gpu_eq=8)
    pending = gpu_request_submit(actor=developer, tenant=tenant_a, offering=offering, count=8)
    assert pending.state == "pending"
    page_request = gpu_request_submit(actor=developer, tenant=tenant_a, offering=offering, count=8)
    cluster = cluster_create(actor=None, name="walk")
    pool = gpu_pool_create(
        actor=admin_user, cluster=cluster.name, name="a100-mig", gpu_model=model, backend=backend
    )
    run = ProvisioningRun.objects.get(cluster=cluster, tenant=tenant_a)
    allocation = gpu_request_submit(actor=developer, tenant=tenant_a, offering=offering, count=1)
    notebook = notebook_launch(
        actor=developer, allocation_id=allocation.pk, image=notebook_image.slug
    )
    extension = gpu_request_extend(
        actor=developer, gpu_request=allocation, hours=20, reason="walk"
    ).extension_pending
    extended = gpu_request_submit(actor=developer, tenant=tenant_a, offering=offering, count=1)
    page_extension = gpu_request_extend(
        actor=developer, gpu_request=extended, hours=20, reason="walk"
    ).extension_pending
    assert extension is not None
    assert page_extension is not None
    with override_settings(KEYCLOAK_SYNC=True, PORTAL_MEMBERSHIP_SOURCE="portal"):
        directory_change = directory_member_queue(
            tenant_slug=tenant_a.slug, username="walker", role="lead", actor=None
        )
    assert directory_change is not None
    last_month = (datetime.now(UTC).date().replace(day=1) - timedelta(days=1)).replace(day=1)
    budget_set(actor=admin_user, tenant=tenant_a, unit="gpu_eq_hours", amount="100")
    return {
        "run": {"pk": run.pk},
        "cluster": {"name": cluster.name},
        "page_request": {"pk": page_request.pk, "action": "approve"},
        "": {},
        "home_panel": {"name": "my-notebooks"},
        "gpu_request": {"pk": pending.pk},
        "extension": {"pk": extension.pk},
        "page_extension": {"pk": page_extension.pk, "action": "approve"},
        "tenant": {"slug": tenant_a.slug},
        "tenant_section": {"slug": tenant_a.slug, "name": "members"},
        "chargeback_section": {"name": "spend"},
        "member": {"slug": tenant_a.slug, "username": walker.username},
        "api_member": {"slug": tenant_a.slug, "username": api_walker.username},
        "quota_request": {"slug": tenant_a.slug, "pk": quota_request.pk},
        "gpu_model": {"slug": model.slug},
        "offering": {"slug": offering.slug},
        "pool": {"cluster": pool.cluster, "name": pool.name},
        "notebook_image": {"slug": notebook_image.slug},
        "notebook": {"pk": notebook.pk},
        "tenant_allocation": {"slug": tenant_a.slug, "pk": allocation.pk},
        "notebook_snooze": {"pk": notebook.pk, "action": "snooze"},
        "api_token": {"pk": api_token_create(actor=developer, name="walk").token.pk},
        "directory_change": {"pk": directory_change.pk},
        "statement": {"statement_id": f"{current_month():%Y-%m}-{tenant_a.slug}"},
        "statement_csv": {"statement_id": f"{current_month():%Y-%m}-{tenant_a.slug}", "fmt": "csv"},
        "period": {"period": f"{current_month():%Y-%m}"},
        "api_period": {"month": f"{last_month:%Y-%m}"},
        "api_statement": {"statement_id": f"{last_month:%Y-%m}-{tenant_a.slug}"},
    }


@pytest.mark.parametrize("persona", PERSONAS)
def test_each_route_answers_each_persona_as_the_permission_table_says(
    request: pytest.FixtureRequest, persona: str, walk_kwargs: dict[str, dict[str, Any]]
) -> None:
    client = Client()
    if persona != "anonymous":
        client.force_login(request.getfixturevalue(persona))
    column = PERSONAS.index(persona)
    wrong = []
    for name, (method, kwargs_name, statuses) in ROUTES.items():
        url = reverse(name, kwargs=walk_kwargs[kwargs_name])
        response = getattr(client, method)(url)
        expected = statuses[column]
        if response.status_code != expected:
            wrong.append(f"{method.upper()} {url} ({name}): {response.status_code} not {expected}")
    assert wrong == []
