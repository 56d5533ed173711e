"""Reads of the directory sync, for admins only: everyone else finds nothing here (NotFound)."""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.core.errors import NotFound
from portal.core.visibility import get_visible_or_404
from portal.directory.models import ChangeState, DirectoryChange, DirectoryReport


def _require_admin(user: User) -> None:
    if not user.is_portal_admin:
        raise NotFound(_("There is no such page."))


def directory_changes_for(
    user: User, *, states: tuple[str, ...] | None = None, queue_order: bool = False
) -> QuerySet[DirectoryChange]:
    """Changes, optionally only those in `states`: newest first, or in the order they are
    sent (`queue_order`, so the change holding the queue comes first)."""
    _require_admin(user)
    changes = (
        DirectoryChange.objects.select_related("actor")
        .visible_to(user)
        .order_by("id" if queue_order else "-id")
    )
    return changes.filter(state__in=states) if states else changes


def directory_change_for(user: User, pk: int) -> DirectoryChange:
    return get_visible_or_404(DirectoryChange.objects.select_related("actor"), user, pk=pk)


def directory_reports_for(user: User) -> QuerySet[DirectoryReport]:
    """Reconcile reports, newest first."""
    _require_admin(user)
    return DirectoryReport.objects.order_by("-started_at", "-id")


@dataclass(frozen=True)
class DirectoryStatus:
    """How the sync is set up, and how many changes are in each state."""

    sync: bool
    server_url: str
    realm: str
    client_id: str
    membership_source: str
    group_template: str
    reconcile_seconds: int
    pending: int
    failed: int
    sent: int

    @property
    def portal_decides(self) -> bool:
        return self.membership_source == "portal"


def directory_status_for(user: User) -> DirectoryStatus:
    """The settings the sync runs with and the change counts, in one query."""
    _require_admin(user)
    counts = DirectoryChange.objects.aggregate(
        pending=Count("id", filter=Q(state=ChangeState.PENDING)),
        failed=Count("id", filter=Q(state=ChangeState.FAILED)),
        sent=Count("id", filter=Q(state=ChangeState.SENT)),
    )
    return DirectoryStatus(
        sync=bool(settings.KEYCLOAK_SYNC),
        server_url=settings.KEYCLOAK_SERVER_URL,
        realm=settings.KEYCLOAK_REALM,
        client_id=settings.KEYCLOAK_ADMIN_CLIENT_ID,
        membership_source=settings.PORTAL_MEMBERSHIP_SOURCE,
        group_template=settings.PORTAL_TENANT_GROUP,
        reconcile_seconds=settings.KEYCLOAK_SYNC_SECONDS,
        pending=counts["pending"],
        failed=counts["failed"],
        sent=counts["sent"],
    )
