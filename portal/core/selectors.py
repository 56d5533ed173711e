"""Reads of the audit trail, narrowed to what each persona may see (DOMAIN.md)."""

from datetime import datetime

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


def audit_events_filtered(
    events: QuerySet[AuditEvent],
    *,
    tenant: str = "",
    actor: str = "",
    action: str = "",
    target_type: str = "",
    target_id: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[AuditEvent]:
    if tenant:
        events = events.filter(tenant__slug=tenant)
    if actor:
        events = events.filter(actor_name=actor)
    if action:
        events = events.filter(action__startswith=action)
    if target_type:
        events = events.filter(target_type=target_type)
    if target_id:
        events = events.filter(target_id=target_id)
    if since:
        events = events.filter(at__gte=since)
    if until:
        events = events.filter(at__lt=until)
    return events
