"""Making the cluster hold one notebook's objects, and reading them back, through the gateway.

No database here. Applying uses server-side apply under the portal's field manager, so a
re-run of an unchanged notebook changes nothing; deleting removes the objects by name, and the
workspace only when asked.
"""

from typing import Any

from portal.cluster.errors import ClusterError
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.manifests import LABEL_COMPONENT, LABEL_MANAGED_BY
from portal.cluster.models import MANAGED_BY, Outcome
from portal.cluster.services.bundle import ObjectResult, SyncReport, object_result
from portal.workloads.manifests import (
    COMPONENT_NOTEBOOK,
    LABEL_NOTEBOOK,
    NotebookSpec,
    notebook_manifests,
    token_secret_name,
    workspace_claim_name,
)

NOTEBOOK_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_COMPONENT}={COMPONENT_NOTEBOOK}"


def notebook_apply(gateway: KubernetesGateway, spec: NotebookSpec) -> SyncReport:
    """Apply every object of the notebook; stop at the first failure (the rest skipped)."""
    report = SyncReport()
    pending = notebook_manifests(spec)
    try:
        while pending:
            manifest = pending[0]
            created = gateway.apply(manifest)
            report.results.append(
                object_result(manifest, Outcome.CREATED if created else Outcome.CONFIGURED)
            )
            pending.pop(0)
        # Published on a host before, not any more: the old Ingress goes.
        if not spec.host and gateway.delete(
            "networking.k8s.io/v1", "Ingress", spec.name, spec.namespace
        ):
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
    except ClusterError as error:
        report.stopped(error, pending)
    return report


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
