"""Every write to notebooks: launch, stop, start, delete, snooze, and what the cluster reports.

Each action is one transaction with one audit event. The cluster is changed by a provisioning
run of kind `notebook`, queued in that transaction and executed once it commits; the run's end
moves the notebook on (`notebook_run_finished`), and reading the pods settles it
(`notebooks_observe`).
"""

import logging
import secrets
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from portal.accounts.models import User
from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.catalog.models import Offering
from portal.cluster.errors import ClusterError
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.models import (
    UNFINISHED_RUN_STATES,
    Cluster,
    ProvisioningRun,
    RunKind,
    RunState,
)
from portal.cluster.services.runs import provisioning_run_queue
from portal.core.audit import audit_record
from portal.core.errors import Conflict, InvalidTransition, QuotaExceeded, ValidationFailed
from portal.core.validators import slug_validator
from portal.workloads import selectors
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.status import Observed, notebook_observed
from portal.workloads.sync import notebook_pods, notebook_warnings, warnings_about
from tenants.access import Access, tenant_for
from tenants.models import Tenant, TenantState

logger = logging.getLogger(__name__)

DEFAULT_CPU_CORES = Decimal(4)
DEFAULT_MEMORY_GIB = 16
DEFAULT_WORKSPACE_GIB = 20


def _queue_run(notebook: Notebook, *, actor: User | None, reason: str) -> ProvisioningRun:
    return provisioning_run_queue(
        cluster=notebook.cluster,
        tenant=notebook.tenant,
        reason=f"notebook {notebook.pk}: {reason}",
        actor=actor,
        kind=RunKind.NOTEBOOK,
        notebook=notebook,
    )


def _decimal(value: Any, field: str) -> Decimal:
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValidationFailed.on(field, "Write a number, e.g. 4 or 0.5.") from None
    if not number.is_finite():
        raise ValidationFailed.on(field, "Write a number, e.g. 4 or 0.5.")
    return number


def _whole(value: Any, field: str) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValidationFailed.on(field, "Write a whole number.") from None


def _sizes(
    tenant: Tenant, *, cpu_cores: Any, memory_gib: Any, workspace_gib: Any
) -> tuple[Decimal, int, int]:
    """CPU, memory and workspace within the portal's limits and the tenant's quota."""
    cpu = _decimal(cpu_cores, "cpu_cores")
    cpu_limit = min(Decimal(settings.PORTAL_NOTEBOOK_MAX_CPU), Decimal(tenant.cpu_cores_quota))
    if cpu < Decimal("0.1") or cpu != cpu.quantize(Decimal("0.001")):
        raise ValidationFailed.on("cpu_cores", "Ask for at least 0.1 cores, in steps of 0.001.")
    if cpu > cpu_limit:
        raise ValidationFailed.on("cpu_cores", f"At most {cpu_limit} cores per notebook here.")
    memory = _whole(memory_gib, "memory_gib")
    memory_limit = min(settings.PORTAL_NOTEBOOK_MAX_MEMORY_GIB, tenant.memory_gib_quota)
    if not 1 <= memory <= memory_limit:
        raise ValidationFailed.on("memory_gib", f"Between 1 and {memory_limit} GiB here.")
    workspace = _whole(workspace_gib, "workspace_gib")
    workspace_limit = min(settings.PORTAL_NOTEBOOK_MAX_WORKSPACE_GIB, tenant.storage_gib_quota)
    if not 1 <= workspace <= workspace_limit:
        raise ValidationFailed.on("workspace_gib", f"Between 1 and {workspace_limit} GiB here.")
    return cpu, memory, workspace


def _name(value: str, offering: Offering) -> str:
    name = (value or "").strip() or offering.slug[:40]
    if len(name) > 40:
        raise ValidationFailed.on("name", "At most 40 characters.")
    try:
        slug_validator(name)
    except DjangoValidationError:
        raise ValidationFailed.on(
            "name", "Lowercase letters, digits and hyphens, starting with a letter or digit."
        ) from None
    return name


def _allocation_usable(allocation: GpuRequest, *, ended: str) -> None:
    """A notebook may run on `allocation` (now or once approved) in an active tenant; else
    InvalidTransition, with `ended` saying what to do when the allocation is over."""
    if allocation.state not in (*HOLDING_STATES, RequestState.PENDING):
        raise InvalidTransition(f"Allocation {allocation.pk} is {allocation.state}: {ended}")
    if allocation.tenant.state != TenantState.ACTIVE:
        raise InvalidTransition(f"Tenant {allocation.tenant.slug} is {allocation.tenant.state}.")


