import csv
import io

from portal.core.audit import audit_record
from tenants.services import tenant_update


def test_api_lists_events_the_caller_may_see(
    client_for, lead, admin_user, tenant_a, tenant_b
) -> None:
    tenant_update(actor=admin_user, tenant=tenant_a, cost_centre="CC-A")
    tenant_update(actor=admin_user, tenant=tenant_b, cost_centre="CC-B")

    body = client_for(lead).get("/api/v1/audit-events/?action=tenant.update").json()

    assert body["count"] == 1
    event = body["results"][0]
    assert event["tenant"] == "vision"
    assert event["actor"] == "admin"
    assert event["changes"] == {"cost_centre": ["CC-4100", "CC-A"]}


def test_api_filters_by_time_and_names_a_bad_filter(client_for, admin_user, tenant_a) -> None:
    client = client_for(admin_user)

    future = client.get("/api/v1/audit-events/?since=2999-01-01T00:00:00Z").json()
    bad = client.get("/api/v1/audit-events/?since=soon")

    assert future["count"] == 0
    assert bad.status_code == 400
    assert "since" in bad.json()["error"]["fields"]


def test_admin_exports_csv_and_finance_may_not(
    client_for, admin_user, finance_user, tenant_a
) -> None:
    exported = client_for(admin_user).get("/api/v1/audit-events/?format=csv&tenant=vision")
    refused = client_for(finance_user).get("/api/v1/audit-events/?format=csv")

    assert exported.status_code == 200
    assert exported["Content-Type"].startswith("text/csv")
    assert exported.streaming
    rows = list(csv.DictReader(io.StringIO(exported.getvalue().decode())))
    assert [row["action"] for row in rows] == ["tenant.create"]
    assert rows[0]["tenant"] == "vision"
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


def test_the_audit_csv_never_hands_a_spreadsheet_a_formula(client_for, admin_user, db) -> None:
    audit_record(
        actor=admin_user, action="test.formula", target=admin_user,
        comment="=HYPERLINK(\"http://evil.example\")", changes={},
    )  # fmt: skip

    exported = client_for(admin_user).get("/api/v1/audit-events/?format=csv&action=test.")

    [row] = list(csv.DictReader(io.StringIO(exported.getvalue().decode())))
    assert row["comment"] == '\'=HYPERLINK("http://evil.example")'


def test_anonymous_callers_get_401(client, db) -> None:
    assert client.get("/api/v1/audit-events/").status_code == 401


def test_an_export_past_the_limit_is_refused_naming_it_and_within_it_streams_every_event(
    client_for, admin_user, tenant_a, settings
) -> None:
    for number in range(3):
        audit_record(actor=admin_user, action="test.many", target=admin_user, comment=str(number))
    client = client_for(admin_user)

    settings.PORTAL_AUDIT_EXPORT_LIMIT = 2
    refused = client.get("/api/v1/audit-events/?format=csv&action=test.many")
    settings.PORTAL_AUDIT_EXPORT_LIMIT = 3
    exported = client.get("/api/v1/audit-events/?format=csv&action=test.many")

    assert refused.status_code == 409
    assert "More than 2 events match" in refused.json()["error"]["message"]
    rows = list(csv.DictReader(io.StringIO(exported.getvalue().decode())))
    assert [row["comment"] for row in rows] == ["2", "1", "0"]


def test_a_time_with_an_offset_postgresql_refuses_is_read_in_utc_and_one_out_of_range_is_400(
    client_for, admin_user, tenant_a
) -> None:
    client = client_for(admin_user)
    far_offset = "0208-03-19T01:16:41.079+20:38"

    listed = client.get("/api/v1/audit-events/", {"until": far_offset})
    exported = client.get("/api/v1/audit-events/", {"format": "csv", "since": far_offset})
    refused = client.get("/api/v1/audit-events/", {"until": "0001-01-01T00:00:00+05:00"})

    assert (listed.status_code, listed.json()["count"]) == (200, 0)
    assert exported.status_code == 200
    assert [row["action"] for row in csv.DictReader(io.StringIO(exported.getvalue().decode()))]
    assert refused.status_code == 400
    assert "until" in refused.json()["error"]["fields"]


def test_a_page_past_the_last_of_a_short_list_is_404_without_the_cursor_hint(
    client_for, admin_user, tenant_a
) -> None:
    response = client_for(admin_user).get("/api/v1/audit-events/", {"page": 99})

    assert response.status_code == 404
    assert response.json()["error"]["message"] == "There is no such page."
