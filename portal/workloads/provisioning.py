"""What a provisioning run of kind `notebook` does: render the notebook as it is now, then
apply its objects (or delete them) in the cluster, or only render them in a dry-run cluster.

Called by the cluster's run executor, outside any transaction; the run's end is recorded by
the executor, which then calls `notebook_run_finished`.
"""

from portal.cluster.errors import ClusterError
from portal.cluster.gateway import KubernetesGateway
from portal.cluster.manifests import manifests_yaml
from portal.cluster.models import Outcome, ProvisioningRun
from portal.cluster.services.bundle import SyncReport, object_result
from portal.workloads.manifests import notebook_manifests, redacted
from portal.workloads.models import Desired, Notebook
from portal.workloads.selectors import notebook_spec
from portal.workloads.sync import notebook_apply, notebook_remove


def notebook_run_sync(
    run: ProvisioningRun, gateway: KubernetesGateway | None
) -> tuple[str, SyncReport]:
    """The run's manifests as YAML (Secret values redacted) and what was done; with no
    gateway (a dry-run cluster) only rendered."""
    notebook = (
        Notebook.objects.select_related(
            "tenant", "owner", "cluster", "allocation__offering__gpu_model"
        )
        .filter(provisioning_runs=run)
        .first()
    )
    if notebook is None:
        raise ClusterError(f"Notebook {run.notebook_id} no longer exists.")
    spec = notebook_spec(notebook)
    deleting = notebook.desired == Desired.DELETED
    manifests = [] if deleting else notebook_manifests(spec)
    rendered = manifests_yaml([redacted(manifest) for manifest in manifests])
    if gateway is None:
        return rendered, SyncReport(
            results=[object_result(manifest, Outcome.RENDERED) for manifest in manifests]
        )
    if deleting:
        return rendered, notebook_remove(gateway, spec, keep_workspace=notebook.keep_workspace)
    return rendered, notebook_apply(gateway, spec)
