"""Concurrent requests on PostgreSQL, each thread with its own connection: no oversubscription."""

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction

from django.db import connection

from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.catalog.gpu_eq import gpu_eq_sum
from portal.core.models import AuditEvent
from tenants.selectors import remaining_gpu_eq


def submit_all(requests, developer, tenant) -> list[str]:
    """Submit (offering, count) pairs all at once from as many threads; the resulting states."""
    barrier = threading.Barrier(len(requests))

    def one(offering_and_count) -> str:
        offering, count = offering_and_count
        try:
            barrier.wait()
            result = gpu_request_submit(
                actor=developer, tenant=tenant, offering=offering, count=count
            )
            return result.state
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        return list(pool.map(one, requests))


def test_fifty_concurrent_requests_never_oversubscribe(
    transactional_db, developer, a100_tenant, catalog
) -> None:
    whole = catalog["a100-80gb-whole"]

    states = submit_all([(whole, 1)] * 50, developer, a100_tenant)

    assert states.count(RequestState.APPROVED) == 10
    assert states.count(RequestState.REJECTED) == 40
    assert remaining_gpu_eq(a100_tenant, whole.gpu_model) == 0
    assert AuditEvent.objects.filter(action="gpu_request.submit").count() == 50


def test_mixed_fractional_requests_never_exceed_the_quota(
    transactional_db, developer, a100_tenant, catalog
) -> None:
    offerings = [catalog[slug] for slug in (
        "a100-80gb-mig-1g-10gb", "a100-80gb-mig-3g-40gb", "a100-80gb-time-slicing-1-4",
        "a100-80gb-hami-20480mib", "a100-80gb-whole",
    )]  # fmt: skip
    rng = random.Random(7)
    requests = [(rng.choice(offerings), 1) for _ in range(60)]

    states = submit_all(requests, developer, a100_tenant)

    held = gpu_eq_sum(
        GpuRequest.objects.filter(tenant=a100_tenant, state__in=HOLDING_STATES), name="gpu_eq"
    )
    assert held <= 10
    assert held == 10 - remaining_gpu_eq(a100_tenant, offerings[0].gpu_model)
    assert states.count(RequestState.REJECTED) > 0  # 60 requests of about 0.4 each exceed 10
    # A refusal means less was left than a request of at most 1, and nothing was given back.
    assert 10 - held < Fraction(1)