def _allocation_ready(allocation: GpuRequest) -> None:
    _allocation_usable(allocation, ended="launch on one that is approved or active.")
    limit = allocation.offering.max_units_per_workload
    if limit is not None and allocation.count > limit:
        raise ValidationFailed.on(
            "allocation", f"{allocation.offering.name} allows {limit} unit(s) per notebook."
        )


@transaction.atomic
def notebook_launch(
    *,
    actor: User,
    image: str,
    allocation_id: int | None = None,
    tenant: str = "",
    offering: str = "",
    count: int = 1,
    duration_hours: int | None = None,
    justification: str = "",
    name: str = "",
    cpu_cores: Any = DEFAULT_CPU_CORES,
    memory_gib: Any = DEFAULT_MEMORY_GIB,
    workspace_gib: Any = DEFAULT_WORKSPACE_GIB,
) -> Notebook:
    """Launch a notebook on one of the actor's allocations, or request one and launch on it.

    With `allocation_id`: that allocation (another user's or tenant's is NotFound). Without:
    a request for `count` x `offering` in `tenant` goes through the usual decision first; the
    notebook starts once it is approved (at once, or when a lead approves). Bad input raises
    ValidationFailed naming the field, and nothing is written.
    """
    allocation: GpuRequest | None
    if allocation_id is not None:
        allocation = selectors.allocation_for_launch(actor, allocation_id)
        chosen, home = allocation.offering, allocation.tenant
    else:
        if not offering:
            raise ValidationFailed.on(
                "allocation", "Pick an allocation, or an offering to request."
            )
        if not tenant:
            raise ValidationFailed.on("tenant", "Pick the tenant to request the GPU in.")
        home = tenant_for(actor, tenant, Access.REQUEST)
        found = Offering.objects.select_related("gpu_model").filter(slug=offering).first()
        if found is None:
            raise ValidationFailed.on("offering", f"There is no offering {offering!r}.")
        chosen, allocation = found, None
    picked = selectors.image_for_launch(image, chosen)
    cpu, memory, workspace = _sizes(
        home, cpu_cores=cpu_cores, memory_gib=memory_gib, workspace_gib=workspace_gib
    )
    label = _name(name, chosen)
    cluster = selectors.cluster_for_offering(chosen)
    if allocation is None:
        from portal.allocations.services import gpu_request_submit  # noqa: PLC0415  (cycle)

        allocation = gpu_request_submit(
            actor=actor,
            tenant=home,
            offering=chosen,
            count=count,
            duration_hours=duration_hours,
            justification=justification,
        )
        if allocation.state == RequestState.REJECTED:
            # Refused like any bad input: nothing is written, the numbers say why.
            raise QuotaExceeded(
                allocation.decision_comment, fields={"count": [allocation.decision_comment]}
            )
    # Lock the allocation, then check it: an expiry or a second launch waits, then sees ours.
    allocation = (
        GpuRequest.objects.select_for_update(of=("self",))
        .select_related("tenant", "offering")
        .get(pk=allocation.pk)
    )
    _allocation_ready(allocation)
    if Notebook.objects.filter(allocation=allocation).exclude(state=NotebookState.DELETED).exists():
        raise Conflict(f"Allocation {allocation.pk} already has a notebook.")
    notebook = Notebook(
        tenant=allocation.tenant,
        owner=actor,
        allocation=allocation,
        cluster=cluster,
        name=label,
        image=picked,
        image_reference=picked.image,
        cpu_cores=cpu,
        memory_gib=memory,
        workspace_gib=workspace,
        token=secrets.token_urlsafe(32),
    )
    try:
        with transaction.atomic():
            notebook.save()
    except IntegrityError:
        raise Conflict(f"Allocation {allocation.pk} already has a notebook.") from None
    _go(
        notebook,
        actor=actor,
        action="launch",
        before=None,
        reason="Launching.",
        changes={
            "allocation": [None, allocation.pk],
            "image": [None, picked.image],
            "cpu_cores": [None, str(cpu)],
            "memory_gib": [None, memory],
            "workspace_gib": [None, workspace],
        },
    )
    return notebook


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
    notebook.reason = "Waiting for a lead to approve the request." if waiting else reason
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
    notebook.state, notebook.reason = to, "Trying again."
    notebook.save()
    _audit(notebook, actor=actor, action=action, before=before, comment="retry after a failure")
    _queue_run(notebook, actor=actor, reason=f"{action} again")


