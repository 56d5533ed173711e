"""Every write to notebooks, one module per concern:

- `launch`: launching a notebook, on an allocation or on a request made in the same call.
- `lifecycle`: stop, start, delete, snooze; notebooks following their allocation, their tenant
  and the end of their provisioning runs (`notebook_run_finished`).
- `observe`: reading pods and events back into the notebook's state (`notebooks_observe`).
- `cull`: stopping idle notebooks, with a notice first.
- `transitions`: what the actions share (locking, auditing, queueing a notebook run).

Each action is one transaction with one audit event. The cluster is changed by a provisioning
run of kind `notebook`, queued in that transaction and executed once it commits; the run's end
moves the notebook on, and reading the pods settles it.
"""

from portal.workloads.services.cull import cull_notice_send, notebook_cull, notebook_cull_notice
from portal.workloads.services.launch import notebook_launch
from portal.workloads.services.lifecycle import (
    notebook_delete,
    notebook_run_finished,
    notebook_snooze,
    notebook_start,
    notebook_stop,
    notebooks_follow_allocation,
    notebooks_follow_tenant,
)
from portal.workloads.services.observe import (
    notebook_observe,
    notebook_observe_request,
    notebooks_observe,
    notebooks_observe_all,
)

__all__ = [
    "cull_notice_send",
    "notebook_cull",
    "notebook_cull_notice",
    "notebook_delete",
    "notebook_launch",
    "notebook_observe",
    "notebook_observe_request",
    "notebook_run_finished",
    "notebook_snooze",
    "notebook_start",
    "notebook_stop",
    "notebooks_follow_allocation",
    "notebooks_follow_tenant",
    "notebooks_observe",
    "notebooks_observe_all",
]
