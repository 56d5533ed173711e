from datetime import timedelta

from django.utils import timezone

from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.allocations.tasks import expire_allocations
from portal.core.models import AuditEvent
from tenants.selectors import remaining_gpu_eq
from tests.conftest import wait_until


def test_a_real_worker_expires_allocations_past_their_end_and_twice_is_harmless(
    celery_worker, developer, a100_tenant, catalog
) -> None:
    whole = catalog["a100-80gb-whole"]
    allocation = gpu_request_submit(actor=developer, tenant=a100_tenant, offering=whole, count=1)
    GpuRequest.objects.filter(pk=allocation.pk).update(
        ends_at=timezone.now() - timedelta(minutes=1)
    )
    assert remaining_gpu_eq(a100_tenant, whole.gpu_model) == 9

    expire_allocations.delay()
    wait_until(
        lambda: GpuRequest.objects.get(pk=allocation.pk).state == RequestState.EXPIRED,
        what="the worker to expire the allocation",
    )
    expire_allocations.delay()
    wait_until(
        lambda: celery_worker.state.total_count.get(expire_allocations.name, 0) >= 2,
        what="the worker to run the task a second time",
    )

    assert remaining_gpu_eq(a100_tenant, whole.gpu_model) == 10
    assert AuditEvent.objects.filter(action="gpu_request.expire").count() == 1
