"""ResourceQuota: the usage of a namespace, and the admission of pods against its quotas.

Usage follows the API server's pod evaluator: a pod that has not finished (phase neither
Succeeded nor Failed) uses `pods`, `count/pods` and, per resource, its effective requests (the
sum over its containers, or the largest init container when that is larger; a container's
missing request defaults to its limit) under `requests.<name>` and `<name>`, and its limits
under `limits.<name>`. Object counts (`count/<resource>`, `configmaps`, `secrets`, ...) and
`requests.storage` of PersistentVolumeClaims are counted for the quota's status only.

Admission, like the API server's ResourceQuota plugin, only checks the resources the pod adds
(on an update, what it adds beyond its previous version) and answers 403 with the API
server's message. Not emulated: quota scopes and scope selectors, the "must specify" rule for
quotas on cpu and memory (that needs LimitRange defaulting, which the emulator does not do),
and admission of kinds other than pods.
"""

from collections import defaultdict
from collections.abc import Iterable
from decimal import ROUND_CEILING, Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from tests.kubeapi.resources import ResourceType
from tests.kubeapi.validation import is_extended_resource, quantity_errors

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
COMPUTE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
# The object counts a quota may name without the count/ prefix.
LEGACY_COUNTS = frozenset(
    {
        "configmaps",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "services",
    }
)

_BINARY = (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1))
_DECIMAL = (
    ("E", 18),
    ("P", 15),
    ("T", 12),
    ("G", 9),
    ("M", 6),
    ("k", 3),
    ("", 0),
    ("m", -3),
    ("u", -6),
    ("n", -9),
)


def format_quantity(value: Decimal, *, binary: bool = False) -> str:
    """The canonical form the API server prints (`2`, `500m`, `3Gi`)."""
    if value == 0:
        return "0"
    if binary and value == value.to_integral_value():
        for suffix, exponent in _BINARY:
            unit = Decimal(1024) ** exponent
            if abs(value) >= unit and value % unit == 0:
                return f"{int(value / unit)}{suffix}"
    for suffix, exponent in _DECIMAL:
        scaled = value / Decimal(10) ** exponent
        if scaled == scaled.to_integral_value():
            return f"{int(scaled)}{suffix}"
    return f"{int((value * 10**9).to_integral_value(rounding=ROUND_CEILING))}n"


def _quantity(value: Any) -> Decimal:
    return Decimal(0) if quantity_errors(value) else parse_quantity(value)


def _container_resources(container: dict[str, Any], section: str) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    values = {name: _quantity(value) for name, value in (resources.get("limits") or {}).items()}
    if section == "requests":
        # A request left out defaults to the limit, as the API server's defaulting does.
        requested = (resources.get("requests") or {}).items()
        values.update((name, _quantity(value)) for name, value in requested)
    return values


def _effective(pod: dict[str, Any], section: str) -> dict[str, Decimal]:
    """The pod's `requests` or `limits`: its containers' sum, or its largest init container."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = defaultdict(Decimal)
    for container in spec.get("containers") or []:
        for name, value in _container_resources(container, section).items():
            total[name] += value
    for container in spec.get("initContainers") or []:
        for name, value in _container_resources(container, section).items():
            total[name] = max(total[name], value)
    return dict(total)


def is_terminal(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def pod_usage(pod: dict[str, Any] | None) -> dict[str, Decimal]:
    if pod is None or is_terminal(pod):
        return {}
    usage = {"pods": Decimal(1), "count/pods": Decimal(1)}
    for name, value in _effective(pod, "requests").items():
        if name in COMPUTE_RESOURCES or is_extended_resource(name) or name.startswith("hugepages-"):
            usage[f"requests.{name}"] = value
            usage[name] = value
    for name, value in _effective(pod, "limits").items():
        if name in COMPUTE_RESOURCES:
            usage[f"limits.{name}"] = value
    return usage


def namespace_usage(objects: Iterable[tuple[ResourceType, dict[str, Any]]]) -> dict[str, Decimal]:
    usage: dict[str, Decimal] = defaultdict(Decimal)
    for rt, obj in objects:
        if rt.plural == "pods":
            for name, value in pod_usage(obj).items():
                usage[name] += value
            continue
        usage[f"count/{rt.qualified}"] += 1
        if rt.plural in LEGACY_COUNTS:
            usage[rt.plural] += 1
        if rt.plural == "persistentvolumeclaims":
            requests = ((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}
            usage["requests.storage"] += _quantity(requests.get("storage", 0))
    return dict(usage)


def _binary(hard: dict[str, Any], key: str) -> bool:
    return str(hard.get(key, "")).endswith("i")


def quota_status(quota: dict[str, Any], usage: dict[str, Decimal]) -> dict[str, Any]:
    hard = (quota.get("spec") or {}).get("hard") or {}
    return {
        "hard": {
            key: format_quantity(_quantity(value), binary=_binary(hard, key))
            for key, value in hard.items()
        },
        "used": {
            key: format_quantity(usage.get(key, Decimal(0)), binary=_binary(hard, key))
            for key in hard
        },
    }


def _pretty(values: dict[str, Decimal], keys: list[str], hard: dict[str, Any]) -> str:
    return ",".join(
        f"{key}={format_quantity(values.get(key, Decimal(0)), binary=_binary(hard, key))}"
        for key in keys
    )


def exceeded_quota(
    quotas: Iterable[dict[str, Any]],
    usage: dict[str, Decimal],
    old_pod: dict[str, Any] | None,
    new_pod: dict[str, Any],
) -> str | None:
    """Why the pod may not be stored (the API server's words), or None when it fits.

    `usage` is the namespace's usage before the write, which includes `old_pod`.
    """
    before, after = pod_usage(old_pod), pod_usage(new_pod)
    requested = {
        name: after[name] - before.get(name, Decimal(0))
        for name in after
        if after[name] > before.get(name, Decimal(0))
    }
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        hard = (quota.get("spec") or {}).get("hard") or {}
        exceeded = sorted(
            key
            for key in hard
            if key in requested
            and usage.get(key, Decimal(0)) + requested[key] > _quantity(hard[key])
        )
        if exceeded:
            limited = {key: _quantity(hard[key]) for key in exceeded}
            return (
                f"exceeded quota: {quota['metadata']['name']}, "
                f"requested: {_pretty(requested, exceeded, hard)}, "
                f"used: {_pretty(usage, exceeded, hard)}, "
                f"limited: {_pretty(limited, exceeded, hard)}"
            )
    return None
