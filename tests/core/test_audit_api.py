import csv
import io
from datetime import UTC, datetime

import pytest
from django.db import connection

from portal.core.audit import audit_record
from portal.core.models import AuditEvent
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


@pytest.mark.parametrize("copy", [True, False], ids=["written-by-postgresql", "python"])
def test_the_audit_csv_never_hands_a_spreadsheet_a_formula(
    client_for, admin_user, db, settings, copy: bool
) -> None:
    settings.PORTAL_CSV_COPY = copy
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


# Cells a spreadsheet would take for a formula, numbers that look like one, what CSV must quote,
# an empty cell, text beyond ASCII.
ODD_CELLS = [
    "=1+2", "+cmd", "-x", "@SUM(A1)", "\tx", "\rx", "-1.25", "+3", "10/7", "-10/7", "1e5",
    'say "hi"', "a,b", "two\nlines", "", " lead", "'quoted", "数据中心", "é\u200b",
]  # fmt: skip


def test_postgresql_writes_the_audit_csv_python_would_cell_for_cell(
    client_for, admin_user, tenant_a, settings
) -> None:
    columns = (
        "actor_id, actor_name, action, target_type, target_id, target_name, tenant_id, changes,"
        " comment, request_id, source_ip, user_agent"
    )
    for number, text in enumerate(ODD_CELLS):
        # The odd text in every column, an IPv6 address; and the same event again at a time
        # chosen (`at` is set on insert): a whole second, which isoformat writes without
        # microseconds.
        event = AuditEvent.objects.create(
            actor=admin_user, actor_name=text, action="test.odd", target_type=text,
            target_id=text, target_name=text, tenant=tenant_a if number % 2 else None,
            changes={"note": [text, None]}, comment=text, request_id=text,
            source_ip="2001:db8::1" if number % 2 else "10.0.0.7", user_agent=text,
        )  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO core_auditevent (at, {columns}) SELECT %s, {columns}"  # noqa: S608
                " FROM core_auditevent WHERE id = %s",
                [
                    datetime(2026, 10, 1, 12, 0, number, 0 if number % 3 else 5, tzinfo=UTC),
                    event.pk,
                ],
            )
    client = client_for(admin_user)

    settings.PORTAL_CSV_COPY = True
    by_postgresql = client.get("/api/v1/audit-events/?format=csv&action=test.odd")
    settings.PORTAL_CSV_COPY = False
    by_python = client.get("/api/v1/audit-events/?format=csv&action=test.odd")

    def rows(response) -> list[list[str]]:
        return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))

    written = rows(by_postgresql)
    assert written == rows(by_python)
    assert len(written) == 2 * len(ODD_CELLS) + 1
    comments = {row[8] for row in written[1:]}
    assert {
        "'=1+2",
        "'+cmd",
        "'-x",
        "'@SUM(A1)",
        "'\tx",
        "'\rx",
        "-1.25",
        "+3",
        "-10/7",
    } <= comments
    assert {"2026-10-01T12:00:01+00:00", "2026-10-01T12:00:00.000005+00:00"} <= {
        row[0] for row in written[1:]
    }
    assert {"2001:db8::1", "10.0.0.7"} == {row[10] for row in written[1:]}
