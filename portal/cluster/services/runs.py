"""Provisioning runs: queued with the change that needs them, executed once, never
half-reported.

A run is queued inside the transaction of the change that needs it (a tenant created, its
members, quotas or allocations changed) and executed by a task once that commits. Execution
claims the run with one conditional UPDATE, so two workers never apply the same run; talks to
the cluster outside any transaction; then writes the results, the final state, the audit
event and the allocations it started in one transaction.
"""

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.allocations.services import allocations_activate
from portal.cluster.errors import ClusterError
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.manifests import manifests_yaml, tenant_bundle_manifests
from portal.cluster.models import (
    UNFINISHED_RUN_STATES,
    Cluster,
    Outcome,
    ProvisioningResult,
    ProvisioningRun,
    RunKind,
    RunState,
)
from portal.cluster.selectors import BundleInput, bundle_input
from portal.cluster.services.bundle import SyncReport, bundle_sync, namespace_delete, object_result
from portal.core.audit import audit_record
from portal.core.errors import InvalidTransition, PermissionDenied
from portal.core.registry import Registry
from tenants.models import Tenant, TenantState

logger = logging.getLogger(__name__)

# A run whose worker vanished is taken up again after this long.
RUN_LEASE = timedelta(minutes=15)

# Transient failures re-queue a run this many times before it is left failed.
MAX_RUN_ATTEMPTS = 4

NAMESPACE_MAX_LENGTH = 63


@dataclass(frozen=True)
class RunKindHandler:
    """How runs of a kind that a higher app owns (notebooks) are done and followed up.

    `sync(run, gateway)` applies the run's objects (gateway None: a dry-run cluster, render
    only) and returns the manifests as YAML and the report; `finished(run)` is called inside
    the transaction that records the run's outcome.
    """

    sync: Callable[[ProvisioningRun, KubernetesGateway | None], tuple[str, SyncReport]]
    finished: Callable[[ProvisioningRun], None]


# Filled by the apps that own such runs when they are ready (workloads: RunKind.NOTEBOOK).
run_kinds: Registry[str, RunKindHandler] = Registry("provisioning run kind")


def _enqueue(run_id: int) -> None:
    """Execute run `run_id` in a worker once the caller's transaction commits."""
    # Tasks call services and services send tasks: one of the two imports when it runs.
    from portal.cluster.tasks import execute_provisioning_run  # noqa: PLC0415  (cycle)

    execute_provisioning_run.delay(run_id)


def provisioning_run_queue(
    *,
    cluster: Cluster,
    tenant: Tenant,
    reason: str,
    actor: User | None,
    kind: RunKind = RunKind.BUNDLE,
    gpu_request: GpuRequest | None = None,
    notebook: Any = None,  # a workloads Notebook, for RunKind.NOTEBOOK
) -> ProvisioningRun:
    # A queued run renders the portal's state when it starts, so it covers later changes too.
    # The row lock makes a worker's claim wait until this change commits, so it sees it.
    run = (
        ProvisioningRun.objects.select_for_update()
        .filter(
            cluster=cluster,
            tenant=tenant,
            kind=kind,
            notebook=notebook,
            state=RunState.QUEUED,
            attempts=0,
        )
        .order_by("pk")
        .first()
    )
    if run is None:
        run = ProvisioningRun.objects.create(
            cluster=cluster,
            tenant=tenant,
            kind=kind,
            notebook=notebook,
            reason=reason[:200],
            dry_run=not cluster.applies,
            requested_by=actor,
        )
        _enqueue(run.pk)
    if gpu_request is not None:
        run.gpu_requests.add(gpu_request)
    return run


def provisioning_request(
    *, tenant: Tenant, reason: str, actor: User | None = None, gpu_request: GpuRequest | None = None
) -> list[ProvisioningRun]:
    """Queue a run of `tenant`'s bundle in every enabled cluster, executed once the caller's
    transaction commits. Archived tenants get their namespaces deleted instead."""
    kind = RunKind.DELETE if tenant.state == TenantState.ARCHIVED else RunKind.BUNDLE
    return [
        provisioning_run_queue(
            cluster=cluster,
            tenant=tenant,
            reason=reason,
            actor=actor,
            kind=kind,
            gpu_request=gpu_request,
        )
        for cluster in Cluster.objects.filter(enabled=True)
    ]


