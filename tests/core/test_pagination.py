"""Pages of lists (portal/core/pagination.py): a page that ends its list is counted from its own
rows (one query, not two); a full page is counted; numbers that are no page answer as before."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.core.audit import audit_record
from portal.core.models import AuditEvent
from portal.core.pagination import (
    COUNT_LIMIT,
    ESTIMATED_BEYOND,
    BeyondEstimates,
    BoundedPaginator,
    beyond_estimates,
)


@pytest.fixture
def five_events(admin_user) -> None:
    for number in range(5):
        audit_record(actor=admin_user, action="test.page", target=admin_user, comment=str(number))


def _counts(queries: CaptureQueriesContext) -> int:
    return sum("COUNT(" in query["sql"] for query in queries.captured_queries)


@pytest.mark.parametrize(
    ("page_size", "page", "rows", "counted_in_sql"),
    [
        (10, 1, 5, False),  # one page holds the list
        (2, 3, 1, False),  # the last page, partly full
        (2, 1, 2, True),  # a full first page: more may follow
        (5, 1, 5, True),  # exactly full: only a count can tell
    ],
)
def test_a_page_that_ends_the_list_counts_it_from_its_rows(
    client_for, admin_user, five_events, page_size: int, page: int, rows: int, counted_in_sql: bool
) -> None:
    client = client_for(admin_user)
    query = {"action": "test.page", "page_size": page_size, "page": page}

    with CaptureQueriesContext(connection) as queries:
        body = client.get("/api/v1/audit-events/", query).json()

    assert (body["count"], body["count_exact"], len(body["results"])) == (5, True, rows)
    assert _counts(queries) == (1 if counted_in_sql else 0)
    assert (body["next"] is None) == (page * page_size >= 5)


@pytest.mark.parametrize("page", ["0", "-1", "99", str(10**30), "1.5", "x"])
def test_a_number_that_is_no_page_is_404_in_the_api(
    client_for, admin_user, five_events, page: str
) -> None:
    response = client_for(admin_user).get(
        "/api/v1/audit-events/", {"action": "test.page", "page": page}
    )

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize(
    ("page", "shown"), [("x", 1), ("0", 3), ("99", 3), (str(10**30), 3), ("2", 2), (None, 1)]
)
def test_pages_show_the_first_page_for_no_number_and_the_last_for_one_past_it(
    five_events, page: str | None, shown: int
) -> None:
    events = AuditEvent.objects.filter(action="test.page").order_by("-at", "-id")

    found = BoundedPaginator(events, 2).get_page(page)

    assert found.number == shown
    assert len(found.object_list) == (1 if shown == 3 else 2)
    assert found.paginator.count == 5


@pytest.mark.parametrize("number", [None, "", "x"])
def test_a_page_opened_without_a_number_reads_its_rows_before_any_count(
    five_events, number: str | None
) -> None:
    """A list's page opened without `?page=` (or with one that is no number) is the first
    page, read as page 1 is: a list that one page holds is not counted in SQL."""
    events = AuditEvent.objects.filter(action="test.page").order_by("-at", "-id")

    with CaptureQueriesContext(connection) as queries:
        found = BoundedPaginator(events, 10).get_page(number)
        shown = list(found.object_list)

    assert (found.number, len(shown), found.paginator.count) == (1, 5, 5)
    assert _counts(queries) == 0
    assert len(queries.captured_queries) == 1


def test_a_short_page_past_the_counted_bound_is_still_no_page(db, settings) -> None:
    """Page numbers stop at the page holding the bound's last row, even when the rows after
    it would make a short page."""
    per_page = 10
    rows = COUNT_LIMIT + 3
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO core_auditevent (at, actor_name, action, target_type, target_id,"
            " target_name, changes, comment, request_id, source_ip, user_agent)"
            " SELECT now(), 'x', 'test.bound', 'x', n::text, 'x', '{}', '', '', NULL, ''"
            " FROM generate_series(1, %s) n",
            [rows],
        )
    events = AuditEvent.objects.filter(action="test.bound").order_by("-at", "-id")

    paginator = BoundedPaginator(events, per_page)
    last = paginator.get_page(COUNT_LIMIT // per_page + 1)

    assert paginator.count == COUNT_LIMIT
    assert not paginator.count_exact
    assert last.number == COUNT_LIMIT // per_page
    assert len(last.object_list) == per_page


def test_a_sequence_that_is_not_a_query_is_counted_exactly_and_paged_to_its_end() -> None:
    """A sequence knows its length (a statement's lines give the count their statement
    stored): it is not bounded, and every page of it has a number, past the bound too."""
    per_page = 10
    rows = list(range(COUNT_LIMIT + 3))

    paginator = BoundedPaginator(rows, per_page)
    last = paginator.page(COUNT_LIMIT // per_page + 1)

    assert (paginator.count, paginator.count_exact) == (COUNT_LIMIT + 3, True)
    assert list(last.object_list) == [COUNT_LIMIT, COUNT_LIMIT + 1, COUNT_LIMIT + 2]
    assert not last.has_next()


def _estimate(table: str, rows: float) -> None:
    """Have PostgreSQL estimate `table` at `rows` rows, as ANALYZE would after filling it (the
    catalog's row is changed in the test's transaction, and rolled back with it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pg_class SET reltuples = %s WHERE oid = to_regclass(%s)", [rows, table]
        )


