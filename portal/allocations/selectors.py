from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.core.errors import NotFound
from tenants.models import MemberRole, Membership


def gpu_requests_visible_to(user: User) -> QuerySet[GpuRequest]:
    """Admins and finance: all; leads: their tenants'; everyone: their own."""
    requests = GpuRequest.objects.select_related(
        "tenant", "requester", "offering", "gpu_model", "decided_by"
    )
    if user.sees_all_tenants:
        return requests
    led = Membership.objects.filter(user=user, role=MemberRole.LEAD).values("tenant")
    return requests.filter(Q(requester=user) | Q(tenant__in=led))


def gpu_request_for(user: User, pk: int) -> GpuRequest:
    """The request `pk` if `user` may see it; NotFound otherwise."""
    gpu_request = gpu_requests_visible_to(user).filter(pk=pk).first()
    if gpu_request is None:
        raise NotFound(f"There is no request {pk}.")
    return gpu_request


def approvals_queue_for(user: User) -> QuerySet[GpuRequest]:
    """Pending requests a lead (or admin) may decide, oldest first."""
    pending = gpu_requests_visible_to(user).filter(state="pending").order_by("created_at", "id")
    if user.is_portal_admin:
        return pending
    led = Membership.objects.filter(user=user, role=MemberRole.LEAD).values("tenant")
    return pending.filter(tenant__in=led)
