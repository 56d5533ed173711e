"""Reads of tenants, narrowed to what a user may see: one access path for pages, API and tasks."""

from django.db.models import Count, Prefetch, QuerySet

from portal.accounts.models import User
from tenants.models import MemberRole, Membership, Tenant


def tenants_visible_to(user: User) -> QuerySet[Tenant]:
    """Every tenant for admins and finance; otherwise the tenants the user is a member of."""
    if user.sees_all_tenants:
        return Tenant.objects.all()
    # A subquery, not a join: annotations over memberships then count every member.
    return Tenant.objects.filter(pk__in=Membership.objects.filter(user=user).values("tenant"))


def tenants_led_by(user: User) -> QuerySet[Tenant]:
    return Tenant.objects.filter(
        pk__in=Membership.objects.filter(user=user, role=MemberRole.LEAD).values("tenant")
    )


def memberships_of(user: User) -> QuerySet[Membership]:
    return Membership.objects.filter(user=user).select_related("tenant")


def tenants_with_members(tenants: QuerySet[Tenant]) -> QuerySet[Tenant]:
    """Tenants with their memberships (and users) prefetched and counted, in two queries."""
    return tenants.annotate(member_count=Count("memberships")).prefetch_related(
        Prefetch("memberships", queryset=Membership.objects.select_related("user"))
    )