@transaction.atomic
def provisioning_run_retry(*, actor: User, run: ProvisioningRun) -> ProvisioningRun:
    """Queue a failed run again. Admins only (PermissionDenied otherwise); InvalidTransition
    when the run has not failed."""
    if not actor.is_portal_admin:
        raise PermissionDenied(_("Only admins retry provisioning runs."))
    locked = ProvisioningRun.objects.select_for_update().get(pk=run.pk)
    if locked.state != RunState.FAILED:
        raise InvalidTransition(
            _("Run %(pk)s is %(state)s; only failed runs are retried.")
            % {"pk": locked.pk, "state": locked.get_state_display()}
        )
    locked.state = RunState.QUEUED
    locked.attempts = 0  # a fresh set of attempts for transient failures
    locked.save(update_fields=["state", "attempts"])
    audit_record(
        actor=actor,
        action="provisioning_run.retry",
        target=locked,
        tenant=locked.tenant,
        changes={"state": [RunState.FAILED, RunState.QUEUED]},
    )
    _enqueue(locked.pk)
    return locked


def _claim(run_id: int, worker: str) -> bool:
    """Take a queued run, unless another run of the same tenant and cluster is running, or
    (for a notebook run) an earlier one is unfinished: the namespace it needs may not be
    there yet. A run left queued is offered again when the run before it ends."""
    now = timezone.now()
    same_place = ProvisioningRun.objects.filter(
        tenant=OuterRef("tenant"), cluster=OuterRef("cluster")
    )
    running = same_place.filter(state=RunState.RUNNING)
    earlier = same_place.filter(state__in=UNFINISHED_RUN_STATES, pk__lt=OuterRef("pk"))
    return bool(
        ProvisioningRun.objects.filter(pk=run_id, state=RunState.QUEUED)
        .exclude(Exists(running))
        .exclude(Q(kind=RunKind.NOTEBOOK) & Exists(earlier))
        .update(
            state=RunState.RUNNING,
            attempts=F("attempts") + 1,
            started_at=now,
            finished_at=None,
            claimed_by=worker[:200],
        )
    )


def provisioning_run_execute(*, run_id: int, worker: str = "") -> ProvisioningRun | None:
    """Execute one queued run; None when it is not queued (another worker has it, or it is done).

    Transient cluster failures put the run back in the queue (up to MAX_RUN_ATTEMPTS attempts;
    the caller schedules the next one); other failures leave it failed, with the API's reason.
    """
    if not _claim(run_id, worker or socket.gethostname()):
        return None
    run = ProvisioningRun.objects.select_related("cluster", "tenant").get(pk=run_id)
    if run.kind in run_kinds:
        return _execute_registered(run, run_kinds.get(run.kind))
    cluster, tenant = run.cluster, run.tenant
    if tenant.state == TenantState.ARCHIVED:
        run.kind = RunKind.DELETE  # an old bundle run must not bring the namespace back
    source = bundle_input(cluster=cluster, tenant=tenant)
    try:
        if len(source.spec.namespace) > NAMESPACE_MAX_LENGTH:
            raise ClusterError(
                f"Namespace {source.spec.namespace} is longer than {NAMESPACE_MAX_LENGTH} "
                "characters; use a shorter namespace prefix or tenant slug."
            )
        desired = tenant_bundle_manifests(source.spec) if run.kind != RunKind.DELETE else []
        run.manifests = manifests_yaml(desired)
        if not cluster.applies:
            report = SyncReport(results=[object_result(item, Outcome.RENDERED) for item in desired])
            requests = 0
        else:
            report, requests = _execute_against_cluster(run, desired, source)
    except Exception as error:  # a claimed run must end visibly, whatever broke
        logger.exception("provisioning run %s failed unexpectedly", run.pk)
        report, requests = _unexpected(error), 0
    return _finish(run, report=report, requests=requests, source=source)


def _unexpected(error: Exception) -> SyncReport:
    """A bug, not the API: the run fails saying what broke (the caller logs the traceback)."""
    return SyncReport(error=ClusterError(f"Unexpected error: {type(error).__name__}: {error}"))


def _execute_registered(run: ProvisioningRun, handler: RunKindHandler) -> ProvisioningRun:
    """Apply the objects of a run whose kind a higher app owns (a notebook's), as it says."""
    requests = 0
    try:
        if not run.cluster.applies:
            manifests, report = handler.sync(run, None)
        else:
            gateway = KubernetesGateway(run.cluster)
            try:
                manifests, report = handler.sync(run, gateway)
            finally:
                gateway.close()
            requests = gateway.requests
        run.manifests = manifests
    except ClusterError as error:
        report = SyncReport(error=error)
    except Exception as error:  # a claimed run must end visibly, whatever broke
        logger.exception("provisioning run %s failed unexpectedly", run.pk)
        report = _unexpected(error)
    return _finish(run, report=report, requests=requests)


def _execute_against_cluster(
    run: ProvisioningRun, desired: list[dict[str, Any]], source: BundleInput
) -> tuple[SyncReport, int]:
    namespace = source.spec.namespace
    try:
        gateway = KubernetesGateway(run.cluster)
    except ClusterError as error:
        return SyncReport(error=error), 0
    try:
        if run.kind == RunKind.DELETE:
            report = namespace_delete(gateway, namespace=namespace, tenant_slug=run.tenant.slug)
        else:
            report = bundle_sync(
                gateway, desired, tenant_slug=run.tenant.slug, suspended=source.spec.suspended
            )
    finally:
        gateway.close()
    return report, gateway.requests


