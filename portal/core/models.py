from typing import Any

from django.conf import settings
from django.db import models

from portal.core.loading import LoadedFromRows
from portal.core.visibility import VisibleQuerySet


class WorkerHeartbeat(models.Model):
    """When a Celery worker last ran the periodic heartbeat: shows that beat and workers live."""

    worker = models.CharField(max_length=200, unique=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.worker} at {self.beat_at:%Y-%m-%d %H:%M:%S}"


class AuditEvent(LoadedFromRows, models.Model):
    """Who did what to which object, when, from where, with the before/after of what changed.

    Append-only: nothing in the code updates a row, and only `audit_archive` deletes, the events
    past their retention once they are in an archive file. On PostgreSQL a trigger refuses
    UPDATE and every other DELETE, and the portal's runtime role may only INSERT and SELECT
    (portal/core/database_roles.py). Names are copied so an event reads the same after renames.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    target_name = models.CharField(max_length=200, blank=True)
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    changes = models.JSONField(default=dict, blank=True)
    comment = models.TextField(blank=True)
    request_id = models.CharField(max_length=64, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        # The log's order (-at, -id), alone and after each branch of the visibility filter.
        indexes = [
            models.Index(fields=["tenant", "-at"]),
            models.Index(fields=["target_type", "target_id"]),
            models.Index(fields=["actor", "-at"]),
            models.Index(fields=["-at", "-id"], name="auditevent_newest"),
        ]

    def __str__(self) -> str:
        who = self.actor_name or "system"
        return (
            f"{self.at:%Y-%m-%d %H:%M:%S} {who} {self.action} {self.target_type}:{self.target_id}"
        )

    @property
    def change_rows(self) -> list[tuple[str, Any, Any]]:
        """Each changed field with its value before and after, as the audit log shows them
        (a value that is not a [before, after] pair is shown as the value after)."""
        rows = []
        for field, change in (self.changes or {}).items():
            if isinstance(change, list | tuple) and len(change) == 2:
                rows.append((field, change[0], change[1]))
            else:
                rows.append((field, None, change))
        return rows


class AuditArchive(models.Model):
    """One run of `audit_archive`: the events before `cutoff` went to `file`, then were deleted.

    Written by the owner role only (the runtime role may read it); the audit event of the run
    names this row.
    """

    at = models.DateTimeField(auto_now_add=True)
    cutoff = models.DateTimeField()
    count = models.PositiveIntegerField()
    file = models.CharField(max_length=255)
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return self.file


class IdempotencyKey(models.Model):
    """The first answer to a POST sent with an `Idempotency-Key`, replayed to its retries.

    Keys are per user and kept 24 hours; a retry with another body is a conflict.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    endpoint = models.CharField(max_length=200)
    body_hash = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(null=True)
    response = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_unique_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
