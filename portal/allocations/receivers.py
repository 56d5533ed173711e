"""How allocations follow their tenant; connected in AllocationsConfig.ready()."""

from typing import Any

from portal.allocations.services import allocations_follow_tenant
from tenants.models import Tenant


def allocations_follow_tenant_state(
    sender: object, *, tenant: Tenant, actor: Any, **kwargs: object
) -> None:
    """`tenants.signals.tenant_state_changed`, inside the change's transaction."""
    allocations_follow_tenant(tenant=tenant, actor=actor)