@transaction.atomic
def notebook_stop(*, actor: User | None, notebook: Notebook, reason: str = "") -> Notebook:
    """Scale the notebook to zero; its workspace stays. 409 unless it is meant to run."""
    locked = _lock(notebook)
    if locked.desired == Desired.STOPPED and locked.state == NotebookState.FAILED:
        _retry(locked, actor=actor, action="stop", to=NotebookState.STOPPING)
        return locked
    if locked.desired != Desired.RUNNING:
        raise InvalidTransition(f"Notebook {locked.pk} is {locked.state}; it cannot be stopped.")
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
        raise InvalidTransition(f"Notebook {locked.pk} is {locked.state}; it cannot be started.")
    _allocation_usable(
        locked.allocation,
        ended="request GPUs again and launch a new notebook (this workspace stays until the "
        "notebook is deleted).",
    )
    before = locked.state
    locked.desired = Desired.RUNNING
    locked.stopped_at = None
    _clear_culling(locked)
    _go(locked, actor=actor, action="start", before=before, reason="Starting.")
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
        raise InvalidTransition(f"Notebook {locked.pk} is {locked.state}; it is already deleted.")
    before = locked.state
    applied = ProvisioningRun.objects.filter(notebook=locked).exists()
    locked.desired = Desired.DELETED
    locked.keep_workspace = keep_workspace
    locked.running_since = None
    _clear_culling(locked)
    locked.state = NotebookState.DELETING if applied else NotebookState.DELETED
    locked.reason = "Workspace kept." if keep_workspace else "Workspace deleted."
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
            f"Notebook {locked.pk} is {locked.state}; there is nothing to snooze."
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


# What the rest of the portal tells notebooks.


def notebooks_follow_allocation(*, allocation: GpuRequest, before: str, actor: User | None) -> None:
    """An allocation changed state (inside its transaction): approved, start its waiting
    notebooks; refused, fail them; ended, stop them before the quota goes."""
    notebooks = Notebook.objects.select_for_update(of=("self",)).filter(allocation=allocation)
    state = allocation.state
    for notebook in notebooks.exclude(desired=Desired.DELETED).select_related("tenant", "cluster"):
        if state in HOLDING_STATES and notebook.state == NotebookState.WAITING:
            _go(notebook, actor=actor, action="launch", before=notebook.state, reason="Launching.")
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
            _stop(
                notebook,
                actor=actor,
                reason=f"Stopped because allocation {allocation.pk} {state}.",
            )


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
        notebook.reason = "Dry-run cluster: the objects were rendered, not applied."
        notebook.url = selectors.notebook_url(notebook)
    else:
        notebook.state, notebook.reason = NotebookState.PENDING, "Waiting for the pod."
        notebook.url = selectors.notebook_url(notebook)
    notebook.save()
    if notebook.state != before:
        _audit(notebook, actor=None, action="provisioned", before=before, comment=notebook.reason)
    if notebook.state == NotebookState.PENDING:
        notebook_observe_request(notebook=notebook, force=True)


# Reading the cluster back.


def notebook_observe_request(*, notebook: Notebook, force: bool = False) -> bool:
    """Ask for the notebook's pod to be read soon (a page polling it does), at most once per
    few seconds whoever asks. Returns whether a read was queued."""
    from portal.workloads.tasks import observe_notebook  # noqa: PLC0415  (cycle)

    if not notebook.cluster.applies or notebook.state not in OBSERVED_STATES:
        return False
    now = timezone.now()
    recent = now - timedelta(seconds=3)
    claimed = Notebook.objects.filter(pk=notebook.pk)
    if not force:
        claimed = claimed.filter(
            Q(observe_requested_at__isnull=True) | Q(observe_requested_at__lt=recent)
        )
    if not claimed.update(observe_requested_at=now):
        return False
    observe_notebook.delay(notebook.pk)
    return True


OBSERVED_STATES = (
    NotebookState.PENDING,
    NotebookState.RUNNING,
    NotebookState.STOPPING,
    NotebookState.FAILED,  # a crashing pod may recover; a failed run is left for a retry
)
PROVISIONING_FAILED = "Provisioning failed: "


def _observable(notebook: Notebook) -> bool:
    if notebook.state != NotebookState.FAILED:
        return notebook.state in OBSERVED_STATES
    return notebook.desired == Desired.RUNNING and not notebook.reason.startswith(
        PROVISIONING_FAILED
    )


