"""The resource types the emulator serves, and the discovery documents that describe them.

Discovery is served in the legacy (unaggregated) shapes: `/api`, `/api/v1`, `/apis`,
`/apis/{group}` and `/apis/{group}/{version}`. The v37 client's `LazyDiscoverer` asks for them
with `Accept: application/json` and never for the aggregated `apidiscovery.k8s.io/v2`
documents, so those are not served.
"""

from dataclasses import dataclass
from typing import Any, Literal

# The Kubernetes version the emulator claims to be: `/version` reports it and objects are
# validated against its schema. kubernetes-validate 1.37.0 carries schemas for 1.25 to 1.37.
KUBERNETES_VERSION = "1.33.0"

# How metadata.name is validated: namespaces are DNS-1123 labels, services DNS-1035 labels,
# RBAC objects only need to be valid path segments, everything else is a DNS-1123 subdomain.
NameRule = Literal["label", "dns1035", "subdomain", "path"]

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

SUBRESOURCE_VERBS = {
    "status": ("get", "patch", "update"),
    "log": ("get",),
}


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    name_rule: NameRule = "subdomain"
    # The generated client expects the deleted object back (not a Status) for these kinds,
    # matching the API server's ReturnDeletedObject registries.
    returns_deleted_object: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How the API server names the resource in messages: `deployments.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


def _core(plural: str, singular: str, kind: str, **kwargs: Any) -> ResourceType:
    kwargs.setdefault("namespaced", True)
    return ResourceType("", "v1", plural, singular, kind, **kwargs)


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    _core(
        "namespaces",
        "namespace",
        "Namespace",
        namespaced=False,
        short_names=("ns",),
        subresources=("status",),
        name_rule="label",
    ),
    _core(
        "pods",
        "pod",
        "Pod",
        short_names=("po",),
        subresources=("status", "log"),
        returns_deleted_object=True,
    ),
    _core(
        "services",
        "service",
        "Service",
        short_names=("svc",),
        subresources=("status",),
        name_rule="dns1035",
        returns_deleted_object=True,
    ),
    _core("configmaps", "configmap", "ConfigMap", short_names=("cm",)),
    _core("secrets", "secret", "Secret"),
    _core(
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        short_names=("sa",),
        returns_deleted_object=True,
    ),
    _core(
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        short_names=("quota",),
        subresources=("status",),
        returns_deleted_object=True,
    ),
    _core("limitranges", "limitrange", "LimitRange", short_names=("limits",)),
    _core(
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        short_names=("pvc",),
        subresources=("status",),
        returns_deleted_object=True,
    ),
    _core("nodes", "node", "Node", namespaced=False, short_names=("no",), subresources=("status",)),
    _core("events", "event", "Event", short_names=("ev",)),
    ResourceType(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        namespaced=True,
        short_names=("deploy",),
        subresources=("status",),
    ),
    ResourceType(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        namespaced=True,
        short_names=("sts",),
        subresources=("status",),
    ),
    *(
        ResourceType(
            "rbac.authorization.k8s.io",
            "v1",
            plural,
            plural[:-1],
            kind,
            namespaced=namespaced,
            name_rule="path",
        )
        for plural, kind, namespaced in (
            ("roles", "Role", True),
            ("rolebindings", "RoleBinding", True),
            ("clusterroles", "ClusterRole", False),
            ("clusterrolebindings", "ClusterRoleBinding", False),
        )
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        namespaced=True,
        short_names=("netpol",),
    ),
    ResourceType(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        namespaced=True,
        short_names=("ing",),
        subresources=("status",),
    ),
)

BY_PATH: dict[tuple[str, str, str], ResourceType] = {
    (rt.group, rt.version, rt.plural): rt for rt in RESOURCE_TYPES
}
BY_KIND: dict[tuple[str, str], ResourceType] = {
    (rt.api_version, rt.kind): rt for rt in RESOURCE_TYPES
}
BY_PLURAL: dict[str, ResourceType] = {rt.plural: rt for rt in RESOURCE_TYPES}
NAMESPACES = BY_PLURAL["namespaces"]
PODS = BY_PLURAL["pods"]
RESOURCE_QUOTAS = BY_PLURAL["resourcequotas"]
NODES = BY_PLURAL["nodes"]

GROUPS: tuple[str, ...] = tuple(sorted({rt.group for rt in RESOURCE_TYPES if rt.group}))


def resource_for_kind(api_version: str, kind: str) -> ResourceType:
    try:
        return BY_KIND[(api_version, kind)]
    except KeyError:
        raise KeyError(f"the emulator does not serve {kind} in {api_version}") from None


def resource_for_kind_name(kind: str) -> ResourceType:
    for rt in RESOURCE_TYPES:
        if rt.kind == kind:
            return rt
    raise KeyError(f"the emulator does not serve kind {kind}")


# Discovery documents.


def version_document() -> dict[str, Any]:
    major, minor, _ = KUBERNETES_VERSION.split(".")
    return {
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "minCompatibilityMajor": major,
        "minCompatibilityMinor": str(int(minor) - 1),
        "gitVersion": f"v{KUBERNETES_VERSION}",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions_document(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_versions(group: str) -> list[str]:
    return sorted({rt.version for rt in RESOURCE_TYPES if rt.group == group})


def _group_document(group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in _group_versions(group)]
    return {"name": group, "versions": versions, "preferredVersion": dict(versions[0])}


def api_group_list_document() -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_document(group) for group in GROUPS],
    }


def api_group_document(group: str) -> dict[str, Any] | None:
    if group not in GROUPS:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_document(group)}


def api_resource_list_document(group: str, version: str) -> dict[str, Any] | None:
    served = [rt for rt in RESOURCE_TYPES if rt.group == group and rt.version == version]
    if not served:
        return None
    resources: list[dict[str, Any]] = []
    for rt in sorted(served, key=lambda rt: rt.plural):
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(VERBS),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        resources.append(entry)
        resources.extend(
            {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": list(SUBRESOURCE_VERBS[sub]),
            }
            for sub in rt.subresources
        )
    document: dict[str, Any] = {"kind": "APIResourceList"}
    # The core group's list carries no apiVersion on a real server; the named groups' do.
    if group:
        document["apiVersion"] = "v1"
    document["groupVersion"] = f"{group}/{version}" if group else version
    document["resources"] = resources
    return document
