"""The API's filter backend: a call naming none of a list's filters is not filtered, and one
naming any of them (well or badly) goes through the list's FilterSet."""

from portal.allocations.filters import GpuRequestFilter
from portal.core.filters import AuditEventFilter, asks_for
from tenants.services import tenant_update


def test_asks_for_knows_a_filterset_s_own_parameters_and_their_suffixes() -> None:
    assert asks_for(AuditEventFilter, ["target_type"])
    assert asks_for(AuditEventFilter, ["page", "since"])
    assert asks_for(AuditEventFilter, ["since_after"])  # a range widget's half
    assert asks_for(GpuRequestFilter, ["sort"])
    assert not asks_for(AuditEventFilter, ["page", "page_size", "cursor", "format"])
    assert not asks_for(AuditEventFilter, ["sincere", "targets"])
    assert not asks_for(AuditEventFilter, [])


def test_the_list_is_the_same_unfiltered_and_a_named_filter_still_filters_and_refuses(
    client_for, admin_user, tenant_a, tenant_b
) -> None:
    tenant_update(actor=admin_user, tenant=tenant_a, cost_centre="CC-A")
    tenant_update(actor=admin_user, tenant=tenant_b, cost_centre="CC-B")
    client = client_for(admin_user)

    every = client.get("/api/v1/audit-events/", {"page_size": 500}).json()
    empty = client.get("/api/v1/audit-events/", {"page_size": 500, "action": ""}).json()
    one = client.get("/api/v1/audit-events/", {"tenant": "vision", "action": "tenant.up"}).json()
    bad = client.get("/api/v1/audit-events/", {"until": "later", "page": 1})

    assert every["results"] == empty["results"]
    assert [row["action"] for row in every["results"]][:2] == ["tenant.update"] * 2
    assert [(row["action"], row["tenant"]) for row in one["results"]] == [
        ("tenant.update", "vision")
    ]
    assert bad.status_code == 400
    assert list(bad.json()["error"]["fields"]) == ["until"]
