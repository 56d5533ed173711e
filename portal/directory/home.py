"""The directory app's panel on the admin's home (portal.core.home): Keycloak changes that are
stuck, failed (Keycloak refused them) or pending for longer than the send loop takes."""

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.core.home import HOME_ROWS, home_register
from portal.core.pagination import first_with_count
from portal.directory.models import ChangeState
from portal.directory.selectors import directory_changes_for, directory_status_for

# Pending changes are sent every minute: one still pending after this long is stuck.
STUCK_AFTER = timedelta(minutes=10)


def stuck_changes_context(user: User) -> dict[str, Any]:
    """Whether the sync is on, and the stuck changes in the order they are sent. Three
    queries."""
    changes = directory_changes_for(
        user, states=(ChangeState.PENDING, ChangeState.FAILED), queue_order=True
    )
    stuck = changes.filter(
        Q(state=ChangeState.FAILED) | Q(created_at__lt=timezone.now() - STUCK_AFTER)
    )
    rows, count = first_with_count(stuck, HOME_ROWS)
    return {
        "directory": directory_status_for(user),
        "stuck_changes": rows,
        "stuck_count": count,
    }


def directory_home_register() -> None:
    home_register(
        "directory",
        {"admin"},
        position=25,
        title=_("Keycloak changes"),
        template="directory/_home_changes.html",
        context=stuck_changes_context,
    )
