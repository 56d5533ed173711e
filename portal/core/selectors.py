"""Reads of the audit trail, narrowed to what each persona may see (DOMAIN.md; the rules are
the scope the tenants app registers for AuditEvent)."""

from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import QuerySet

from portal.core.models import AuditEvent


def audit_events_for(user: AbstractBaseUser) -> QuerySet[AuditEvent]:
    """The audit events `user` may see (`AuditEvent.objects.visible_to`), with their tenant."""
    return AuditEvent.objects.select_related("tenant").visible_to(user)


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
