"""The emulator's storage: objects as plain dicts, keyed by (resource, namespace, name).

The key ignores the group and version (each resource name is served by one group here).
`resourceVersion` is one counter for the whole store, bumped by every change, as etcd's
revision is. Everything server-maintained that depends on other objects, the
ResourceQuotas' status, is refreshed here whenever a namespace's contents change.

Callers hold `lock` around a read-modify-write; the methods do not take it themselves.
"""

import copy
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

from tests.kubeapi import quota
from tests.kubeapi.resources import (
    BY_PLURAL,
    NAMESPACES,
    PODS,
    RESOURCE_QUOTAS,
    ResourceType,
)

Key = tuple[str, str, str]  # (plural, namespace or "", name)

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def key(rt: ResourceType, namespace: str | None, name: str) -> Key:
    return (rt.plural, (namespace or "") if rt.namespaced else "", name)


class Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._objects: dict[Key, dict[str, Any]] = {}
        self._revision = 0
        # Log text per (namespace, pod, container); pods without one get a generated line.
        self.pod_logs: dict[tuple[str, str, str], str] = {}

    @property
    def revision(self) -> str:
        return str(self._revision)

    def _next_revision(self) -> str:
        self._revision += 1
        return str(self._revision)

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any] | None:
        """The stored object itself: copy it before changing it."""
        return self._objects.get(key(rt, namespace, name))

    def find(
        self, rt: ResourceType | None = None, namespace: str | None = None
    ) -> list[tuple[ResourceType, dict[str, Any]]]:
        # Filtered first, then sorted: sorting every stored object to find one namespace's
        # made a store of thousands of namespaces quadratic (make bench's reconcile).
        found = sorted(
            (key, obj)
            for key, obj in self._objects.items()
            if (rt is None or key[0] == rt.plural) and (namespace is None or key[1] == namespace)
        )
        return [(BY_PLURAL[plural], obj) for (plural, _ns, _name), obj in found]

    def namespace_exists(self, name: str) -> bool:
        return self.get(NAMESPACES, None, name) is not None

    # Server-side fields.

    @staticmethod
    def fill_system_metadata(rt: ResourceType, obj: dict[str, Any], namespace: str | None) -> None:
        """What the API server sets on a new object: uid, creationTimestamp, namespace."""
        metadata = obj.setdefault("metadata", {})
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = now()
        for field in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            metadata.pop(field, None)
        if rt.namespaced:
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)

    @staticmethod
    def apply_create_defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
        """The defaults a real server gives new objects, as far as the emulator models them."""
        if rt is PODS:
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif rt is NAMESPACES:
            spec = obj.get("spec")
            if not isinstance(spec, dict):
                spec = obj["spec"] = {}
            spec.setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {}).setdefault("phase", "Active")

    def normalize(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as stored: type first, and the fields the server maintains."""
        ordered: dict[str, Any] = {"apiVersion": rt.api_version, "kind": rt.kind}
        ordered.update((k, v) for k, v in obj.items() if k not in ("apiVersion", "kind"))
        metadata = ordered.setdefault("metadata", {})
        if rt is NAMESPACES:
            labels = metadata.get("labels")
            if not isinstance(labels, dict):
                labels = metadata["labels"] = {}
            labels[NAMESPACE_NAME_LABEL] = metadata.get("name")
        if rt is RESOURCE_QUOTAS:
            ordered["status"] = quota.quota_status(ordered, self.usage(metadata.get("namespace")))
        return ordered

    def usage(self, namespace: str | None) -> dict[str, Any]:
        return quota.namespace_usage(self.find(namespace=namespace or ""))

    def quotas(self, namespace: str) -> list[dict[str, Any]]:
        return [obj for _, obj in self.find(RESOURCE_QUOTAS, namespace)]

    # Changes.

    def save(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` under a new resourceVersion; answer a copy of what was stored."""
        obj = self.normalize(rt, obj)
        metadata = obj["metadata"]
        metadata["resourceVersion"] = self._next_revision()
        self._objects[key(rt, metadata.get("namespace"), metadata["name"])] = obj
        if rt.namespaced:
            self._refresh_quotas(metadata["namespace"])
        return copy.deepcopy(self._objects[key(rt, metadata.get("namespace"), metadata["name"])])

    def remove(self, rt: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        """Delete one object (a namespace with everything in it); answer it as deleted."""
        obj = self._objects.pop(key(rt, namespace, name))
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = self._next_revision()
        if rt is NAMESPACES:
            for stored in [k for k in self._objects if k[1] == name and BY_PLURAL[k[0]].namespaced]:
                del self._objects[stored]
            self.pod_logs = {k: v for k, v in self.pod_logs.items() if k[0] != name}
        elif rt.namespaced:
            if rt is PODS:
                self.pod_logs = {
                    k: v for k, v in self.pod_logs.items() if k[:2] != (namespace, name)
                }
            self._refresh_quotas(namespace or "")
        return obj

    def _refresh_quotas(self, namespace: str) -> None:
        # The quota controller's job on a real server, done at once here.
        usage = self.usage(namespace)
        for stored in self.quotas(namespace):
            status = quota.quota_status(stored, usage)
            if stored.get("status") != status:
                updated = copy.deepcopy(stored)
                updated["status"] = status
                updated["metadata"]["resourceVersion"] = self._next_revision()
                self._objects[key(RESOURCE_QUOTAS, namespace, stored["metadata"]["name"])] = updated
