"""Making the cluster hold one notebook's objects, and reading them back, through the gateway.

No database here. Applying reads the objects first and sends server-side apply under the
portal's field manager only for those missing or drifted, so a re-run of an unchanged notebook
writes nothing; deleting removes the objects by name, and the workspace only when asked.
"""

from typing import Any

from portal.cluster.errors import ClusterError
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.manifests import (
    LABEL_COMPONENT,
    LABEL_MANAGED_BY,
    object_key,
)
from portal.cluster.models import MANAGED_BY, Outcome
from portal.cluster.services.bundle import ObjectResult, SyncReport, object_plan, object_result
from portal.workloads.manifests import (
    ANNOTATION_TOKEN_CHECKSUM,
    COMPONENT_NOTEBOOK,
    LABEL_NOTEBOOK,
    NotebookSpec,
    notebook_manifests,
    token_secret_name,
    workspace_claim_name,
)

NOTEBOOK_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_COMPONENT}={COMPONENT_NOTEBOOK}"


def _secret_planned(
    stateful_set: dict[str, Any], live_set: dict[str, Any] | None
) -> tuple[Outcome, list[str]]:
    """The token Secret, judged by the checksum on its StatefulSet (Secrets are never read):
    written with a new StatefulSet or a changed token, else unchanged."""
    if live_set is None:
        return Outcome.CREATED, ["(missing)"]
    wanted = stateful_set["metadata"]["annotations"][ANNOTATION_TOKEN_CHECKSUM]
    annotations = (live_set.get("metadata") or {}).get("annotations") or {}
    if annotations.get(ANNOTATION_TOKEN_CHECKSUM) != wanted:
        return Outcome.CONFIGURED, ["stringData.token"]
    return Outcome.UNCHANGED, []


def notebook_apply(gateway: KubernetesGateway, spec: NotebookSpec) -> SyncReport:
    """Make the cluster hold the notebook's objects as a bundle run does: read them, apply
    only those missing or drifted, report the rest unchanged. An Ingress of a notebook no
    longer published on a host is deleted if there is one. Stops at the first failure (the
    rest skipped); an unchanged notebook is only read."""
    report = SyncReport()
    manifests = notebook_manifests(spec)
    pending = list(manifests)
    try:
        live = {
            object_key(manifest): gateway.get(
                manifest["apiVersion"],
                manifest["kind"],
                manifest["metadata"]["name"],
                spec.namespace,
            )
            for manifest in manifests
            if manifest["kind"] != "Secret"
        }
        [stateful_set] = [manifest for manifest in manifests if manifest["kind"] == "StatefulSet"]
        live_set = live[object_key(stateful_set)]
        for manifest in manifests:
            if manifest["kind"] == "Secret":
                outcome, drift = _secret_planned(stateful_set, live_set)
            else:
                outcome, drift = object_plan(manifest, live[object_key(manifest)])
            if outcome != Outcome.UNCHANGED:
                created = gateway.apply(manifest)
                # Not found but there (a Secret, which is never read): it was configured.
                if outcome == Outcome.CREATED and not created:
                    outcome = Outcome.CONFIGURED
            report.results.append(
                object_result(
                    manifest, outcome, drift=drift if outcome == Outcome.CONFIGURED else []
                )
            )
            pending.remove(manifest)
        if not spec.host:
            _unpublish(gateway, spec, report)
    except ClusterError as error:
        report.stopped(error, pending)
    return report


def _unpublish(gateway: KubernetesGateway, spec: NotebookSpec, report: SyncReport) -> None:
    """Published on a host before, not any more: the portal's old Ingress goes, if any."""
    ingress = gateway.get("networking.k8s.io/v1", "Ingress", spec.name, spec.namespace)
    labels = ((ingress or {}).get("metadata") or {}).get("labels") or {}
    if ingress is None or labels.get(LABEL_MANAGED_BY) != MANAGED_BY:
        return
    gateway.delete("networking.k8s.io/v1", "Ingress", spec.name, spec.namespace, seen=ingress)
    report.results.append(
        ObjectResult(
            "networking.k8s.io/v1",
            "Ingress",
            spec.namespace,
            spec.name,
            Outcome.DELETED,
            "the cluster no longer publishes notebooks on a host",
        )
    )


def notebook_remove(
    gateway: KubernetesGateway, spec: NotebookSpec, *, keep_workspace: bool
) -> SyncReport:
    """Delete the notebook's objects (already absent ones are fine); the workspace volume
    only when `keep_workspace` is False."""
    targets = [
        ("apps/v1", "StatefulSet", spec.name),
        ("v1", "Service", spec.name),
        ("networking.k8s.io/v1", "Ingress", spec.name),
        ("v1", "Secret", token_secret_name(spec)),
    ]
    if not keep_workspace:
        targets.append(("v1", "PersistentVolumeClaim", workspace_claim_name(spec)))
    report = SyncReport()
    for position, (api_version, kind, name) in enumerate(targets):
        try:
            deleted = gateway.delete(api_version, kind, name, spec.namespace)
        except ClusterError as error:
            report.error = error
            report.results.append(
                ObjectResult(api_version, kind, spec.namespace, name, Outcome.FAILED, error.message)
            )
            report.results += [
                ObjectResult(later_version, later_kind, spec.namespace, later, Outcome.SKIPPED)
                for later_version, later_kind, later in targets[position + 1 :]
            ]
            return report
        report.results.append(
            ObjectResult(
                api_version,
                kind,
                spec.namespace,
                name,
                Outcome.DELETED if deleted else Outcome.UNCHANGED,
                "" if deleted else "already absent",
            )
        )
    if keep_workspace:
        report.results.append(
            ObjectResult(
                "v1",
                "PersistentVolumeClaim",
                spec.namespace,
                workspace_claim_name(spec),
                Outcome.UNCHANGED,
                "workspace kept, as asked",
            )
        )
    return report


def notebook_pods(
    gateway: KubernetesGateway, *, namespace: str | None = None, name: str = ""
) -> dict[tuple[str, str], dict[str, Any]]:
    """Notebook pods by (namespace, notebook name): every one in the cluster, or one
    notebook's in its namespace. One list request."""
    selector = f"{NOTEBOOK_SELECTOR},{LABEL_NOTEBOOK}={name}" if name else NOTEBOOK_SELECTOR
    pods = {}
    for pod in gateway.list("v1", "Pod", namespace=namespace, label_selector=selector):
        metadata = pod.get("metadata") or {}
        notebook = (metadata.get("labels") or {}).get(LABEL_NOTEBOOK)
        if notebook:
            pods[metadata.get("namespace", ""), notebook] = pod
    return pods


def notebook_warnings(gateway: KubernetesGateway, namespace: str) -> list[dict[str, Any]]:
    """The namespace's warning events, oldest first: one list request."""
    events = gateway.list("v1", "Event", namespace=namespace, field_selector="type=Warning")
    return sorted(
        events, key=lambda event: str(event.get("lastTimestamp") or event.get("eventTime") or "")
    )


def warnings_about(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The events of one notebook: its StatefulSet `name` and its pod `name-0`."""
    names = {name, f"{name}-0"}
    return [event for event in events if (event.get("involvedObject") or {}).get("name") in names]
