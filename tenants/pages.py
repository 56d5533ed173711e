"""Sections that higher apps add to a tenant's page (the cluster app: its namespace and runs).

Each registers, when it is ready, a template (a partial, e.g.
`cluster/tenant_runs.html#provisioning`)
and a function giving the context it needs for one tenant.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from portal.core.registry import Registry
from tenants.models import Tenant


@dataclass(frozen=True)
class TenantSection:
    template: str
    context: Callable[[Tenant], dict[str, Any]]


tenant_sections: Registry[str, TenantSection] = Registry("tenant page section")


def tenant_sections_context(tenant: Tenant) -> dict[str, Any]:
    """The registered sections' templates, in order, and the context they need."""
    context: dict[str, Any] = {"tenant_sections": []}
    for section in tenant_sections.values():
        context["tenant_sections"].append(section.template)
        context |= section.context(tenant)
    return context