def _reads_estimate(queries: CaptureQueriesContext) -> bool:
    return any("reltuples" in query["sql"] for query in queries.captured_queries)


def test_a_whole_table_estimated_beyond_the_bound_is_not_counted(
    client_for, admin_user, five_events
) -> None:
    client = client_for(admin_user)
    page = {"page_size": 2}
    every = client.get("/api/v1/audit-events/", page).json()
    assert (every["count"], every["count_exact"]) == (AuditEvent.objects.count(), True)

    _estimate("core_auditevent", ESTIMATED_BEYOND + 1)
    every = client.get("/api/v1/audit-events/", page).json()
    # Every event, as an admin lists them: "10,000+" from PostgreSQL's estimate, in one query
    # as before; the next page is still a cursor away.
    assert (every["count"], every["count_exact"]) == (COUNT_LIMIT, False)
    assert [row["comment"] for row in every["results"]] == ["4", "3"]
    assert "cursor=" in every["next"]
    # A filtered list is counted, whatever the table's size.
    some = client.get("/api/v1/audit-events/", {**page, "action": "test.page"}).json()
    assert (some["count"], some["count_exact"]) == (5, True)

    # The estimate beyond the bound is kept: the next pages read it no more.
    with CaptureQueriesContext(connection) as queries:
        again = client.get("/api/v1/audit-events/", page).json()
    assert (again["count"], again["count_exact"]) == (COUNT_LIMIT, False)
    assert not _reads_estimate(queries)

    _estimate("core_auditevent", ESTIMATED_BEYOND)  # not beyond it: counted, once forgotten
    beyond_estimates.clear()  # as ESTIMATE_KEPT_SECONDS after it was read
    with CaptureQueriesContext(connection) as queries:
        every = client.get("/api/v1/audit-events/", page).json()
    assert (every["count"], every["count_exact"]) == (AuditEvent.objects.count(), True)
    assert _reads_estimate(queries)
    # A table below the bound is counted on every page: nothing kept.
    with CaptureQueriesContext(connection) as queries:
        client.get("/api/v1/audit-events/", page)
    assert _reads_estimate(queries)


def test_an_estimate_is_kept_for_its_seconds_in_each_database_and_table() -> None:
    now = [100.0]
    kept = BeyondEstimates(60.0, timer=lambda: now[0])
    kept.keep("default", "core_auditevent")

    assert kept.beyond("default", "core_auditevent")
    assert not kept.beyond("default", "workloads_notebook")
    assert not kept.beyond("other", "core_auditevent")
    now[0] = 159.9
    assert kept.beyond("default", "core_auditevent")
    now[0] = 160.0
    assert not kept.beyond("default", "core_auditevent")
