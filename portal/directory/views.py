"""The admins' directory sync page: how the sync is set up, the changes waiting or failed (with
Retry), the latest reconcile reports, and Reconcile now. Writes go through directory.services."""

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from portal.core.http import AuthenticatedHttpRequest
from portal.core.pages import polled_page
from portal.core.pagination import BoundedPaginator
from portal.directory import services
from portal.directory.models import ChangeState
from portal.directory.selectors import (
    directory_change_for,
    directory_changes_for,
    directory_reports_for,
    directory_status_for,
)

PER_PAGE = 25
LATEST_REPORTS = 5
# After Reconcile now, the page waits this long at most for the report to appear.
REPORT_WAIT = timedelta(minutes=5)


def _reconcile_asked_at(request: AuthenticatedHttpRequest) -> datetime | None:
    """When the admin asked for a reconcile (`?reconcile=<epoch seconds>`), if recently."""
    value = request.GET.get("reconcile", "")
    if not value.isdigit():
        return None
    try:
        asked = datetime.fromtimestamp(int(value), tz=UTC)
    except (OverflowError, OSError, ValueError):  # not a time this page wrote
        return None
    return asked if datetime.now(tz=UTC) - asked < REPORT_WAIT else None


def _status_context(request: AuthenticatedHttpRequest) -> dict[str, Any]:
    status = directory_status_for(request.user)
    waiting = directory_changes_for(
        request.user, states=(ChangeState.PENDING, ChangeState.FAILED), queue_order=True
    )
    page = BoundedPaginator(waiting, PER_PAGE).get_page(request.GET.get("page"))
    reports = list(directory_reports_for(request.user)[:LATEST_REPORTS])
    asked = _reconcile_asked_at(request)
    awaiting_report = asked is not None and not any(
        report.started_at >= asked for report in reports
    )
    return {
        "status": status,
        "page": page,
        "reports": reports,
        "awaiting_report": awaiting_report,
        # Poll while something is still to happen: changes to send, a report to come.
        "polling": status.sync and (status.pending > 0 or awaiting_report),
    }


@login_required
def status(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The sync's state; htmx polls the changes and reports while changes are pending."""
    context = _status_context(request)
    return polled_page(
        request, "directory/status.html", "sync-state", context, moving=context["polling"]
    )


@login_required
@require_POST
def retry(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    change = directory_change_for(request.user, pk)
    services.directory_change_retry(actor=request.user, change_id=change.pk)
    messages.success(
        request,
        _("Change %(id)s (%(description)s) is queued again.")
        % {"id": change.pk, "description": change.description},
    )
    return redirect("directory:status")


@login_required
@require_POST
def reconcile(request: AuthenticatedHttpRequest) -> HttpResponse:
    services.directory_reconcile_request(actor=request.user)
    messages.success(request, _("A reconcile with Keycloak is queued; its report appears below."))
    # The page polls until a report newer than this appears.
    return redirect(f"{reverse('directory:status')}?reconcile={int(time.time())}")
