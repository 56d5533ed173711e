"""Reads of the audit trail, narrowed to what each persona may see (DOMAIN.md)."""

from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.core.models import AuditEvent
from tenants.models import MemberRole, Membership


def audit_events_visible_to(user: User) -> QuerySet[AuditEvent]:
    """Finance and admins: everything; leads: their tenants' events and their own actions;
    everyone else: their own actions."""
    events = AuditEvent.objects.select_related("tenant")
    if user.sees_all_tenants:
        return events
    led = Membership.objects.filter(user=user, role=MemberRole.LEAD).values("tenant")
    return events.filter(Q(actor=user) | Q(tenant__in=led))
