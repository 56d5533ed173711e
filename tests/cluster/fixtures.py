"""A cluster in kubernetes mode pointed at the API emulator, and running its queued runs."""

from pathlib import Path

import pytest

from portal.cluster.models import Cluster, ProvisioningRun, RunState
from portal.cluster.services import cluster_create, provisioning_run_execute
from tenants.models import Tenant


@pytest.fixture
def live_cluster(kube_api, settings, tmp_path: Path, db) -> Cluster:
    """Cluster `lab` in kubernetes mode, reached through a kubeconfig pointing at the emulator."""
    settings.PORTAL_CLUSTER_MODE = "kubernetes"
    settings.PORTAL_CLUSTER_RETRY_BACKOFF_SECONDS = 0.01
    settings.PORTAL_CLUSTER_TIMEOUT_SECONDS = 2
    path = tmp_path / "kubeconfig"
    kube_api.kubeconfig(path)
    return cluster_create(
        actor=None,
        name="lab",
        mode="kubernetes",
        connection="kubeconfig",
        kubeconfig_path=str(path),
    )


def run_queued(tenant: Tenant | None = None) -> list[ProvisioningRun]:
    """Execute every queued run as the task would, attempts included; the finished runs."""
    finished = []
    queued = ProvisioningRun.objects.filter(state=RunState.QUEUED)
    if tenant is not None:
        queued = queued.filter(tenant=tenant)
    for run_id in list(queued.order_by("pk").values_list("pk", flat=True)):
        while True:
            run = provisioning_run_execute(run_id=run_id)
            if run is None or run.state != RunState.QUEUED:
                break
        if run is not None:
            finished.append(run)
    return finished
