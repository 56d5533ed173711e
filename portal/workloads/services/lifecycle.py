"""The owner's and leads' actions (stop, start, delete, snooze), and notebooks following their
allocation, their tenant and the end of their provisioning runs."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from portal.accounts.models import User
from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.cluster.models import (
    UNFINISHED_RUN_STATES,
    ProvisioningRun,
    RunState,
)
from portal.core.audit import audit_record
from portal.core.errors import InvalidTransition
from portal.workloads import selectors
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.services.observe import notebook_observe_request
from portal.workloads.services.transitions import (
    PROVISIONING_FAILED,
    _allocation_usable,
    _audit,
    _clear_culling,
    _go,
    _lock,
    _queue_run,
    _retry,
    _stop,
)
from tenants.models import Tenant, TenantState

logger = logging.getLogger(__name__)


@transaction.atomic
def notebook_stop(*, actor: User | None, notebook: Notebook, reason: str = "") -> Notebook:
    """Scale the notebook to zero; its workspace stays. 409 unless it is meant to run."""
    locked = _lock(notebook)
    if locked.desired == Desired.STOPPED and locked.state == NotebookState.FAILED:
        _retry(locked, actor=actor, action="stop", to=NotebookState.STOPPING)
        return locked
    if locked.desired != Desired.RUNNING:
        raise InvalidTransition(
            _("Notebook %(pk)s is %(state)s; it cannot be stopped.")
            % {"pk": locked.pk, "state": locked.get_state_display()}
        )
    by = f" by {actor.username}" if actor is not None else ""
    _stop(locked, actor=actor, reason=reason or f"Stopped{by}.")
    return locked


@transaction.atomic
def notebook_start(*, actor: User, notebook: Notebook) -> Notebook:
    """Start a stopped (or failed) notebook again, with its workspace, on its allocation."""
    locked = _lock(notebook)
    startable = locked.desired == Desired.STOPPED or (
        locked.desired == Desired.RUNNING and locked.state == NotebookState.FAILED
    )
    if not startable:
        raise InvalidTransition(
            _("Notebook %(pk)s is %(state)s; it cannot be started.")
            % {"pk": locked.pk, "state": locked.get_state_display()}
        )
    _allocation_usable(
        locked.allocation,
        ended=_(
            "request GPUs again and launch a new notebook (this workspace stays until the "
            "notebook is deleted)."
        ),
    )
    before = locked.state
    locked.desired = Desired.RUNNING
    locked.stopped_at = None
    _clear_culling(locked)
    _go(locked, actor=actor, action="start", before=before, reason=gettext_noop("Starting."))
    return locked


@transaction.atomic
def notebook_delete(*, actor: User, notebook: Notebook, keep_workspace: bool) -> Notebook:
    """Delete the notebook's objects, and its workspace unless `keep_workspace`."""
    locked = _lock(notebook)
    if locked.desired == Desired.DELETED and locked.state == NotebookState.FAILED:
        locked.keep_workspace = keep_workspace
        _retry(locked, actor=actor, action="delete", to=NotebookState.DELETING)
        return locked
    if locked.desired == Desired.DELETED:
        raise InvalidTransition(
            _("Notebook %(pk)s is %(state)s; it is already deleted.")
            % {"pk": locked.pk, "state": locked.get_state_display()}
        )
    before = locked.state
    applied = ProvisioningRun.objects.filter(notebook=locked).exists()
    locked.desired = Desired.DELETED
    locked.keep_workspace = keep_workspace
    locked.running_since = None
    _clear_culling(locked)
    locked.state = NotebookState.DELETING if applied else NotebookState.DELETED
    locked.reason = (
        gettext_noop("Workspace kept.") if keep_workspace else gettext_noop("Workspace deleted.")
    )
    locked.save()
    _audit(
        locked,
        actor=actor,
        action="delete",
        before=before,
        changes={"keep_workspace": [None, keep_workspace]},
    )
    if applied:
        _queue_run(locked, actor=actor, reason="delete")
    return locked


@transaction.atomic
def notebook_snooze(*, actor: User, notebook: Notebook) -> Notebook:
    """Keep a running notebook from being stopped as idle for PORTAL_CULL_SNOOZE_MINUTES."""
    locked = _lock(notebook)
    if locked.desired != Desired.RUNNING or locked.state == NotebookState.FAILED:
        raise InvalidTransition(
            _("Notebook %(pk)s is %(state)s; there is nothing to snooze.")
            % {"pk": locked.pk, "state": locked.get_state_display()}
        )
    before = locked.snoozed_until
    locked.snoozed_until = timezone.now() + timedelta(minutes=settings.PORTAL_CULL_SNOOZE_MINUTES)
    _clear_culling(locked)
    locked.save()
    audit_record(
        actor=actor,
        action="notebook.snooze",
        target=locked,
        tenant=locked.tenant,
        changes={
            "snoozed_until": [
                before.isoformat() if before else None,
                locked.snoozed_until.isoformat(),
            ]
        },
    )
    return locked


