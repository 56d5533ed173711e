"""What happens to allocations, for the apps above that follow them.

`allocation_state_changed` (allocation, before, actor) is sent inside the transaction of the
change: before the quota goes when an allocation ends, after the tenant's bundle was asked to
follow when it starts. The workloads app connects it: notebooks start, fail or stop with their
allocation. The tenant's bundle follows through `tenants.signals.tenant_changed`, with the
allocation as `gpu_request`.
"""

from django.dispatch import Signal

allocation_state_changed = Signal()