def notebooks_observe(*, cluster: Cluster, notebook_ids: list[int] | None = None) -> int:
    """Read the cluster's notebook pods (one list) and the warnings of namespaces where a
    notebook waits (one list each), and record each notebook's state. Returns how many
    changed. Raises ClusterError when the cluster cannot be read."""
    if not cluster.applies:
        return 0
    watched = Notebook.objects.filter(cluster=cluster, state__in=OBSERVED_STATES).select_related(
        "tenant"
    )
    if notebook_ids is not None:
        watched = watched.filter(pk__in=notebook_ids)
    notebooks = [notebook for notebook in watched if _observable(notebook)]
    if not notebooks:
        return 0
    gateway = KubernetesGateway(cluster)
    try:
        if len(notebooks) == 1:  # a page watching one notebook: read only its pod
            only = notebooks[0]
            pods = notebook_pods(
                gateway,
                namespace=cluster.namespace_for(only.tenant.slug),
                name=only.kubernetes_name,
            )
        else:
            pods = notebook_pods(gateway)
        namespaces = {
            cluster.namespace_for(notebook.tenant.slug)
            for notebook in notebooks
            if notebook.state != NotebookState.RUNNING
        }
        warnings = {namespace: notebook_warnings(gateway, namespace) for namespace in namespaces}
    finally:
        gateway.close()
    changed = 0
    now = timezone.now()
    for notebook in notebooks:
        namespace = cluster.namespace_for(notebook.tenant.slug)
        observed = notebook_observed(
            desired=notebook.desired,
            pod=pods.get((namespace, notebook.kubernetes_name)),
            events=warnings_about(warnings.get(namespace, []), notebook.kubernetes_name),
        )
        changed += _record_observation(
            notebook.pk, observed=observed, now=now, desired_seen=notebook.desired
        )
    return changed


@transaction.atomic
def _record_observation(
    notebook_id: int, *, observed: Observed, now: datetime, desired_seen: str
) -> int:
    notebook = (
        Notebook.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .get(pk=notebook_id)
    )
    if notebook.desired != desired_seen or not _observable(notebook):
        return 0  # acted on since the read: the action's run will settle it
    if notebook.desired == Desired.RUNNING and observed.state == NotebookState.STOPPED:
        return 0
    if notebook.desired == Desired.STOPPED:
        # Stopping: the reason says why it was stopped (by whom, idle, allocation ended).
        observed = Observed(observed.state, notebook.reason, observed.events)
    before = notebook.state
    notebook.observed_at = now
    if notebook.state == observed.state and notebook.reason == observed.reason:
        notebook.events = observed.events
        notebook.save(update_fields=["observed_at", "events"])
        return 0
    notebook.state, notebook.reason, notebook.events = (
        observed.state,
        observed.reason,
        observed.events,
    )
    if observed.state == NotebookState.RUNNING and notebook.running_since is None:
        notebook.running_since = now
    if observed.state == NotebookState.STOPPED:
        notebook.stopped_at = now
    notebook.save()
    if notebook.state != before:
        _audit(notebook, actor=None, action="observe", before=before, comment=notebook.reason)
    return 1


def notebook_observe(*, notebook_id: int) -> int:
    """Read one notebook's pod now (a page is watching it); 0 when it is gone."""
    notebook = Notebook.objects.select_related("cluster").filter(pk=notebook_id).first()
    if notebook is None:
        return 0
    return notebooks_observe(cluster=notebook.cluster, notebook_ids=[notebook_id])


def notebooks_observe_all() -> dict[str, int | str]:
    """Observe every cluster that applies; a cluster that cannot be read is reported, not
    raised, so the others are still read."""
    outcome: dict[str, int | str] = {}
    for cluster in Cluster.objects.filter(enabled=True):
        if not cluster.applies:
            continue
        try:
            outcome[cluster.name] = notebooks_observe(cluster=cluster)
        except ClusterError as error:
            logger.warning("notebooks in %s not observed: %s", cluster.name, error)
            outcome[cluster.name] = error.message
    return outcome


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
    """Email the owner that their notebook will be stopped as idle. Returns messages sent."""
    notebook = Notebook.objects.select_related("owner", "tenant").filter(pk=notebook_id).first()
    if notebook is None or notebook.cull_at is None or not notebook.owner.email:
        return 0
    when = f"{notebook.cull_at:%Y-%m-%d %H:%M} UTC"
    link = f"{settings.PORTAL_BASE_URL}/notebooks/{notebook.pk}/"
    subject = f"Notebook {notebook.name} is idle and stops at {when}"
    body = (
        f"Your notebook {notebook.name} in {notebook.tenant.slug} has been idle since "
        f"{notebook.idle_since:%H:%M} UTC. It will be stopped at {when}; the workspace is kept.\n"
        f"Use it, or snooze it here: {link}\n"
    )
    return send_mail(subject, body, None, [notebook.owner.email])
