"""Writes for clusters and provisioning: queue runs, execute them, reconcile, read capacity.

A run is queued inside the transaction of the change that needs it (a tenant created, its
members, quotas or allocations changed) and executed by a task once that commits. Execution
claims the run with one conditional UPDATE, so two workers never apply the same run; talks to
the cluster outside any transaction; then writes the results, the final state, the audit
event and the allocations it started in one transaction.
"""

import logging
import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.utils import timezone

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.catalog.validators import quantity_parse
from portal.cluster.gateway import ClusterError, KubernetesGateway
from portal.cluster.manifests import (
    BUNDLE_SELECTOR,
    LABEL_MANAGED_BY,
    LABEL_TENANT,
    NAMESPACED_KINDS,
    manifest_differences,
    manifests_yaml,
    object_key,
    tenant_bundle_manifests,
)
from portal.cluster.models import (
    MANAGED_BY,
    UNFINISHED_RUN_STATES,
    Cluster,
    NodeCapacity,
    Outcome,
    ProvisioningResult,
    ProvisioningRun,
    RunKind,
    RunState,
)
from portal.cluster.selectors import BundleInput, bundle_input, bundle_inputs
from portal.core.audit import audit_record, changes_between, snapshot
from portal.core.errors import Conflict, InvalidTransition, PermissionDenied, ValidationFailed
from portal.core.validators import model_problems
from tenants.models import Tenant, TenantState

logger = logging.getLogger(__name__)

# A run whose worker vanished is taken up again after this long.
RUN_LEASE = timedelta(minutes=15)
# Transient failures re-queue a run this many times before it is left failed.
MAX_RUN_ATTEMPTS = 4
NAMESPACE_MAX_LENGTH = 63

CLUSTER_FIELDS = (
    "mode",
    "connection",
    "kubeconfig_path",
    "kubeconfig_context",
    "namespace_prefix",
    "ingress_namespace_labels",
    "monitoring_namespace_labels",
    "identity_prefix",
    "pods_per_namespace",
    "volumes_per_namespace",
    "enabled",
)


def _cluster_clean(cluster: Cluster) -> None:
    problems = model_problems(cluster, exclude=["capacity_collected_at", "reconciled_at"])
    if problems:
        raise ValidationFailed.of("cluster", problems)
    if cluster.connection == "kubeconfig" and not cluster.kubeconfig_path:
        raise ValidationFailed.on(
            "kubeconfig_path", "Give the path of the kubeconfig file mounted from a secret."
        )


@transaction.atomic
def cluster_create(*, actor: User | None, name: str, **fields: Any) -> Cluster:
    """Register a cluster; every active tenant is then provisioned in it.

    Raises ValidationFailed naming each bad field, Conflict if the name is taken.
    """
    unknown = set(fields) - set(CLUSTER_FIELDS)
    if unknown:
        raise ValidationFailed(f"Unknown fields: {', '.join(sorted(unknown))}.")
    cluster = Cluster(name=name, **fields)
    if Cluster.objects.filter(name=name).exists():
        raise Conflict(f"A cluster {name!r} exists already.", fields={"name": ["Taken."]})
    _cluster_clean(cluster)
    cluster.save()
    audit_record(
        actor=actor,
        action="cluster.create",
        target=cluster,
        changes=changes_between({}, snapshot(cluster, ("name", *CLUSTER_FIELDS))),
    )
    if cluster.enabled:
        for tenant in Tenant.objects.exclude(state=TenantState.ARCHIVED):
            _queue(cluster=cluster, tenant=tenant, reason="cluster added", actor=actor)
    return cluster


@transaction.atomic
def cluster_update(*, actor: User, cluster: Cluster, **fields: Any) -> Cluster:
    """Change how a cluster is reached or what its bundles hold; tenants are re-provisioned."""
    unknown = set(fields) - set(CLUSTER_FIELDS)
    if unknown:
        raise ValidationFailed(
            f"These fields cannot be changed: {', '.join(sorted(unknown))}.",
            fields={name: ["Cannot be changed."] for name in unknown},
        )
    cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
    if "namespace_prefix" in fields and fields["namespace_prefix"] != cluster.namespace_prefix:
        # The namespaces already made would be left behind, quotas and bindings intact.
        raise ValidationFailed.on(
            "namespace_prefix",
            "Cannot change once namespaces exist; register a new cluster instead.",
        )
    before = snapshot(cluster, fields)
    for name, value in fields.items():
        setattr(cluster, name, value)
    _cluster_clean(cluster)
    changes = changes_between(before, snapshot(cluster, fields))
    if changes:
        cluster.save()
        audit_record(actor=actor, action="cluster.update", target=cluster, changes=changes)
        if cluster.enabled:
            for tenant in Tenant.objects.exclude(state=TenantState.ARCHIVED):
                _queue(cluster=cluster, tenant=tenant, reason="cluster changed", actor=actor)
    return cluster


