"""What every notebook action shares: locking, auditing, and moving a notebook towards running
or stopped through a provisioning run of kind `notebook`."""

import logging
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop, ngettext

from portal.accounts.models import User
from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.cluster.models import (
    ProvisioningRun,
    RunKind,
)
from portal.cluster.services.runs import provisioning_run_queue
from portal.core.audit import audit_record
from portal.core.errors import InvalidTransition, ValidationFailed
from portal.workloads.models import Desired, Notebook, NotebookState
from tenants.models import TenantState

logger = logging.getLogger(__name__)


def _queue_run(notebook: Notebook, *, actor: User | None, reason: str) -> ProvisioningRun:
    return provisioning_run_queue(
        cluster=notebook.cluster,
        tenant=notebook.tenant,
        reason=f"notebook {notebook.pk}: {reason}",
        actor=actor,
        kind=RunKind.NOTEBOOK,
        notebook=notebook,
    )


def _lock(notebook: Notebook) -> Notebook:
    return (
        Notebook.objects.select_for_update(of=("self",))
        .select_related("tenant", "cluster", "allocation__offering", "owner")
        .get(pk=notebook.pk)
    )


def _audit(
    notebook: Notebook,
    *,
    actor: User | None,
    action: str,
    before: str | None,
    comment: str = "",
    changes: dict[str, list[Any]] | None = None,
) -> None:
    audit_record(
        actor=actor,
        action=f"notebook.{action}",
        target=notebook,
        tenant=notebook.tenant,
        changes={"state": [before, notebook.state], **(changes or {})},
        comment=comment,
    )


def _go(
    notebook: Notebook,
    *,
    actor: User | None,
    action: str,
    before: str | None,
    reason: str,
    changes: dict[str, list[Any]] | None = None,
) -> None:
    """Set a notebook meant to run going: it waits while its request is pending, else a run
    applies it. Saves and audits."""
    waiting = notebook.allocation.state == RequestState.PENDING
    notebook.state = NotebookState.WAITING if waiting else NotebookState.PENDING
    notebook.reason = (
        gettext_noop("Waiting for a lead to approve the request.") if waiting else reason
    )
    notebook.save()
    _audit(notebook, actor=actor, action=action, before=before, changes=changes)
    if not waiting:
        _queue_run(notebook, actor=actor, reason=action)


def _clear_culling(notebook: Notebook) -> None:
    notebook.idle_since = notebook.cull_notice_at = notebook.cull_at = None


def _stop(notebook: Notebook, *, actor: User | None, reason: str, action: str = "stop") -> None:
    before = notebook.state
    notebook.desired = Desired.STOPPED
    notebook.running_since = None
    _clear_culling(notebook)
    notebook.reason = reason
    if before == NotebookState.WAITING:
        notebook.state = NotebookState.STOPPED  # nothing was ever applied
        notebook.stopped_at = timezone.now()
    else:
        notebook.state = NotebookState.STOPPING
    notebook.save()
    _audit(notebook, actor=actor, action=action, before=before, comment=reason)
    if notebook.state == NotebookState.STOPPING:
        _queue_run(notebook, actor=actor, reason=action)


def _retry(notebook: Notebook, *, actor: User | None, action: str, to: NotebookState) -> None:
    """A stop or delete whose run failed: try it again (the pod may still hold the GPU)."""
    before = notebook.state
    notebook.state, notebook.reason = to, gettext_noop("Trying again.")
    notebook.save()
    _audit(notebook, actor=actor, action=action, before=before, comment="retry after a failure")
    _queue_run(notebook, actor=actor, reason=f"{action} again")


PROVISIONING_FAILED = "Provisioning failed: "


def _allocation_usable(allocation: GpuRequest, *, ended: str) -> None:
    """A notebook may run on `allocation` (now or once approved) in an active tenant; else
    InvalidTransition, with `ended` saying what to do when the allocation is over."""
    # The tenant first: suspending or archiving it also ended its allocations, and the
    # suspension is what the person must know about.
    if allocation.tenant.state != TenantState.ACTIVE:
        raise InvalidTransition(
            _("Tenant %(tenant)s is %(state)s.")
            % {"tenant": allocation.tenant.slug, "state": allocation.tenant.get_state_display()}
        )
    if allocation.state not in (*HOLDING_STATES, RequestState.PENDING):
        raise InvalidTransition(
            _("Allocation %(pk)s is %(state)s: %(ended)s")
            % {"pk": allocation.pk, "state": allocation.get_state_display(), "ended": ended}
        )


def _allocation_ready(allocation: GpuRequest) -> None:
    _allocation_usable(allocation, ended=_("launch on one that is approved or active."))
    limit = allocation.offering.max_units_per_workload
    if limit is not None and allocation.count > limit:
        raise ValidationFailed.on(
            "allocation",
            ngettext(
                "%(offering)s allows %(limit)s unit per notebook.",
                "%(offering)s allows %(limit)s units per notebook.",
                limit,
            )
            % {"offering": allocation.offering.name, "limit": limit},
        )
