"""Reads of the audit trail, narrowed to what each persona may see (DOMAIN.md; the rules are
the scope the tenants app registers for AuditEvent)."""

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import QuerySet

from portal.core.models import AuditEvent


def audit_events_for(user: AbstractBaseUser) -> QuerySet[AuditEvent]:
    """The audit events `user` may see (`AuditEvent.objects.visible_to`), with their tenant."""
    return AuditEvent.objects.select_related("tenant").visible_to(user)
