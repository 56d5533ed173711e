"""Writes for clusters and provisioning, one module per concern:

- `clusters`: registering and changing clusters; asking for a reconcile or capacity read now.
- `runs`: provisioning runs, queued with the change that needs them, executed once.
- `bundle`: making one namespace match its rendered bundle through the gateway (no database).
- `reconcile`: finding drift in a whole cluster and queueing repairs.
- `capacity`: reading nodes and pods into capacity rows.
"""

from portal.cluster.services.capacity import capacity_collect, capacity_record
from portal.cluster.services.clusters import (
    cluster_create,
    cluster_refresh_request,
    cluster_update,
)
from portal.cluster.services.reconcile import cluster_reconcile
from portal.cluster.services.runs import (
    provisioning_request,
    provisioning_run_execute,
    provisioning_run_retry,
    provisioning_runs_resume,
)

__all__ = [
    "capacity_collect",
    "capacity_record",
    "cluster_create",
    "cluster_reconcile",
    "cluster_refresh_request",
    "cluster_update",
    "provisioning_request",
    "provisioning_run_execute",
    "provisioning_run_retry",
    "provisioning_runs_resume",
]
