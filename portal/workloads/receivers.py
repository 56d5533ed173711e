"""How notebooks follow their tenant and allocation; connected in WorkloadsConfig.ready()."""

from typing import Any

from portal.allocations.models import GpuRequest
from portal.workloads.services import notebooks_follow_allocation, notebooks_follow_tenant
from tenants.models import Tenant


def notebooks_follow_tenant_state(
    sender: object, *, tenant: Tenant, actor: Any, **kwargs: object
) -> None:
    notebooks_follow_tenant(tenant=tenant, actor=actor)


def notebooks_follow_allocation_state(
    sender: object, *, allocation: GpuRequest, before: str, actor: Any, **kwargs: object
) -> None:
    notebooks_follow_allocation(allocation=allocation, before=before, actor=actor)
