"""The requests and audit lists of each persona read an index, not the whole table (issue 19).

The data has the shape of `make bench`'s data set (tests/bench/scale.py) at a twentieth of its
size: 50 tenants, 500 users, 50,000 requests and 50,000 audit events, analysed as PostgreSQL
sees them. Each persona's requests, audit events and notebooks are read through the API (page
1, a deep page by number, the page after it by cursor) and the pages; every query of those
calls that reads the requests or audit events is explained, and none may scan them
sequentially.
"""

import re
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import User
from tests.bench import scale

SCALE = 0.05
# The tables that are big at this size (50,000 rows each). Notebooks are read too, but at 2,500
# rows a sequential scan and a sort is the plan PostgreSQL rightly picks for some of their
# queries; their joins to the requests are checked all the same.
BIG_TABLES = ("allocations_gpurequest", "core_auditevent")
PERSONAS = ("admin", "lead", "developer")
API = "/api/v1/"


def _seeded() -> dict[str, User]:
    shape = scale.Shape.at(SCALE)
    scale.Seeder(shape, datetime.now(UTC)).run()
    return {
        "admin": User.objects.get(username=scale.ADMIN),
        "lead": User.objects.get(username=scale.lead_username()),
        "developer": User.objects.get(username=scale.developer_username(shape)),
    }


def _scans_in(sql: str) -> list[str]:
    """The big tables the plan of `sql` scans sequentially, each with the query and plan. The
    plan is run (`EXPLAIN ANALYZE`), so that a scan in a branch that never runs is left out:
    a whole table's count estimate (`BoundedPaginator`) plans a count of the first rows for
    a table below its bound, which PostgreSQL may plan as a sequential scan and never runs
    on one of this size."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF) {sql}")
        plan = [row[0] for row in cursor.fetchall()]
    return [
        f"{table}\n  {sql[:300]}\n  " + "\n  ".join(plan)
        for table in BIG_TABLES
        if any(
            re.search(rf"Seq Scan on {table}\b", line) and "never executed" not in line
            for line in plan
        )
    ]


def _sequential_scans(client: Client, url: str) -> tuple[list[str], dict[str, object] | None]:
    """The big tables `url` scans sequentially (with the query and plan), and its JSON."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    found = []
    for query in captured.captured_queries:
        sql = query["sql"]
        if not sql.lstrip().upper().startswith("SELECT") or not any(
            table in sql for table in BIG_TABLES
        ):
            continue
        found += [f"{url}: {scan}" for scan in _scans_in(sql)]
    body = response.json() if response["Content-Type"].startswith("application/json") else None
    return found, body


def _path(link: str) -> str:
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


@pytest.mark.django_db(transaction=True)
def test_each_personas_big_lists_read_an_index_on_the_bench_shape() -> None:
    people = _seeded()
    pages = {
        "admin": ["/requests/", "/manage/requests/", "/approvals/", "/audit/", "/notebooks/"],
        "lead": ["/requests/", "/approvals/", "/audit/", "/notebooks/"],
        "developer": ["/requests/", "/notebooks/"],
    }
    scans: list[str] = []
    read = 0
    for persona in PERSONAS:
        client = Client()
        client.force_login(people[persona])
        for list_path in ("requests/", "audit-events/", "notebooks/"):
            found, first = _sequential_scans(client, f"{API}{list_path}")
            scans += found
            read += 1
            assert first is not None
            # A deep page by number (the last one counted, at most 40; notebooks are too few
            # at this size for a deep page to be read from the index), then the page after
            # it by its cursor.
            deep = max(1, min(40, -(-int(first["count"]) // 50)))  # type: ignore[call-overload]
            if list_path == "notebooks/":
                deep = 1
            found, body = _sequential_scans(client, f"{API}{list_path}?page={deep}")
            scans += found
            read += 1
            assert body is not None
            if body["next"]:
                found, _body = _sequential_scans(client, _path(str(body["next"])))
                scans += found
                read += 1
        for page in pages[persona]:
            found, _body = _sequential_scans(client, page)
            scans += found
            read += 1
    assert read >= 30
    assert not scans, "\n\n".join(scans)


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.django_db(transaction=True)
def test_a_leads_requests_are_read_from_each_branchs_index_on_the_bench_shape() -> None:
    """A lead's requests (their own OR their tenants'): the page and the count read each branch
    from an index of its owner or tenant, not the newest-first index of every tenant's
    requests past the rows of the others."""
    client = Client()
    client.force_login(_seeded()["lead"])

    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"{API}requests/")

    assert response.status_code == 200
    assert response.json()["count"] > 50  # a full page, so the count is a query of its own
    requests = [q["sql"] for q in captured.captured_queries if "allocations_gpurequest" in q["sql"]]
    page = [sql for sql in requests if "ANY(ARRAY(" in sql]
    count = [sql for sql in requests if sql.startswith("SELECT COUNT(*)")]
    assert len(page) == 1, requests
    assert len(count) == 1, requests
    # The led tenants' branches, as the page names them (the count names them again in the
    # branches it reads without the rows of those before: `disjoint_branches_of`).
    branches = len(re.findall(r'"allocations_gpurequest"\."tenant_id" = ', page[0]))
    assert branches >= 1, page[0]
    for plan in (_plan(page[0]), _plan(count[0])):
        # Each branch reads an index by its owner or its tenant. Which of the tenant's indexes
        # and whether the heap is visited (an index-only scan needs the visibility map, which
        # a VACUUM beside another open transaction may leave unset) is PostgreSQL's choice.
        conditions = re.findall(r"Index Cond: \((\w+) = ", plan)
        assert conditions.count("requester_id") == 1, plan
        assert conditions.count("tenant_id") == branches, plan
        assert "gpurequest_newest " not in plan, plan
        assert "Seq Scan on allocations_gpurequest" not in plan, plan


@pytest.mark.django_db
def test_the_check_sees_a_sequential_scan() -> None:
    """The finder above notices a query that reads a whole big table."""
    scans = _scans_in("SELECT id FROM core_auditevent WHERE comment LIKE '%x%'")
    assert len(scans) == 1
    assert scans[0].startswith("core_auditevent")
    assert _scans_in("SELECT id FROM core_auditevent WHERE id = 1") == []
