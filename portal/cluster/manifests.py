"""The tenant bundle as pure functions of portal state: no database, no network.

`tenant_bundle_manifests(spec)` renders what a tenant's namespace must contain (DOMAIN.md, "The
tenant bundle"); `manifest_differences` says which fields of a live object differ from what
was rendered, ignoring what the API server adds (defaults, status, metadata it owns).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import yaml

from portal.accounts.groups import tenant_group
from portal.catalog.validators import quantity_parse
from portal.cluster.models import MANAGED_BY

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_TENANT = "gpu-portal.io/tenant"
LABEL_COMPONENT = "gpu-portal.io/component"
COMPONENT_BUNDLE = "tenant-bundle"
BUNDLE_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_COMPONENT}={COMPONENT_BUNDLE}"

WORKLOAD_SERVICE_ACCOUNT = "workload"
QUOTA_NAME = "tenant-quota"
LIMITS_NAME = "tenant-limits"

# Kinds the bundle holds inside the namespace, in the order they are applied.
NAMESPACED_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ServiceAccount"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
)

# Containers that say nothing get these (capped at the tenant's quota); the quota's limits.*
# keys need every container to carry limits, and a LimitRange default provides them.
DEFAULT_CPU_LIMIT_CORES = 2
DEFAULT_MEMORY_LIMIT_GIB = 8
DEFAULT_REQUESTS = {"cpu": "500m", "memory": "1Gi"}

# Leads get this ClusterRole (deploy/kubernetes/rbac.yaml): `edit` without NetworkPolicies,
# so the namespace's isolation stays the portal's. Developers get the built-in `view`.
LEAD_CLUSTER_ROLE = "gpu-portal-tenant-lead"


@dataclass(frozen=True)
class BundleSpec:
    """Everything the bundle depends on, read from the database by the selector."""

    tenant_slug: str
    namespace: str
    suspended: bool
    cpu_cores: int
    memory_gib: int
    storage_gib: int
    pods: int
    volumes: int
    # extended resource name -> total units held by the tenant's allocations
    gpu_resources: Mapping[str, Decimal]
    # every extended resource the catalog knows: those not held are capped at zero
    known_gpu_resources: frozenset[str] = frozenset()
    leads: tuple[str, ...] = ()
    developers: tuple[str, ...] = ()
    identity_prefix: str = ""
    # the identity-provider group template (PORTAL_TENANT_GROUP) the RoleBindings bind
    group_template: str = "/gpu-portal/tenants/{tenant}/{role}"
    ingress_namespace_labels: Mapping[str, str] = field(default_factory=dict)
    monitoring_namespace_labels: Mapping[str, str] = field(default_factory=dict)


def gpu_resource_totals(holdings: Iterable[tuple[Mapping[str, Any], int]]) -> dict[str, Decimal]:
    """Sum `count` x each offering's resources, per extended resource name, exactly."""
    totals: dict[str, Decimal] = {}
    for resources, count in holdings:
        for name, quantity in resources.items():
            totals[name] = totals.get(name, Decimal(0)) + quantity_parse(str(quantity)) * count
    return totals


def _quantity(amount: Decimal) -> str:
    """A quantity the way the API server prints it back (so comparisons see no drift)."""
    if amount == amount.to_integral_value():
        return str(int(amount))
    return format(amount.normalize(), "f")


def _labels(spec: BundleSpec) -> dict[str, str]:
    return {
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_TENANT: spec.tenant_slug,
        LABEL_COMPONENT: COMPONENT_BUNDLE,
    }


def _metadata(spec: BundleSpec, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": _labels(spec)}


def _namespace(spec: BundleSpec) -> dict[str, Any]:
    labels = _labels(spec) | {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "baseline",
    }
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": spec.namespace, "labels": labels},
    }


def _resource_quota(spec: BundleSpec) -> dict[str, Any]:
    hard: dict[str, str] = {
        "requests.cpu": str(spec.cpu_cores),
        "limits.cpu": str(spec.cpu_cores),
        "requests.memory": f"{spec.memory_gib}Gi",
        "limits.memory": f"{spec.memory_gib}Gi",
        "requests.storage": f"{spec.storage_gib}Gi",
        "persistentvolumeclaims": str(spec.volumes),
        "pods": "0" if spec.suspended else str(spec.pods),
    }
    # Extended resources are only quota'd on requests (Kubernetes refuses limits.<name>).
    for name in sorted(spec.known_gpu_resources | set(spec.gpu_resources)):
        held = Decimal(0) if spec.suspended else spec.gpu_resources.get(name, Decimal(0))
        hard[f"requests.{name}"] = _quantity(held)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": _metadata(spec, QUOTA_NAME),
        "spec": {"hard": hard},
    }


