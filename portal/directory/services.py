"""Every write of the Keycloak directory sync: queueing changes, sending them in order, an
admin's retry, and reconciling the portal's memberships with Keycloak's groups.

Changes are queued in the transaction of the portal change that needs them and sent by a task
once it commits. Sending takes the oldest pending change with a row lock (skipping a locked
one), applies it and records the outcome in one short transaction per change, so two workers
never send the same change and never overtake each other: a worker that finds the head of the
queue locked stops, and the one holding it carries on.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.core.audit import audit_record
from portal.core.errors import Conflict, InvalidTransition, NotFound
from portal.directory.keycloak import (
    ROLES,
    DirectoryError,
    DirectoryRefused,
    DirectoryUnavailable,
    KeycloakDirectory,
)
from portal.directory.models import ChangeKind, ChangeState, DirectoryChange, DirectoryReport
from tenants.models import Membership, Tenant, TenantState

logger = logging.getLogger(__name__)

# At most this many changes per batch; the beat's next run (every minute) takes the rest.
SEND_BATCH = 500


def _sync_on() -> bool:
    return bool(settings.KEYCLOAK_SYNC)


def _portal_decides_memberships() -> bool:
    return bool(settings.PORTAL_MEMBERSHIP_SOURCE == "portal")


def _send_on_commit() -> None:
    from portal.directory.tasks import send_directory_changes  # noqa: PLC0415  (cycle)

    send_directory_changes.delay()


def _queue(
    *,
    kind: ChangeKind,
    tenant_slug: str,
    username: str,
    role: str,
    actor: User | None,
    unless_failed: bool = False,
) -> tuple[DirectoryChange, bool]:
    """The change, and whether it is new. The latest change for the same tenant (and user)
    decides what Keycloak ends up with: if it is pending and says the same, another one would
    add nothing; with `unless_failed`, neither would one Keycloak refused already (it waits
    for an admin's retry)."""
    latest = (
        DirectoryChange.objects.filter(kind=kind, tenant_slug=tenant_slug, username=username)
        .order_by("-id")
        .first()
    )
    waiting = (ChangeState.PENDING, ChangeState.FAILED) if unless_failed else (ChangeState.PENDING,)
    if latest is not None and latest.state in waiting and latest.role == role:
        return latest, False
    change = DirectoryChange.objects.create(
        kind=kind, tenant_slug=tenant_slug, username=username, role=role, actor=actor
    )
    _send_on_commit()
    return change, True


# The two queue functions run inside the caller's transaction (no savepoint of their own:
# with the sync off they cost no query at all).


def directory_tenant_queue(*, tenant_slug: str, actor: User | None) -> DirectoryChange | None:
    """Queue creating the tenant's groups in Keycloak, sent once the caller's transaction
    commits. None when the sync is off."""
    if not _sync_on():
        return None
    change, _new = _queue(
        kind=ChangeKind.TENANT, tenant_slug=tenant_slug, username="", role="", actor=actor
    )
    return change


def directory_member_queue(
    *, tenant_slug: str, username: str, role: str, actor: User | None
) -> DirectoryChange | None:
    """Queue making `username`'s groups in the tenant match `role` ("lead", "developer", or ""
    for none), sent once the caller's transaction commits. None unless the sync is on and the
    portal decides memberships (PORTAL_MEMBERSHIP_SOURCE=portal)."""
    if not (_sync_on() and _portal_decides_memberships()):
        return None
    if role and role not in ROLES:
        raise ValueError(f"Unknown role {role!r}")
    change, _new = _queue(
        kind=ChangeKind.MEMBER, tenant_slug=tenant_slug, username=username, role=role, actor=actor
    )
    return change


# Sending


@dataclass(frozen=True)
class SendResult:
    """What one batch did; `held` is the transient error that stopped it, if any."""

    sent: int = 0
    failed: int = 0
    held: str = ""

    def summary(self) -> dict[str, int | str]:
        return {"sent": self.sent, "failed": self.failed, "held": self.held}


Outcome = Literal["sent", "failed", "held"]

# About a day and a half of the beat's minutes, fewer with sends after commits: a change that
# has held the queue this long fails, and the ones after it go.
MAX_HELD_ATTEMPTS = 2000


def _apply(directory: KeycloakDirectory, change: DirectoryChange) -> None:
    if change.kind == ChangeKind.TENANT:
        directory.tenant_groups_ensure(change.tenant_slug)
    else:
        directory.member_role_set(
            tenant_slug=change.tenant_slug, username=change.username, role=change.role
        )


def _record_failure(change: DirectoryChange, message: str) -> None:
    change.state = ChangeState.FAILED
    change.last_error = message
    change.save(update_fields=["state", "attempts", "last_error"])
    audit_record(
        actor=None,
        action="directory_change.fail",
        target=change,
        tenant=Tenant.objects.filter(slug=change.tenant_slug).first(),
        changes={"state": [ChangeState.PENDING.value, ChangeState.FAILED.value]},
        comment=message,
    )


def _hold(change: DirectoryChange, message: str) -> tuple[Outcome, str]:
    """Keep the change at the head of the queue for the next batch, unless it has held it for
    MAX_HELD_ATTEMPTS: then it may be this change (a permission on one user, a proxy rule),
    and it fails visibly, for an admin to retry, so the queue moves on."""
    if change.attempts >= MAX_HELD_ATTEMPTS:
        message = f"Gave up after {change.attempts} attempts: {message}"
        _record_failure(change, message)
        return "failed", message
    change.last_error = message
    change.save(update_fields=["attempts", "last_error"])
    return "held", message


def _send_next(directory: KeycloakDirectory) -> tuple[Outcome, str] | None:
    """Send the oldest pending change; None when there is none or another worker has it."""
    with transaction.atomic():
        head = (
            DirectoryChange.objects.filter(state=ChangeState.PENDING)
            .order_by("id")
            .values_list("pk", flat=True)
            .first()
        )
        if head is None:
            return None
        change = (
            DirectoryChange.objects.select_for_update(skip_locked=True)
            .filter(pk=head, state=ChangeState.PENDING)
            .first()
        )
        if change is None:
            return None  # another worker is sending it, and the ones after it
        change.attempts += 1
        # The row stays locked for the few requests one change takes (each bounded by
        # OIDC_TIMEOUT_SECONDS): that lock is what keeps a second worker from overtaking.
        try:
            _apply(directory, change)
        except DirectoryUnavailable as error:
            return _hold(change, error.message)
        except DirectoryRefused as error:
            _record_failure(change, error.message)
            return "failed", error.message
        except DatabaseError:
            raise
        except Exception as error:  # a bug must not hold the queue: this change fails, visibly
            logger.exception("directory change %s failed unexpectedly", change.pk)
            _record_failure(change, f"Unexpected error: {type(error).__name__}: {error}")
            return "failed", str(error)
        change.state = ChangeState.SENT
        change.sent_at = timezone.now()
        change.save(update_fields=["state", "attempts", "sent_at"])
        return "sent", ""


def directory_changes_send(*, limit: int = SEND_BATCH) -> SendResult:
    """Send pending changes to Keycloak in id order.

    Keycloak unavailable: the batch stops, the change stays pending with one more attempt and
    the error (nothing after it overtakes it); the next batch tries again. Refused: that change
    is failed, with the reason and an audit event, and the batch goes on.
    """
    directory = KeycloakDirectory.from_settings()
    sent = failed = 0
    for _attempt in range(limit):
        outcome = _send_next(directory)
        if outcome is None:
            break
        state, message = outcome
        if state == "held":
            return SendResult(sent=sent, failed=failed, held=message)
        if state == "sent":
            sent += 1
        else:
            failed += 1
    return SendResult(sent=sent, failed=failed)


@transaction.atomic
def directory_change_retry(*, actor: User, change_id: int) -> DirectoryChange:
    """An admin sends a failed change again, with a fresh count of attempts.

    NotFound for anyone else; InvalidTransition unless the change has failed; Conflict when a
    later change for the same member is pending or sent (it decides; this one is superseded).
    """
    if not actor.is_portal_admin:
        raise NotFound(_("There is no directory change %(id)s.") % {"id": change_id})
    change = DirectoryChange.objects.select_for_update().filter(pk=change_id).first()
    if change is None:
        raise NotFound(_("There is no directory change %(id)s.") % {"id": change_id})
    if change.state != ChangeState.FAILED:
        raise InvalidTransition(
            _("Change %(id)s is %(state)s; only failed changes are retried.")
            % {"id": change.pk, "state": change.get_state_display()}
        )
    if change.kind == ChangeKind.MEMBER:
        later = (
            DirectoryChange.objects.filter(
                kind=change.kind,
                tenant_slug=change.tenant_slug,
                username=change.username,
                pk__gt=change.pk,
            )
            .exclude(state=ChangeState.FAILED)
            .order_by("-id")
            .first()
        )
        if later is not None:
            raise Conflict(
                _(
                    "Change %(later)s for %(username)s in %(tenant)s came after this one and "
                    "is %(state)s: it decides their groups, so change %(id)s is not sent again."
                )
                % {
                    "later": later.pk,
                    "username": change.username,
                    "tenant": change.tenant_slug,
                    "state": later.get_state_display(),
                    "id": change.pk,
                }
            )
    change.state = ChangeState.PENDING
    change.attempts = 0
    change.save(update_fields=["state", "attempts"])
    audit_record(
        actor=actor,
        action="directory_change.retry",
        target=change,
        tenant=Tenant.objects.filter(slug=change.tenant_slug).first(),
        changes={"state": [ChangeState.FAILED.value, ChangeState.PENDING.value]},
        comment=change.last_error,
    )
    _send_on_commit()
    return change


# Reconciling


def directory_differences(
    *, tenant_slug: str, portal: dict[str, str], keycloak: dict[str, set[str]]
) -> list[dict[str, str]]:
    """Where one tenant's memberships differ: `portal` maps usernames to roles, `keycloak` maps
    roles to the usernames in their groups. Keycloak keeps usernames in lower case."""
    differences = []
    for role in ROLES:
        in_portal = {name.lower() for name, held in portal.items() if held == role}
        in_keycloak = {name.lower() for name in keycloak.get(role, set())}
        differences += [
            {"tenant": tenant_slug, "role": role, "username": name, "where": "portal"}
            for name in sorted(in_portal - in_keycloak)
        ]
        differences += [
            {"tenant": tenant_slug, "role": role, "username": name, "where": "keycloak"}
            for name in sorted(in_keycloak - in_portal)
        ]
    return differences


def _memberships() -> dict[str, dict[str, str]]:
    """`{tenant slug: {username: role}}` of every tenant not archived, in one query."""
    members: dict[str, dict[str, str]] = {}
    rows = Membership.objects.exclude(tenant__state=TenantState.ARCHIVED).values_list(
        "tenant__slug", "user__username", "role"
    )
    for slug, username, role in rows:
        members.setdefault(slug, {})[username] = role
    return members


def directory_reconcile(*, started_at: datetime | None = None) -> DirectoryReport:
    """Compare every tenant's memberships (not archived) with its groups in Keycloak, creating
    missing groups, and record a report.

    When the portal decides memberships, queue the changes that make Keycloak match it (a
    member only Keycloak has is removed from the group); otherwise only report, since the
    identity provider's groups win at the member's next sign-in. Keycloak unavailable or
    refusing: a report with ok=False and the error, and nothing else changes.
    """
    started = started_at or timezone.now()
    slugs = list(
        Tenant.objects.exclude(state=TenantState.ARCHIVED)
        .order_by("slug")
        .values_list("slug", flat=True)
    )
    directory = KeycloakDirectory.from_settings()
    keycloak: dict[str, dict[str, set[str]]] = {}
    try:
        for slug in slugs:
            keycloak[slug] = directory.tenant_members(slug)
    except DirectoryError as error:
        return DirectoryReport.objects.create(
            started_at=started,
            finished_at=timezone.now(),
            ok=False,
            error=error.message,
            groups_created=directory.groups_created,
            tenants=len(keycloak),
        )
    with transaction.atomic():
        # Read after Keycloak, so a fix is queued with the memberships as they are now.
        portal = _memberships()
        differences = [
            difference
            for slug in slugs
            for difference in directory_differences(
                tenant_slug=slug, portal=portal.get(slug, {}), keycloak=keycloak[slug]
            )
        ]
        queued = _queue_fixes(differences, portal) if _portal_decides_memberships() else 0
        report = DirectoryReport.objects.create(
            started_at=started,
            finished_at=timezone.now(),
            ok=True,
            differences=differences,
            groups_created=directory.groups_created,
            changes_queued=queued,
            tenants=len(slugs),
        )
        if queued:
            audit_record(
                actor=None,
                action="directory.reconcile",
                target=report,
                changes={"changes_queued": [0, queued]},
                comment=f"{len(differences)} differences with Keycloak; "
                f"{queued} changes queued to make Keycloak match the portal.",
            )
        if _portal_decides_memberships() and (
            queued or DirectoryChange.objects.filter(state=ChangeState.PENDING).exists()
        ):
            _send_on_commit()
    return report


def _queue_fixes(differences: list[dict[str, str]], portal: dict[str, dict[str, str]]) -> int:
    """Queue one change per member who differs, to the portal's role (none: out of both),
    unless the same change is pending, or failed and waiting for an admin."""
    queued = 0
    fixed: set[tuple[str, str]] = set()
    for difference in differences:
        slug = difference["tenant"]
        by_lower = {name.lower(): name for name in portal.get(slug, {})}
        username = by_lower.get(difference["username"], difference["username"])
        if (slug, username) in fixed:
            continue
        fixed.add((slug, username))
        role = portal.get(slug, {}).get(username, "")
        _change, created = _queue(
            kind=ChangeKind.MEMBER,
            tenant_slug=slug,
            username=username,
            role=role,
            actor=None,
            unless_failed=True,
        )
        queued += created
    return queued


def directory_reconcile_request(*, actor: User) -> None:
    """An admin asks for a reconcile now; it runs as a task once this commits.

    NotFound for anyone else; Conflict when the sync is off."""
    if not actor.is_portal_admin:
        raise NotFound(_("There is no such page."))
    if not _sync_on():
        raise Conflict(
            _(
                "The Keycloak sync is off: set %(client_id)s and %(secret)s (and %(issuer)s) "
                "to turn it on."
            )
            % {
                "client_id": "KEYCLOAK_ADMIN_CLIENT_ID",
                "secret": "KEYCLOAK_ADMIN_CLIENT_SECRET",
                "issuer": "OIDC_ISSUER_URL",
            }
        )
    from portal.directory.tasks import reconcile_directory  # noqa: PLC0415  (cycle)

    reconcile_directory.delay()
