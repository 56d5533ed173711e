from typing import Any

from django.http import HttpRequest

from portal.accounts.selectors import persona_of

# (label, url name, personas that see it). Pages still check access themselves.
NAVIGATION = [
    ("My workspace", "tenants:mine", {"developer", "lead", "admin"}),
    ("Notebooks", "workloads:list", {"developer", "lead", "admin"}),
    ("My requests", "allocations:mine", {"developer", "lead", "admin"}),
    ("Approvals", "allocations:approvals", {"lead", "admin"}),
    ("Team", "tenants:team", {"lead"}),
    ("Chargeback", "tenants:finance", {"finance", "admin"}),
    ("Tenants", "tenants:manage", {"admin"}),
    ("Quota requests", "tenants:quota-queue", {"admin"}),
    ("Catalog", "catalog:overview", {"admin"}),
    ("Clusters", "cluster:clusters", {"admin"}),
    ("Identity", "accounts:identity", {"admin"}),
    ("Capacity", "cluster:capacity", {"developer", "lead"}),
    ("All requests", "allocations:all", {"finance", "admin"}),
    ("Audit log", "audit", {"developer", "lead", "finance", "admin"}),
]


def navigation(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"navigation": [], "persona": None}
    persona = persona_of(user)
    items = [(label, name) for label, name, personas in NAVIGATION if persona in personas]
    return {"navigation": items, "persona": persona}
