"""Making one tenant's namespace match its rendered bundle, through the gateway.

No database here: these read the live objects, compare them with the manifests and write
only what differs, and report object by object what they did.
"""

import logging
from dataclasses import dataclass, field
from typing import Any

from portal.cluster.errors import ClusterError
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.manifests import (
    BUNDLE_SELECTOR,
    LABEL_MANAGED_BY,
    LABEL_TENANT,
    NAMESPACED_KINDS,
    manifest_differences,
    object_key,
)
from portal.cluster.models import MANAGED_BY, Outcome

logger = logging.getLogger(__name__)


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

    def stopped(self, error: ClusterError, pending: list[dict[str, Any]]) -> None:
        """Stop at `error`: the first pending object failed with it, the rest skipped."""
        self.error = error
        if pending:
            self.results.append(object_result(pending[0], Outcome.FAILED, message=error.message))
            self.results += [object_result(item, Outcome.SKIPPED) for item in pending[1:]]

    @property
    def drifted(self) -> list[ObjectResult]:
        return [result for result in self.results if result.outcome != Outcome.UNCHANGED]


def object_result(obj: dict[str, Any], outcome: Outcome, **extra: Any) -> ObjectResult:
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
    """A tenant's live bundle: its Namespace, and its objects by (kind, namespace, name) with
    their apiVersion (list items carry no kind or apiVersion)."""

    namespace: dict[str, Any] | None
    objects: dict[tuple[str, str, str], tuple[str, dict[str, Any]]]

    def live(self, manifest: dict[str, Any]) -> dict[str, Any] | None:
        """The live object `manifest` describes, or None."""
        if manifest["kind"] == "Namespace":
            return self.namespace
        found = self.objects.get(object_key(manifest))
        return found[1] if found else None


def live_bundle(gateway: KubernetesGateway, namespace: str, tenant_slug: str) -> LiveBundle:
    """Read a tenant's namespace and bundle objects; ClusterError if a namespace of that name
    exists but is not the portal's (it is never touched)."""
    live_namespace = gateway.get("v1", "Namespace", namespace)
    if live_namespace is None:
        return LiveBundle(namespace=None, objects={})
    if not _managed_by_portal(live_namespace, tenant_slug):
        raise ClusterError(
            f"Namespace {namespace} exists and is not managed by the portal for {tenant_slug}; "
            "it is left alone. Rename or remove it, then retry."
        )
    objects = bundle_objects(gateway, namespace=namespace).get(namespace, {})
    return LiveBundle(namespace=live_namespace, objects=objects)


def bundle_objects(
    gateway: KubernetesGateway, *, namespace: str | None = None
) -> dict[str, dict[tuple[str, str, str], tuple[str, dict[str, Any]]]]:
    """The live bundle objects of one namespace (or of all), by namespace, then by
    (kind, namespace, name), with their apiVersion: one list request per bundle kind."""
    objects: dict[str, dict[tuple[str, str, str], tuple[str, dict[str, Any]]]] = {}
    for api_version, kind in NAMESPACED_KINDS:
        for item in gateway.list(
            api_version, kind, namespace=namespace, label_selector=BUNDLE_SELECTOR
        ):
            metadata = item["metadata"]
            in_namespace = objects.setdefault(metadata["namespace"], {})
            in_namespace[kind, metadata["namespace"], metadata["name"]] = (api_version, item)
    return objects


def bundle_compare(
    desired: list[dict[str, Any]], live: LiveBundle
) -> list[tuple[dict[str, Any], Outcome, list[str]]]:
    """Each desired object with what applying it would do: create, configure (with the drifted
    fields) or nothing. Pure: `live` was read before."""
    return [(manifest, *object_plan(manifest, live.live(manifest))) for manifest in desired]


def object_plan(manifest: dict[str, Any], live: dict[str, Any] | None) -> tuple[Outcome, list[str]]:
    """What applying `manifest` over `live` (None: absent) would do: create, configure (with
    the drifted fields) or nothing. Pure."""
    if live is None:
        return Outcome.CREATED, ["(missing)"]
    drift = manifest_differences(_comparable(manifest), live)
    return (Outcome.CONFIGURED if drift else Outcome.UNCHANGED), drift


def bundle_unwanted(
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
        live = live_bundle(gateway, namespace, tenant_slug)
        for manifest, planned, drift in bundle_compare(desired, live):
            outcome = planned
            if planned != Outcome.UNCHANGED:
                created = gateway.apply(manifest)
                # Missing from the labelled listing but there: someone removed our labels.
                if planned == Outcome.CREATED and not created:
                    outcome = Outcome.CONFIGURED
            report.results.append(
                object_result(
                    manifest, outcome, drift=drift if outcome == Outcome.CONFIGURED else []
                )
            )
            pending.remove(manifest)
        for api_version, kind, obj in bundle_unwanted(desired, live):
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
        report.stopped(error, pending)
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
