"""Celery tasks for provisioning: each a retry policy around one service call."""

from celery import Task, shared_task

from portal.cluster.errors import ClusterError
from portal.cluster.models import Cluster, RunState
from portal.cluster.services import (
    capacity_collect,
    cluster_reconcile,
    provisioning_run_execute,
    provisioning_runs_resume,
)

# Seconds before the next attempt of a run that failed transiently: 5, 10, 20, ...
RUN_RETRY_COUNTDOWN = 5


@shared_task(bind=True, max_retries=None)
def execute_provisioning_run(self: Task, run_id: int) -> str:  # type: ignore[type-arg]
    """Execute a queued run; a transient failure re-queues it and comes back later.

    The service bounds the attempts (the run ends failed after them), so this retries while
    the run says it is queued again. A run someone else claimed is left to them.
    """
    run = provisioning_run_execute(run_id=run_id, worker=self.request.hostname or "")
    if run is None:
        return "not queued"
    if run.state == RunState.QUEUED:
        countdown = RUN_RETRY_COUNTDOWN * 2 ** min(self.request.retries, 6)
        raise self.retry(countdown=countdown)
    return str(run.state)


@shared_task
def resume_provisioning_runs() -> int:
    """Periodic: enqueue runs whose task was lost and take back runs from vanished workers."""
    run_ids = provisioning_runs_resume()
    for run_id in run_ids:
        execute_provisioning_run.delay(run_id)
    return len(run_ids)


def _reconcile(cluster: Cluster) -> list[str]:
    try:
        return cluster_reconcile(cluster=cluster).drifted
    except ClusterError as error:
        # Unreachable now: the next period tries again; nothing is half-done.
        return [f"unreachable: {error.message}"]


def _collect(cluster: Cluster) -> int:
    try:
        return capacity_collect(cluster=cluster)
    except ClusterError:
        return -1


@shared_task
def reconcile_clusters() -> dict[str, list[str]]:
    """Periodic: find and repair drift in every enabled cluster, one cluster at a time."""
    return {cluster.name: _reconcile(cluster) for cluster in Cluster.objects.filter(enabled=True)}


@shared_task
def reconcile_cluster(cluster_id: int) -> list[str]:
    """Reconcile one cluster now (an admin asked)."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    return _reconcile(cluster) if cluster else []


@shared_task
def collect_capacity() -> dict[str, int]:
    """Periodic: read every enabled cluster's nodes and pods into capacity rows."""
    return {cluster.name: _collect(cluster) for cluster in Cluster.objects.filter(enabled=True)}


@shared_task
def collect_cluster_capacity(cluster_id: int) -> int:
    """Read one cluster's capacity now (an admin asked)."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    return _collect(cluster) if cluster else 0