def notebooks_follow_allocation(*, allocation: GpuRequest, before: str, actor: User | None) -> None:
    """An allocation changed state (inside its transaction): approved, start its waiting
    notebooks; refused, fail them; ended, stop them before the quota goes."""
    notebooks = Notebook.objects.select_for_update(of=("self",)).filter(allocation=allocation)
    state = allocation.state
    for notebook in notebooks.exclude(desired=Desired.DELETED).select_related("tenant", "cluster"):
        if state in HOLDING_STATES and notebook.state == NotebookState.WAITING:
            _go(
                notebook,
                actor=actor,
                action="launch",
                before=notebook.state,
                reason=gettext_noop("Launching."),
            )
        elif state in (RequestState.REJECTED, RequestState.CANCELLED):
            previous = notebook.state
            notebook.desired, notebook.state = Desired.STOPPED, NotebookState.FAILED
            notebook.reason = f"The request was {state}. {allocation.decision_comment}".strip()
            notebook.save()
            _audit(notebook, actor=actor, action="fail", before=previous, comment=notebook.reason)
        elif (
            before in HOLDING_STATES
            and state not in HOLDING_STATES
            and notebook.desired == Desired.RUNNING
        ):
            reason = f"Stopped because allocation {allocation.pk} {state}."
            if state == RequestState.REVOKED and allocation.decision_comment:
                # Why it was revoked: an admin's reason, or the tenant's suspension or archiving.
                reason = f"{reason} {allocation.decision_comment}"
            _stop(notebook, actor=actor, reason=reason)


def notebooks_follow_tenant(*, tenant: Tenant, actor: User | None) -> None:
    """A tenant changed state (inside its transaction): suspended, its notebooks stop (their
    workspaces stay); archived, they are gone with its namespaces."""
    if tenant.state == TenantState.ACTIVE:
        return
    notebooks = (
        Notebook.objects.select_for_update(of=("self",))
        .filter(tenant=tenant)
        .exclude(desired=Desired.DELETED)
        .select_related("tenant", "cluster")
    )
    for notebook in notebooks:
        if tenant.state == TenantState.SUSPENDED:
            if notebook.desired == Desired.RUNNING:
                _stop(notebook, actor=actor, reason=f"Stopped because {tenant.slug} is suspended.")
            continue
        before = notebook.state
        notebook.desired, notebook.state = Desired.DELETED, NotebookState.DELETED
        notebook.running_since, notebook.url = None, ""
        notebook.reason = f"Deleted with the namespaces of {tenant.slug}, which was archived."
        notebook.save()
        _audit(notebook, actor=actor, action="delete", before=before, comment=notebook.reason)


def notebook_run_finished(run: ProvisioningRun) -> None:
    """A notebook run ended (inside the transaction that records it): move the notebook on."""
    if run.notebook_id is None or run.state not in (RunState.SUCCEEDED, RunState.FAILED):
        return
    notebook = _lock(Notebook(pk=run.notebook_id))
    newer = ProvisioningRun.objects.filter(
        notebook=notebook, pk__gt=run.pk, state__in=UNFINISHED_RUN_STATES
    )
    if newer.exists():
        return  # the owner acted since: the newer run settles the notebook
    before = notebook.state
    now = timezone.now()
    if run.state == RunState.FAILED:
        if notebook.state == NotebookState.DELETED:
            return
        notebook.state = NotebookState.FAILED
        notebook.reason = f"{PROVISIONING_FAILED}{run.error}"
    elif notebook.desired == Desired.DELETED:
        notebook.state, notebook.url = NotebookState.DELETED, ""
    elif notebook.desired == Desired.STOPPED:
        notebook.state, notebook.stopped_at = NotebookState.STOPPED, now
    elif run.dry_run:
        # Nothing runs in a dry-run cluster: the notebook is as good as its manifests.
        notebook.state, notebook.running_since = NotebookState.RUNNING, now
        notebook.reason = gettext_noop("Dry-run cluster: the objects were rendered, not applied.")
        notebook.url = selectors.notebook_url(notebook)
    else:
        notebook.state, notebook.reason = (
            NotebookState.PENDING,
            gettext_noop("Waiting for the pod."),
        )
        notebook.url = selectors.notebook_url(notebook)
    notebook.save()
    if notebook.state != before:
        _audit(notebook, actor=None, action="provisioned", before=before, comment=notebook.reason)
    if notebook.state == NotebookState.PENDING:
        notebook_observe_request(notebook=notebook, force=True)
