"""Retry policies around the directory sync's services. Both are no-ops while the sync is off.

Keycloak's own failures never escape the services: a change that could not be sent waits in
the table (the beat sends every minute) and a reconcile that could not reach Keycloak is a
report saying so. What remains to retry is the portal's own database going away mid-batch.
"""

from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import OperationalError

from portal.core.task_base import RobustlySentTask
from portal.directory import services


# The database going away mid-batch: back off 5, 10, 20 s. The work itself is safe to repeat.
@shared_task(
    ignore_result=True,
    autoretry_for=(OperationalError,),
    retry_backoff=5,
    retry_backoff_max=60,
    max_retries=3,
    # A lost send (Redis down) loses nothing: the change waits in the table for the beat.
    base=RobustlySentTask,
)
def send_directory_changes() -> dict[str, int | str] | str:
    """Every minute, and after each change is queued: send pending changes in order."""
    if not settings.KEYCLOAK_SYNC:
        return "sync off"
    return services.directory_changes_send().summary()


@shared_task(
    ignore_result=True,
    autoretry_for=(OperationalError,),
    retry_backoff=5,
    retry_backoff_max=60,
    max_retries=3,
)
def reconcile_directory() -> dict[str, Any] | str:
    """Every KEYCLOAK_SYNC_SECONDS, or when an admin asks: compare and report (and fix, when
    the portal decides memberships)."""
    if not settings.KEYCLOAK_SYNC:
        return "sync off"
    report = services.directory_reconcile()
    return {
        "report": report.pk,
        "ok": report.ok,
        "differences": len(report.differences),
        "changes_queued": report.changes_queued,
    }
