"""Reading the cluster back: notebook state from pods and events, settled in the database."""

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.cluster.errors import ClusterError
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.models import (
    Cluster,
)
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.services.transitions import PROVISIONING_FAILED, _audit
from portal.workloads.status import Observed, notebook_observed
from portal.workloads.sync import notebook_pods, notebook_warnings, warnings_about

logger = logging.getLogger(__name__)


def notebook_observe_request(*, notebook: Notebook, force: bool = False) -> bool:
    """Ask for the notebook's pod to be read soon (a page polling it does), at most once per
    few seconds whoever asks. Returns whether a read was queued."""
    from portal.workloads.tasks import observe_notebook  # noqa: PLC0415  (cycle)

    if not notebook.cluster.applies or notebook.state not in OBSERVED_STATES:
        return False
    now = timezone.now()
    recent = now - timedelta(seconds=3)
    claimed = Notebook.objects.filter(pk=notebook.pk)
    if not force:
        claimed = claimed.filter(
            Q(observe_requested_at__isnull=True) | Q(observe_requested_at__lt=recent)
        )
    if not claimed.update(observe_requested_at=now):
        return False
    observe_notebook.delay(notebook.pk)
    return True


OBSERVED_STATES = (
    NotebookState.PENDING,
    NotebookState.RUNNING,
    NotebookState.STOPPING,
    NotebookState.FAILED,  # a crashing pod may recover; a failed run is left for a retry
)


def _observable(notebook: Notebook) -> bool:
    if notebook.state != NotebookState.FAILED:
        return notebook.state in OBSERVED_STATES
    return notebook.desired == Desired.RUNNING and not notebook.reason.startswith(
        PROVISIONING_FAILED
    )


def notebooks_observe(*, cluster: Cluster, notebook_ids: list[int] | None = None) -> int:
    """Read the cluster's notebook pods (one list) and the warnings of namespaces where a
    notebook waits (one list each), and record each notebook's state. Returns how many
    changed. Raises ClusterError when the cluster cannot be read."""
    if not cluster.applies:
        return 0
    watched = Notebook.objects.filter(cluster=cluster, state__in=OBSERVED_STATES).select_related(
        "tenant"
    )
    if notebook_ids is not None:
        watched = watched.filter(pk__in=notebook_ids)
    notebooks = [notebook for notebook in watched if _observable(notebook)]
    if not notebooks:
        return 0
    gateway = KubernetesGateway(cluster)
    try:
        if len(notebooks) == 1:  # a page watching one notebook: read only its pod
            only = notebooks[0]
            pods = notebook_pods(
                gateway,
                namespace=cluster.namespace_for(only.tenant.slug),
                name=only.kubernetes_name,
            )
        else:
            pods = notebook_pods(gateway)
        namespaces = {
            cluster.namespace_for(notebook.tenant.slug)
            for notebook in notebooks
            if notebook.state != NotebookState.RUNNING
        }
        warnings = {namespace: notebook_warnings(gateway, namespace) for namespace in namespaces}
    finally:
        gateway.close()
    changed = 0
    now = timezone.now()
    for notebook in notebooks:
        namespace = cluster.namespace_for(notebook.tenant.slug)
        observed = notebook_observed(
            desired=notebook.desired,
            pod=pods.get((namespace, notebook.kubernetes_name)),
            events=warnings_about(warnings.get(namespace, []), notebook.kubernetes_name),
        )
        changed += _record_observation(
            notebook.pk, observed=observed, now=now, desired_seen=notebook.desired
        )
    return changed


@transaction.atomic
def _record_observation(
    notebook_id: int, *, observed: Observed, now: datetime, desired_seen: str
) -> int:
    notebook = (
        Notebook.objects.select_for_update(of=("self",))
        .select_related("tenant")
        .get(pk=notebook_id)
    )
    if notebook.desired != desired_seen or not _observable(notebook):
        return 0  # acted on since the read: the action's run will settle it
    if notebook.desired == Desired.RUNNING and observed.state == NotebookState.STOPPED:
        return 0
    if notebook.desired == Desired.STOPPED:
        # Stopping: the reason says why it was stopped (by whom, idle, allocation ended).
        observed = Observed(observed.state, notebook.reason, observed.events)
    before = notebook.state
    notebook.observed_at = now
    if notebook.state == observed.state and notebook.reason == observed.reason:
        notebook.events = observed.events
        notebook.save(update_fields=["observed_at", "events"])
        return 0
    notebook.state, notebook.reason, notebook.events = (
        observed.state,
        observed.reason,
        observed.events,
    )
    if observed.state == NotebookState.RUNNING and notebook.running_since is None:
        notebook.running_since = now
    if observed.state == NotebookState.STOPPED:
        notebook.stopped_at = now
    notebook.save()
    if notebook.state != before:
        _audit(notebook, actor=None, action="observe", before=before, comment=notebook.reason)
    return 1


def notebook_observe(*, notebook_id: int) -> int:
    """Read one notebook's pod now (a page is watching it); 0 when it is gone."""
    notebook = Notebook.objects.select_related("cluster").filter(pk=notebook_id).first()
    if notebook is None:
        return 0
    return notebooks_observe(cluster=notebook.cluster, notebook_ids=[notebook_id])


def notebooks_observe_all() -> dict[str, int | str]:
    """Observe every cluster that applies; a cluster that cannot be read is reported, not
    raised, so the others are still read."""
    outcome: dict[str, int | str] = {}
    for cluster in Cluster.objects.filter(enabled=True):
        if not cluster.applies:
            continue
        try:
            outcome[cluster.name] = notebooks_observe(cluster=cluster)
        except ClusterError as error:
            logger.warning("notebooks in %s not observed: %s", cluster.name, error)
            outcome[cluster.name] = error.message
    return outcome
