"""Capacity: what each cluster's nodes offer and what running pods already request."""

from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.catalog.validators import quantity_parse
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.models import Cluster, NodeCapacity


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
