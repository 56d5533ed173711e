"""What happens to tenants, for the apps above that follow them.

Sent inside the transaction of the change, so that what the receivers write (a provisioning
run, a directory change, notebooks stopped) commits or rolls back with it. The receivers are
connected by the apps that own them, in their `AppConfig.ready()`:

- `tenant_changed` (tenant, reason, actor; gpu_request when an allocation caused it): the
  tenant's Kubernetes bundle must follow its new state. The cluster app queues a run.
- `tenant_created` (tenant, actor): the directory app queues the tenant's groups.
- `tenant_state_changed` (tenant, actor), before `tenant_changed`: the allocations app revokes
  a suspended or archived tenant's allocations and rejects its pending requests; the workloads
  app stops or deletes the tenant's notebooks.
- `membership_changed` (tenant, username, role, actor; role "" when removed): the directory app
  queues the member's group change.
"""

from django.dispatch import Signal

tenant_changed = Signal()
tenant_created = Signal()
tenant_state_changed = Signal()
membership_changed = Signal()
