"""Reconcile: find where clusters drifted from the portal, record it, and queue repairs."""

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from django.utils.translation import gettext_noop

from portal.cluster.gateway import KubernetesGateway
from portal.cluster.manifests import BUNDLE_SELECTOR, tenant_bundle_manifests
from portal.cluster.models import (
    UNFINISHED_RUN_STATES,
    Cluster,
    Outcome,
    ProvisioningRun,
    RunKind,
    RunState,
)
from portal.cluster.selectors import bundle_inputs
from portal.cluster.services.bundle import (
    LiveBundle,
    bundle_compare,
    bundle_objects,
    bundle_unwanted,
)
from portal.cluster.services.runs import provisioning_run_queue
from portal.core.audit import audit_record
from tenants.models import Tenant, TenantState


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
    objects = bundle_objects(gateway)
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
        if tenant.pk in busy:
            continue
        namespace = cluster.namespace_for(tenant.slug)
        live_namespace = namespaces.get(namespace)
        if tenant.state == TenantState.ARCHIVED:
            if live_namespace is None or live_namespace["metadata"].get("deletionTimestamp"):
                continue  # gone, or going
            drift = {f"Namespace/{namespace}": ["(archived)"]}
            kind, reason = (
                RunKind.DELETE,
                gettext_noop("drift: archived tenant's namespace still exists"),
            )
        else:
            live = LiveBundle(namespace=live_namespace, objects=objects.get(namespace, {}))
            drift = _drift(tenant_bundle_manifests(inputs[tenant.pk].spec), live)
            kind, reason = RunKind.REPAIR, f"drift: {', '.join(sorted(drift))}"
        if drift:
            drifted.append(tenant.slug)
            with transaction.atomic():
                _record_drift(tenant, cluster, drift)
                provisioning_run_queue(
                    cluster=cluster, tenant=tenant, reason=reason, actor=None, kind=kind
                )
    Cluster.objects.filter(pk=cluster.pk).update(reconciled_at=timezone.now())
    return ReconcileReport(checked=len(tenants), drifted=drifted, api_requests=gateway.requests)


def _drift(desired: list[dict[str, Any]], live: LiveBundle) -> dict[str, list[str]]:
    """Kind/name of each object that differs -> the drifted fields, "(missing)" or
    "(unwanted)" for labelled objects the portal no longer renders."""
    drift = {
        f"{manifest['kind']}/{manifest['metadata']['name']}": fields
        for manifest, outcome, fields in bundle_compare(desired, live)
        if outcome != Outcome.UNCHANGED
    }
    for _, kind, obj in bundle_unwanted(desired, live):
        drift[f"{kind}/{obj['metadata']['name']}"] = ["(unwanted)"]
    return drift


def _record_drift(tenant: Tenant, cluster: Cluster, drift: dict[str, list[str]]) -> None:
    audit_record(
        actor=None,
        action="cluster.drift",
        target=tenant,
        tenant=tenant,
        changes={name: [fields, "repair queued"] for name, fields in sorted(drift.items())},
        comment=f"Found in cluster {cluster.name}; a repair run was queued.",
    )