@transaction.atomic
def _finish(
    run: ProvisioningRun, *, report: SyncReport, requests: int, source: BundleInput | None = None
) -> ProvisioningRun:
    locked = ProvisioningRun.objects.select_for_update().get(pk=run.pk)
    if (locked.state, locked.attempts, locked.claimed_by) != (
        RunState.RUNNING,
        run.attempts,
        run.claimed_by,
    ):
        # The lease ran out and someone else took the run: their outcome counts, not ours.
        logger.warning("run %s: outcome of an expired claim discarded", run.pk)
        return locked
    locked.kind = run.kind
    locked.dry_run = not run.cluster.applies
    locked.manifests = run.manifests
    locked.api_requests += requests
    locked.results.all().delete()
    ProvisioningResult.objects.bulk_create(
        ProvisioningResult(
            run=locked,
            position=position,
            api_version=result.api_version,
            kind=result.kind,
            namespace=result.namespace,
            name=result.name,
            outcome=result.outcome,
            message=result.message,
            drift=result.drift,
        )
        for position, result in enumerate(report.results)
    )
    error = report.error
    if error is None:
        locked.state, locked.error = RunState.SUCCEEDED, ""
    elif error.transient and locked.attempts < MAX_RUN_ATTEMPTS:
        locked.state = RunState.QUEUED
        locked.error = f"Attempt {locked.attempts} failed, will retry: {error.message}"
    else:
        locked.state, locked.error = RunState.FAILED, error.message
    locked.finished_at = timezone.now() if locked.state != RunState.QUEUED else None
    locked.save()
    audit_record(
        actor=None,
        action=f"provisioning_run.{'requeue' if locked.state == RunState.QUEUED else locked.state}",
        target=locked,
        tenant=locked.tenant,
        changes={"state": [RunState.RUNNING, locked.state]},
        comment=locked.error,
    )
    if locked.state == RunState.SUCCEEDED and source is not None and not source.spec.suspended:
        _start_allocations(locked, source.approved_request_ids)
    if locked.kind in run_kinds:
        run_kinds.get(locked.kind).finished(locked)
    if locked.state != RunState.QUEUED:
        _offer_waiting_runs(locked)
    return locked


def _offer_waiting_runs(run: ProvisioningRun) -> None:
    """Once `run` ends, the runs queued behind it in the same tenant and cluster go."""
    waiting = ProvisioningRun.objects.filter(
        tenant=run.tenant_id, cluster=run.cluster_id, state=RunState.QUEUED, attempts=0
    ).exclude(pk=run.pk)
    for run_id in waiting.values_list("pk", flat=True):
        _enqueue(run_id)


def _start_allocations(run: ProvisioningRun, request_ids: tuple[int, ...]) -> None:
    started = allocations_activate(
        request_ids=request_ids,
        comment=f"Provisioned by run {run.pk} in cluster {run.cluster.name}.",
    )
    if started:
        run.gpu_requests.add(*started)


def provisioning_runs_resume(*, now: datetime | None = None) -> list[int]:
    """Runs to (re)start: queued ones whose task was lost, and running ones whose worker died
    (their lease expired; they go back to the queue). Returns the ids to enqueue."""
    moment = now or timezone.now()
    with transaction.atomic():
        abandoned = ProvisioningRun.objects.select_for_update(skip_locked=True).filter(
            state=RunState.RUNNING, started_at__lt=moment - RUN_LEASE
        )
        for run in abandoned.select_related("tenant"):
            worker = run.claimed_by or "?"
            if run.attempts >= MAX_RUN_ATTEMPTS:
                run.state, run.finished_at = RunState.FAILED, moment
                run.error = f"Worker {worker} stopped answering, {run.attempts} attempts: gave up."
            else:
                run.state = RunState.QUEUED
                run.error = f"Worker {worker} stopped answering; queued again."
            run.save(update_fields=["state", "error", "finished_at"])
            audit_record(
                actor=None,
                action="provisioning_run."
                + ("requeue" if run.state == RunState.QUEUED else "failed"),
                target=run,
                tenant=run.tenant,
                changes={"state": [RunState.RUNNING, run.state]},
                comment=run.error,
            )
    # Never started: its task was lost. Started before: its retry is overdue (the longest
    # countdown is a few minutes), or it waited behind another run of the same tenant.
    waiting = ProvisioningRun.objects.filter(state=RunState.QUEUED).filter(
        Q(started_at__isnull=True, created_at__lt=moment - timedelta(minutes=2))
        | Q(started_at__lt=moment - timedelta(minutes=10))
    )
    return list(waiting.values_list("pk", flat=True))
