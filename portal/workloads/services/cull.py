"""Stopping idle notebooks and telling their owners first (workloads.culling decides)."""

import logging
from datetime import datetime

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from portal.core.audit import audit_record
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.services.transitions import _lock, _stop

logger = logging.getLogger(__name__)


@transaction.atomic
def notebook_cull(*, notebook: Notebook, noticed_at: datetime | None, reason: str) -> bool:
    """Stop an idle notebook, unless the owner acted since the decision (stopped, snoozed or
    used it: the notice is gone). Returns whether it was stopped."""
    locked = _lock(notebook)
    still_idle = (
        locked.desired == Desired.RUNNING
        and locked.state == NotebookState.RUNNING
        and locked.cull_notice_at is not None
        and locked.cull_notice_at == noticed_at
    )
    if still_idle:
        _stop(locked, actor=None, reason=reason, action="cull")
    return still_idle


@transaction.atomic
def notebook_cull_notice(
    *,
    notebook: Notebook,
    idle_since: datetime | None,
    cull_at: datetime | None,
    now: datetime | None = None,
) -> Notebook:
    """Tell the owner their idle notebook stops at `cull_at` unless they snooze or use it."""
    from portal.workloads.tasks import send_cull_notice  # noqa: PLC0415  (cycle)

    locked = _lock(notebook)
    if locked.state != NotebookState.RUNNING or locked.cull_notice_at is not None:
        return locked
    if locked.snoozed_until is not None and locked.snoozed_until > (now or timezone.now()):
        return locked  # snoozed since the decision
    locked.idle_since, locked.cull_at = idle_since, cull_at
    locked.cull_notice_at = now or timezone.now()
    locked.save()
    audit_record(
        actor=None,
        action="notebook.cull_notice",
        target=locked,
        tenant=locked.tenant,
        changes={"cull_at": [None, cull_at.isoformat() if cull_at else None]},
        comment="Idle: it stops then unless it is used or snoozed.",
    )
    send_cull_notice.delay(locked.pk)
    return locked


def cull_notice_send(*, notebook_id: int) -> int:
    """Email the owner that their notebook will be stopped as idle, in the owner's language
    when they saved one (else the portal's default). Returns messages sent."""
    notebook = Notebook.objects.select_related("owner", "tenant").filter(pk=notebook_id).first()
    if notebook is None or notebook.cull_at is None or not notebook.owner.email:
        return 0
    # The owner's saved language (accounts' `User.language`, where it exists), else the default.
    language = getattr(notebook.owner, "language", "") or settings.LANGUAGE_CODE
    values = {
        "name": notebook.name,
        "tenant": notebook.tenant.slug,
        "when": f"{notebook.cull_at:%Y-%m-%d %H:%M}",
        "idle_since": f"{notebook.idle_since:%H:%M}",
        "link": f"{settings.PORTAL_BASE_URL}/notebooks/{notebook.pk}/",
    }
    with translation.override(language):
        subject = _("Notebook %(name)s is idle and stops at %(when)s UTC") % values
        body = (
            _(
                "Your notebook %(name)s in %(tenant)s has been idle since %(idle_since)s UTC. "
                "It will be stopped at %(when)s UTC; the workspace is kept.\n"
                "Use it, or snooze it here: %(link)s\n"
            )
            % values
        )
    return send_mail(subject, body, None, [notebook.owner.email])
