"""Capacity: what each cluster's nodes offer and what running pods already request."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.catalog.models import GpuPool, Offering
from portal.catalog.validators import quantity_parse
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.models import Cluster, NodeCapacity, OfferingCapacity

# A node belongs to the pool this label names; without it, to the pool of its GPU model.
POOL_LABEL = "gpu-portal.io/pool"


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


def _amount(quantities: dict[str, Any], name: str) -> Decimal:
    try:
        return quantity_parse(str(quantities.get(name, "0")))
    except ValueError:
        return Decimal(0)


def _pool_nodes(pool: GpuPool, nodes: list[NodeCapacity]) -> list[NodeCapacity]:
    model = pool.gpu_model
    return [
        node
        for node in nodes
        if node.schedulable
        and node.labels.get(model.node_label_key) == model.node_label_value
        and node.labels.get(POOL_LABEL, pool.name) == pool.name
    ]


def _units(offering: Offering, nodes: list[NodeCapacity]) -> tuple[int, int]:
    """(total, free) units of `offering` on `nodes`: the scarcest of its resources decides
    (HAMi asks for a GPU and memory)."""
    total = free = None
    for name, per_unit in offering.resources.items():
        unit = quantity_parse(str(per_unit))
        allocatable = sum((_amount(node.allocatable, name) for node in nodes), Decimal(0))
        requested = sum((_amount(node.requested, name) for node in nodes), Decimal(0))
        units = int(allocatable // unit)
        spare = int(max(allocatable - requested, Decimal(0)) // unit)
        total = units if total is None else min(total, units)
        free = spare if free is None else min(free, spare)
    return total or 0, free or 0


def capacity_rollup(
    cluster: Cluster, nodes: list[NodeCapacity], *, collected_at: datetime
) -> list[OfferingCapacity]:
    """Per pool of `cluster` and offering of the pool's model and backend: its units on the
    pool's nodes. Two queries (pools, offerings)."""
    offerings: dict[tuple[int, int], list[Offering]] = {}
    for offering in Offering.objects.all():
        offerings.setdefault((offering.gpu_model_id, offering.backend_id), []).append(offering)
    rows = []
    for pool in GpuPool.objects.filter(cluster=cluster.name).select_related("gpu_model"):
        on_pool = _pool_nodes(pool, nodes)
        for offering in offerings.get((pool.gpu_model_id, pool.backend_id), []):
            total, free = _units(offering, on_pool)
            rows.append(
                OfferingCapacity(
                    cluster=cluster,
                    pool=pool.name,
                    gpu_model=pool.gpu_model.name,
                    offering=offering,
                    nodes=len(on_pool),
                    total=total,
                    free=free,
                    collected_at=collected_at,
                )
            )
    return rows


def capacity_collect(*, cluster: Cluster) -> int:
    """Read the cluster's nodes and running pods and record them (see capacity_record); the
    number of nodes.

    Reads of one cluster never overlap: a read holds its cluster's row locked (FOR NO KEY
    UPDATE, so runs referring to the cluster are still inserted), and a read asked for
    meanwhile (a click on *Read capacity now* during the periodic read) waits for it and
    answers its outcome rather than reading again.
    """
    if not cluster.applies:
        return 0
    with transaction.atomic():
        mine = Cluster.objects.select_for_update(no_key=True, skip_locked=True).filter(
            pk=cluster.pk
        )
        if not list(mine.values_list("pk", flat=True)):
            # Another read holds it (or the cluster is gone): wait for that read to end.
            list(Cluster.objects.select_for_update(no_key=True).filter(pk=cluster.pk))
            return NodeCapacity.objects.filter(cluster=cluster).count()
        return _capacity_read(cluster)


def _capacity_read(cluster: Cluster) -> int:
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
    `pods` (Pod objects) request on each, and its per-offering rollup. Returns the number of
    nodes."""
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
    rollup = capacity_rollup(cluster, rows, collected_at=now)
    with transaction.atomic():
        NodeCapacity.objects.filter(cluster=cluster).delete()
        NodeCapacity.objects.bulk_create(rows)
        OfferingCapacity.objects.filter(cluster=cluster).delete()
        OfferingCapacity.objects.bulk_create(rollup)
        Cluster.objects.filter(pk=cluster.pk).update(capacity_collected_at=now)
    return len(rows)
