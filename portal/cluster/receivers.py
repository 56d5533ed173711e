"""How the cluster app follows the apps below it; connected in ClusterConfig.ready()."""

from typing import Any

from portal.allocations.models import GpuRequest
from portal.cluster.selectors import provisioning_overview
from portal.cluster.services import provisioning_request
from tenants.models import Tenant


def provisioning_follows_tenant(
    sender: object,
    *,
    tenant: Tenant,
    reason: str,
    actor: Any,
    gpu_request: GpuRequest | None = None,
    **kwargs: object,
) -> None:
    """A tenant changed (`tenants.signals.tenant_changed`): queue a run of its bundle in the
    same transaction."""
    provisioning_request(tenant=tenant, reason=reason, actor=actor, gpu_request=gpu_request)


def provisioning_section(tenant: Tenant) -> dict[str, Any]:
    """The tenant page's namespace section: the latest runs and the objects they left."""
    return {"provisioning": provisioning_overview(tenant)}
