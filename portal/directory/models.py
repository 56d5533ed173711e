"""The Keycloak directory sync's records: changes waiting to be sent, and reconcile reports.

A change is queued in the transaction of the portal change that needs it and sent by a task
once that commits, so a Keycloak outage delays it but never loses it.
"""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.core.visibility import VisibleQuerySet, register_scope


class ChangeKind(models.TextChoices):
    TENANT = "tenant", _("make sure the tenant's groups exist")
    MEMBER = "member", _("make a user's groups in the tenant match the role")


class ChangeState(models.TextChoices):
    PENDING = "pending", pgettext_lazy("directory change", "pending")
    SENT = "sent", pgettext_lazy("directory change", "sent")
    FAILED = "failed", pgettext_lazy("directory change", "failed")


class ChangeRole(models.TextChoices):
    NONE = "", _("none (not a member)")
    DEVELOPER = "developer", _("developer")
    LEAD = "lead", _("lead")


class DirectoryChange(models.Model):
    """One change for Keycloak. Changes are sent in id order; a transient failure leaves the
    change pending (it holds back the ones after it), a refusal leaves it failed."""

    kind = models.CharField(max_length=16, choices=ChangeKind.choices)
    tenant_slug = models.CharField(max_length=61)
    username = models.CharField(
        max_length=150, blank=True, help_text=_("Blank for a tenant change")
    )
    role = models.CharField(max_length=16, choices=ChangeRole.choices, blank=True)
    state = models.CharField(
        max_length=16, choices=ChangeState.choices, default=ChangeState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["state", "id"]),
            models.Index(fields=["tenant_slug", "username", "id"]),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind="member") | models.Q(username="", role=""),
                name="directory_change_tenant_kind_has_no_member",
            ),
        ]

    def __str__(self) -> str:
        return f"directory change {self.pk}: {self.description}"

    @property
    def description(self) -> str:
        """What the change does, for people: `vision: rhea → lead`."""
        if self.kind == ChangeKind.TENANT:
            return gettext("%(tenant)s: groups") % {"tenant": self.tenant_slug}
        return gettext("%(tenant)s: %(username)s → %(role)s") % {
            "tenant": self.tenant_slug,
            "username": self.username,
            "role": self.role or gettext("no role"),
        }


class DirectoryReport(models.Model):
    """One reconcile run: what differed between the portal's memberships and Keycloak's groups.

    `differences` lists `{"tenant", "role", "username", "where"}`, where `where` is `portal`
    (only in the portal) or `keycloak` (only in Keycloak).
    """

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    ok = models.BooleanField()
    error = models.TextField(blank=True)
    differences = models.JSONField(default=list, blank=True)
    groups_created = models.PositiveIntegerField(default=0)
    changes_queued = models.PositiveIntegerField(default=0)
    tenants = models.PositiveIntegerField(default=0, help_text=_("Tenants compared"))

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"directory reconcile {self.pk} ({'ok' if self.ok else 'failed'})"


def _visible_directory_changes(
    changes: models.QuerySet[DirectoryChange], user: User
) -> models.QuerySet[DirectoryChange]:
    """Admins only: the directory sync is theirs."""
    return changes if user.is_portal_admin else changes.none()


register_scope(DirectoryChange, _visible_directory_changes)