def _enqueue_on_commit(run: ProvisioningRun) -> None:
    from portal.cluster.tasks import execute_provisioning_run  # noqa: PLC0415  (cycle)

    run_id = run.pk
    transaction.on_commit(lambda: execute_provisioning_run.delay(run_id))


def _queue(
    *,
    cluster: Cluster,
    tenant: Tenant,
    reason: str,
    actor: User | None,
    kind: RunKind = RunKind.BUNDLE,
    gpu_request: GpuRequest | None = None,
) -> ProvisioningRun:
    # A queued run renders the portal's state when it starts, so it covers later changes too.
    # The row lock makes a worker's claim wait until this change commits, so it sees it.
    run = (
        ProvisioningRun.objects.select_for_update()
        .filter(cluster=cluster, tenant=tenant, kind=kind, state=RunState.QUEUED, attempts=0)
        .order_by("pk")
        .first()
    )
    if run is None:
        run = ProvisioningRun.objects.create(
            cluster=cluster,
            tenant=tenant,
            kind=kind,
            reason=reason[:200],
            dry_run=not cluster.applies,
            requested_by=actor,
        )
        _enqueue_on_commit(run)
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
        _queue(
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
        raise PermissionDenied("Only admins retry provisioning runs.")
    locked = ProvisioningRun.objects.select_for_update().get(pk=run.pk)
    if locked.state != RunState.FAILED:
        raise InvalidTransition(f"Run {locked.pk} is {locked.state}; only failed runs are retried.")
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
    _enqueue_on_commit(locked)
    return locked


@dataclass
class ObjectResult:
    api_version: str
    kind: str
    namespace: str
    name: str
    outcome: Outcome
    message: str = ""
    drift: list[str] = field(default_factory=list)


@dataclass
class SyncReport:
    """What a sync did, object by object; `error` is set when it stopped early."""

    results: list[ObjectResult] = field(default_factory=list)
    error: ClusterError | None = None

    @property
    def drifted(self) -> list[ObjectResult]:
        return [result for result in self.results if result.outcome != Outcome.UNCHANGED]


def _result(obj: dict[str, Any], outcome: Outcome, **extra: Any) -> ObjectResult:
    kind, namespace, name = object_key(obj)
    return ObjectResult(str(obj["apiVersion"]), kind, namespace, name, outcome, **extra)


def _comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    # List items carry no apiVersion/kind; the kind is known from the list that held them.
    return {key: value for key, value in manifest.items() if key not in ("apiVersion", "kind")}


def _managed_by_portal(obj: dict[str, Any], tenant_slug: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_MANAGED_BY) == MANAGED_BY and labels.get(LABEL_TENANT) == tenant_slug


@dataclass
class LiveBundle:
    """A tenant's live bundle objects by (kind, namespace, name), with their apiVersion."""

    namespace: dict[str, Any] | None
    objects: dict[tuple[str, str, str], tuple[str, dict[str, Any]]]


def _live_bundle(gateway: KubernetesGateway, namespace: str, tenant_slug: str) -> LiveBundle:
    live_namespace = gateway.get("v1", "Namespace", namespace)
    if live_namespace is None:
        return LiveBundle(namespace=None, objects={})
    if not _managed_by_portal(live_namespace, tenant_slug):
        raise ClusterError(
            f"Namespace {namespace} exists and is not managed by the portal for {tenant_slug}; "
            "it is left alone. Rename or remove it, then retry."
        )
    objects = {}
    for api_version, kind in NAMESPACED_KINDS:
        for item in gateway.list(
            api_version, kind, namespace=namespace, label_selector=BUNDLE_SELECTOR
        ):
            metadata = item.get("metadata") or {}
            objects[kind, namespace, metadata.get("name", "")] = (api_version, item)
    return LiveBundle(namespace=live_namespace, objects=objects)


def bundle_compare(
    desired: list[dict[str, Any]], live: LiveBundle
) -> list[tuple[dict[str, Any], Outcome, list[str]]]:
    """Each desired object with what applying it would do: create, configure (with the drifted
    fields) or nothing. Pure: `live` was read before."""
    plan = []
    for manifest in desired:
        key = object_key(manifest)
        current = live.namespace if manifest["kind"] == "Namespace" else None
        if manifest["kind"] != "Namespace":
            found = live.objects.get(key)
            current = found[1] if found else None
        if current is None:
            plan.append((manifest, Outcome.CREATED, ["(missing)"]))
            continue
        drift = manifest_differences(_comparable(manifest), current)
        plan.append((manifest, Outcome.CONFIGURED if drift else Outcome.UNCHANGED, drift))
    return plan


def _unwanted(
    desired: list[dict[str, Any]], live: LiveBundle
) -> list[tuple[str, str, dict[str, Any]]]:
    """Live bundle objects (api_version, kind, object) the portal no longer renders."""
    wanted = {object_key(manifest) for manifest in desired}
    return [
        (api_version, key[0], obj)
        for key, (api_version, obj) in live.objects.items()
        if key not in wanted
    ]


def _scale_down(gateway: KubernetesGateway, namespace: str, report: SyncReport) -> None:
    for kind in ("Deployment", "StatefulSet"):
        for item in gateway.list("apps/v1", kind, namespace=namespace):
            if (item.get("spec") or {}).get("replicas", 1) == 0:
                continue
            name = item["metadata"]["name"]
            gateway.merge_patch("apps/v1", kind, name, namespace, {"spec": {"replicas": 0}})
            report.results.append(
                ObjectResult("apps/v1", kind, namespace, name, Outcome.SCALED_DOWN)
            )


def bundle_sync(
    gateway: KubernetesGateway, desired: list[dict[str, Any]], *, tenant_slug: str, suspended: bool
) -> SyncReport:
    """Make the cluster hold `desired`: apply what is missing or drifted, delete bundle objects
    no longer wanted (by label, nothing else), scale workloads to zero when suspended.

    Writes nothing when the live objects already match. Stops at the first failure, marking
    that object failed and the rest skipped.
    """
    report = SyncReport()
    namespace = desired[0]["metadata"]["name"]
    pending = list(desired)
    try:
        live = _live_bundle(gateway, namespace, tenant_slug)
        for manifest, planned, drift in bundle_compare(desired, live):
            outcome = planned
            if planned != Outcome.UNCHANGED:
                created = gateway.apply(manifest)
                # Missing from the labelled listing but there: someone removed our labels.
                if planned == Outcome.CREATED and not created:
                    outcome = Outcome.CONFIGURED
            report.results.append(
                _result(manifest, outcome, drift=drift if outcome == Outcome.CONFIGURED else [])
            )
            pending.remove(manifest)
        for api_version, kind, obj in _unwanted(desired, live):
            name = obj["metadata"]["name"]
            gateway.delete(api_version, kind, name, namespace, seen=obj)
            report.results.append(
                ObjectResult(
                    api_version,
                    kind,
                    namespace,
                    name,
                    Outcome.DELETED,
                    message="no longer part of the bundle",
                )
            )
        if suspended:
            _scale_down(gateway, namespace, report)
    except ClusterError as error:
        report.error = error
        if pending:
            report.results.append(_result(pending[0], Outcome.FAILED, message=error.message))
            report.results += [_result(item, Outcome.SKIPPED) for item in pending[1:]]
    return report


def namespace_delete(gateway: KubernetesGateway, *, namespace: str, tenant_slug: str) -> SyncReport:
    """Delete the tenant's namespace (and so everything in it), if the portal manages it."""
    report = SyncReport()
    try:
        live = gateway.get("v1", "Namespace", namespace)
        if live is None:
            outcome, message = Outcome.UNCHANGED, "already absent"
        elif not _managed_by_portal(live, tenant_slug):
            raise ClusterError(f"Namespace {namespace} is not managed by the portal; kept.")
        elif live.get("metadata", {}).get("deletionTimestamp"):
            outcome, message = Outcome.DELETED, "already being deleted"
        else:
            gateway.delete("v1", "Namespace", namespace, seen=live)
            outcome, message = Outcome.DELETED, "with everything in it"
        report.results.append(ObjectResult("v1", "Namespace", "", namespace, outcome, message))
    except ClusterError as error:
        report.error = error
        report.results.append(
            ObjectResult("v1", "Namespace", "", namespace, Outcome.FAILED, error.message)
        )
    return report


def _claim(run_id: int, worker: str) -> bool:
    """Take a queued run, unless another run of the same tenant and cluster is running (the
    run stays queued; the resume task offers it again)."""
    now = timezone.now()
    running = ProvisioningRun.objects.filter(
        tenant=OuterRef("tenant"), cluster=OuterRef("cluster"), state=RunState.RUNNING
    )
    return bool(
        ProvisioningRun.objects.filter(pk=run_id, state=RunState.QUEUED)
        .exclude(Exists(running))
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
            report = SyncReport(results=[_result(item, Outcome.RENDERED) for item in desired])
            requests = 0
        else:
            report, requests = _execute_against_cluster(run, desired, source)
    except Exception as error:  # a claimed run must end visibly, whatever broke
        logger.exception("provisioning run %s failed unexpectedly", run_id)
        report = SyncReport(
            error=ClusterError(f"Unexpected error: {type(error).__name__}: {error}")
        )
        requests = 0
    return _finish(run, report=report, source=source, requests=requests)


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
    run: ProvisioningRun, *, report: SyncReport, source: BundleInput, requests: int
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
    if locked.state == RunState.SUCCEEDED and not source.spec.suspended:
        _start_allocations(locked, source.approved_request_ids)
    return locked


def _start_allocations(run: ProvisioningRun, request_ids: tuple[int, ...]) -> None:
    from portal.allocations.services import allocations_activate  # noqa: PLC0415  (cycle)

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


@dataclass(frozen=True)
class ReconcileReport:
    checked: int
    drifted: list[str]
    api_requests: int


def cluster_reconcile(*, cluster: Cluster) -> ReconcileReport:
    """Compare every tenant's live bundle in `cluster` with what it should be; for each tenant
    that drifted, record the drift (an audit event naming objects and fields) and repair it in a
    run. An unchanged cluster costs 1 + 5 list requests and writes nothing."""
    if not cluster.applies:
        return ReconcileReport(checked=0, drifted=[], api_requests=0)
    gateway = KubernetesGateway(cluster)
    try:
        return _reconcile(cluster, gateway)
    finally:
        gateway.close()


def _reconcile(cluster: Cluster, gateway: KubernetesGateway) -> ReconcileReport:
    namespaces = {
        item["metadata"]["name"]: item
        for item in gateway.list("v1", "Namespace", label_selector=BUNDLE_SELECTOR)
    }
    objects: dict[str, dict[tuple[str, str, str], tuple[str, dict[str, Any]]]] = {}
    for api_version, kind in NAMESPACED_KINDS:
        for item in gateway.list(api_version, kind, label_selector=BUNDLE_SELECTOR):
            metadata = item["metadata"]
            objects.setdefault(metadata["namespace"], {})[
                kind, metadata["namespace"], metadata["name"]
            ] = (api_version, item)
    last_run = ProvisioningRun.objects.filter(tenant=OuterRef("pk"), cluster=cluster).order_by(
        "-created_at", "-id"
    )
    tenants = list(Tenant.objects.annotate(last_run_state=Subquery(last_run.values("state")[:1])))
    inputs = bundle_inputs(
        cluster=cluster, tenants=[t for t in tenants if t.state != TenantState.ARCHIVED]
    )
    # A run in progress will fix what it finds; a failed one waits for an admin's retry
    # rather than a doomed repair run (and its audit event) every period.
    busy = {
        tenant.pk
        for tenant in tenants
        if tenant.last_run_state in (*UNFINISHED_RUN_STATES, RunState.FAILED)
    }
    drifted = []
    for tenant in tenants:
        namespace = cluster.namespace_for(tenant.slug)
        if tenant.state == TenantState.ARCHIVED:
            terminating = (
                (namespaces.get(namespace) or {}).get("metadata", {}).get("deletionTimestamp")
            )
            if namespace in namespaces and not terminating and tenant.pk not in busy:
                drifted.append(tenant.slug)
                with transaction.atomic():
                    _record_drift(tenant, cluster, {f"Namespace/{namespace}": ["(archived)"]})
                    _queue(
                        cluster=cluster,
                        tenant=tenant,
                        reason="drift: archived tenant's namespace still exists",
                        actor=None,
                        kind=RunKind.DELETE,
                    )
            continue
        desired = tenant_bundle_manifests(inputs[tenant.pk].spec)
        live = LiveBundle(namespace=namespaces.get(namespace), objects=objects.get(namespace, {}))
        drift = {
            f"{manifest['kind']}/{manifest['metadata']['name']}": fields
            for manifest, outcome, fields in bundle_compare(desired, live)
            if outcome != Outcome.UNCHANGED
        }
        for _, kind, obj in _unwanted(desired, live):
            drift[f"{kind}/{obj['metadata']['name']}"] = ["(unwanted)"]
        if drift and tenant.pk not in busy:
            drifted.append(tenant.slug)
            with transaction.atomic():
                _record_drift(tenant, cluster, drift)
                _queue(
                    cluster=cluster,
                    tenant=tenant,
                    reason=f"drift: {', '.join(sorted(drift))}",
                    actor=None,
                    kind=RunKind.REPAIR,
                )
    Cluster.objects.filter(pk=cluster.pk).update(reconciled_at=timezone.now())
    return ReconcileReport(checked=len(tenants), drifted=drifted, api_requests=gateway.requests)


def _record_drift(tenant: Tenant, cluster: Cluster, drift: dict[str, list[str]]) -> None:
    audit_record(
        actor=None,
        action="cluster.drift",
        target=tenant,
        tenant=tenant,
        changes={name: [fields, "repair queued"] for name, fields in sorted(drift.items())},
        comment=f"Found in cluster {cluster.name}; a repair run was queued.",
    )


def _pod_requests(pod: dict[str, Any]) -> dict[str, Decimal]:
    """Extended resources a pod's containers request (limits stand in for absent requests)."""
    totals: dict[str, Decimal] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        amounts = dict(resources.get("limits") or {}) | dict(resources.get("requests") or {})
        for name, quantity in amounts.items():
            if "/" not in name:
                continue  # CPU and memory are not what GPU capacity is about
            try:
                totals[name] = totals.get(name, Decimal(0)) + quantity_parse(str(quantity))
            except ValueError:
                continue
    return totals


def capacity_collect(*, cluster: Cluster) -> int:
    """Read the cluster's nodes and running pods and record them (see capacity_record)."""
    if not cluster.applies:
        return 0
    gateway = KubernetesGateway(cluster)
    try:
        nodes = gateway.list("v1", "Node")
        pods = gateway.list(
            "v1", "Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed"
        )
    finally:
        gateway.close()
    return capacity_record(cluster=cluster, nodes=nodes, pods=pods)


def capacity_record(
    *, cluster: Cluster, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> int:
    """Replace the cluster's node rows with `nodes` (Node objects) and the extended resources
    `pods` (Pod objects) request on each. Returns the number of nodes."""
    requested: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            continue
        on_node = requested.setdefault(node_name, {})
        for name, amount in _pod_requests(pod).items():
            on_node[name] = on_node.get(name, Decimal(0)) + amount
    now = timezone.now()
    rows = [
        NodeCapacity(
            cluster=cluster,
            name=node["metadata"]["name"],
            labels=node["metadata"].get("labels") or {},
            allocatable=dict((node.get("status") or {}).get("allocatable") or {}),
            requested={
                name: str(amount)
                for name, amount in requested.get(node["metadata"]["name"], {}).items()
            },
            schedulable=not (node.get("spec") or {}).get("unschedulable", False),
            collected_at=now,
        )
        for node in nodes
    ]
    with transaction.atomic():
        NodeCapacity.objects.filter(cluster=cluster).delete()
        NodeCapacity.objects.bulk_create(rows)
        Cluster.objects.filter(pk=cluster.pk).update(capacity_collected_at=now)
    return len(rows)


def cluster_refresh_request(*, actor: User, cluster: Cluster, what: str) -> None:
    """Queue a reconcile (`what="reconcile"`) or a capacity read (`"capacity"`) of `cluster`
    now rather than at the next period."""
    from portal.cluster.tasks import collect_cluster_capacity, reconcile_cluster  # noqa: PLC0415

    tasks = {"reconcile": reconcile_cluster, "capacity": collect_cluster_capacity}
    if what not in tasks:
        raise ValidationFailed(f"Unknown action {what!r}.", fields={"action": ["Unknown."]})
    with transaction.atomic():
        audit_record(actor=actor, action=f"cluster.{what}_requested", target=cluster)
    cluster_id = cluster.pk
    transaction.on_commit(lambda: tasks[what].delay(cluster_id))
