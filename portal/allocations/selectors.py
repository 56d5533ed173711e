"""Reads of GPU requests. Who sees which is `GpuRequest.objects.visible_to` (tenants.access);
these add what the pages and API show with each request."""

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.core.visibility import VisibleQuerySet, get_visible_or_404
from tenants.access import tenants_led_by


def _requests() -> VisibleQuerySet[GpuRequest]:
    return GpuRequest.objects.select_related(
        "tenant", "requester", "offering", "gpu_model", "decided_by"
    )


def gpu_requests_for(user: User) -> QuerySet[GpuRequest]:
    """The requests `user` may see, with what a list shows of each."""
    return _requests().visible_to(user)


def gpu_request_for(user: User, pk: int) -> GpuRequest:
    """The request `pk` if `user` may see it; NotFound otherwise."""
    return get_visible_or_404(_requests(), user, pk=pk)


def approvals_queue_for(user: User) -> QuerySet[GpuRequest]:
    """Pending requests a lead (or admin) may decide, oldest first."""
    pending = gpu_requests_for(user).filter(state="pending").order_by("created_at", "id")
    if user.is_portal_admin:
        return pending
    return pending.filter(tenant__in=tenants_led_by(user))