def _limit_range(spec: BundleSpec) -> dict[str, Any]:
    limits = {
        "cpu": str(min(DEFAULT_CPU_LIMIT_CORES, spec.cpu_cores)),
        "memory": f"{min(DEFAULT_MEMORY_LIMIT_GIB, spec.memory_gib)}Gi",
    }
    if spec.memory_gib == 0:
        limits["memory"] = "0"
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _metadata(spec, LIMITS_NAME),
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "default": {key: value for key, value in limits.items() if value != "0"},
                    "defaultRequest": {
                        key: value for key, value in DEFAULT_REQUESTS.items() if limits[key] != "0"
                    },
                }
            ]
        },
    }


def _subjects(spec: BundleSpec, group: str, users: Iterable[str]) -> list[dict[str, str]]:
    prefix = spec.identity_prefix
    subjects = [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": f"{prefix}{group}"}
    ]
    subjects += [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": f"{prefix}{user}"}
        for user in sorted(users)
    ]
    return subjects


def _role_binding(spec: BundleSpec, *, role: str, cluster_role: str) -> dict[str, Any]:
    users = spec.leads if role == "lead" else spec.developers
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(spec, f"gpu-portal-{role}s"),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_role,
        },
        "subjects": _subjects(
            spec, tenant_group(spec.group_template, spec.tenant_slug, role), users
        ),
    }


def _network_policy(spec: BundleSpec, name: str, policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(spec, name),
        "spec": {"podSelector": {}, **policy},
    }


def _network_policies(spec: BundleSpec) -> list[dict[str, Any]]:
    same_namespace: list[dict[str, Any]] = [{"podSelector": {}}]
    dns_peer = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    dns_ports = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    policies = [
        _network_policy(spec, "default-deny", {"policyTypes": ["Ingress", "Egress"]}),
        _network_policy(
            spec,
            "allow-same-namespace",
            {
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": same_namespace}],
                "egress": [{"to": same_namespace}],
            },
        ),
        _network_policy(
            spec,
            "allow-dns",
            {"policyTypes": ["Egress"], "egress": [{"to": [dns_peer], "ports": dns_ports}]},
        ),
    ]
    # An empty selector would admit every namespace, so an unset one renders no policy.
    for name, labels in (
        ("allow-ingress-controller", spec.ingress_namespace_labels),
        ("allow-monitoring", spec.monitoring_namespace_labels),
    ):
        if labels:
            peer = {"namespaceSelector": {"matchLabels": dict(labels)}}
            policies.append(
                _network_policy(
                    spec, name, {"policyTypes": ["Ingress"], "ingress": [{"from": [peer]}]}
                )
            )
    return policies


def _service_account(spec: BundleSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(spec, WORKLOAD_SERVICE_ACCOUNT),
        "automountServiceAccountToken": False,
    }


def tenant_bundle_manifests(spec: BundleSpec) -> list[dict[str, Any]]:
    """The objects a tenant's namespace must hold, Namespace first, in apply order."""
    return [
        _namespace(spec),
        _service_account(spec),
        _resource_quota(spec),
        _limit_range(spec),
        _role_binding(spec, role="lead", cluster_role=LEAD_CLUSTER_ROLE),
        _role_binding(spec, role="developer", cluster_role="view"),
        *_network_policies(spec),
    ]


def manifests_yaml(manifests: Iterable[Mapping[str, Any]]) -> str:
    """The manifests as one multi-document YAML text, as `kubectl apply -f` reads it."""
    return yaml.safe_dump_all(list(manifests), sort_keys=False, default_flow_style=False)


def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name): what identifies an object within one cluster."""
    metadata = obj.get("metadata") or {}
    return (str(obj.get("kind", "")), metadata.get("namespace") or "", metadata.get("name", ""))


def _same_scalar(desired: Any, live: Any) -> bool:
    if desired == live:
        return True
    if isinstance(desired, str | int) and isinstance(live, str | int):
        # The API server may print a quantity differently (1024Mi as 1Gi, 1000m as 1).
        try:
            return quantity_parse(str(desired)) == quantity_parse(str(live))
        except ValueError:
            return False
    return False


def manifest_differences(desired: Any, live: Any, path: str = "") -> list[str]:
    """The paths of the fields in `desired` that `live` lacks or holds differently.

    Only what the portal renders counts: fields the server or others add are not drift.
    Lists are compared item by item and must have the same length.
    """
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return [path or "."]
        differences: list[str] = []
        for key, value in desired.items():
            child = f"{path}.{key}" if path else str(key)
            if key not in live:
                differences.append(child)
            else:
                differences += manifest_differences(value, live[key], child)
        return differences
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return [path]
        differences = []
        for index, (item, live_item) in enumerate(zip(desired, live, strict=True)):
            differences += manifest_differences(item, live_item, f"{path}[{index}]")
        return differences
    return [] if _same_scalar(desired, live) else [path]
