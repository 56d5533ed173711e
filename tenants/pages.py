"""Sections that higher apps add to a tenant's page (the cluster app: its namespace and runs).

Each registers, when it is ready, a template (a partial, e.g.
`cluster/tenant_runs.html#provisioning`)
and a function giving the context it needs for one tenant. A section with a title loads on
its own after the page (`tenants/<slug>/sections/<name>/`, as the page's own quotas, members
and quota requests do: see `tenants.views`); one without is written in the page (a link).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.utils.functional import Promise

from portal.core.registry import Registry
from tenants.models import Tenant


def _everyone(_page: Mapping[str, Any]) -> bool:
    return True


@dataclass(frozen=True)
class TenantSection:
    template: str
    context: Callable[[Tenant], dict[str, Any]]
    # Loaded on its own after the page, under this title until it comes (None: in the page).
    title: str | Promise | None = None
    # A template the page writes once for a section loaded on its own: the scripts its
    # fragment needs (htmx runs no script it swaps in).
    assets: str | None = None
    # Whether the viewer gets the section, from the page's facts about them (`can_lead`,
    # `sees_all_tenants`); one they do not get is not found at its own address either.
    shown: Callable[[Mapping[str, Any]], bool] = _everyone


tenant_sections: Registry[str, TenantSection] = Registry("tenant page section")
