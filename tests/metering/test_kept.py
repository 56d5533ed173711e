"""Every tenant's usage readings, kept in each process until the usage they read changes
(portal/metering/kept.py)."""

from datetime import UTC, date, datetime
from decimal import Decimal
from fractions import Fraction

from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import User
from portal.cluster.services import cluster_create
from portal.metering.collection import daily_rollup
from portal.metering.kept import KeptReadings, usage_inputs
from portal.metering.models import MeteringState, UsageModelDaily, UsageModelMonthly, UsageRecord
from portal.metering.selectors import UsageQuery, usage_totals
from tenants.models import Tenant

NAMESPACE = "t-vision"
DAY = date(2026, 2, 10)


def hour_of_usage(cluster, tenant: Tenant, hour: datetime, reserved: Fraction) -> None:
    row = UsageRecord(
        cluster=cluster, hour=hour, tenant=tenant, namespace=NAMESPACE,
        workload_kind="pod", workload="train", used_gpu_hours=Decimal("0.5"),
    )  # fmt: skip
    row.reserved = row.requested = reserved
    row.save()
    daily_rollup(cluster, hour.date())


def grouped_reads(read: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in read.captured_queries if "GROUP BY" in q["sql"]]


def test_every_tenants_reading_is_kept_until_new_usage_is_written(
    tenant_a: Tenant, finance_user: User, admin_user: User
) -> None:
    cluster = cluster_create(actor=None, name="west")
    hour_of_usage(cluster, tenant_a, datetime(2026, 2, 10, 3, tzinfo=UTC), Fraction(1, 7))
    query = UsageQuery(date(2026, 2, 1), date(2026, 2, 28), ["tenant", "model"])

    [first] = usage_totals(finance_user, query)
    with CaptureQueriesContext(connection) as read:
        [again] = usage_totals(admin_user, query)  # the same for everyone who sees all

    assert grouped_reads(read) == []
    assert len(read.captured_queries) == 1  # what the usage was read from
    assert again == first
    assert first.reserved == Fraction(1, 7)

    # A window's usage written: its day's rollup rows are new rows.
    hour_of_usage(cluster, tenant_a, datetime(2026, 2, 10, 4, tzinfo=UTC), Fraction(2, 7))
    with CaptureQueriesContext(connection) as read:
        [after] = usage_totals(finance_user, query)
    assert grouped_reads(read)
    assert after.reserved == Fraction(3, 7)


def test_a_window_counted_moves_the_inputs_even_when_no_newer_row_shows(
    tenant_a: Tenant, finance_user: User
) -> None:
    cluster = cluster_create(actor=None, name="west")
    hour_of_usage(cluster, tenant_a, datetime(2026, 2, 10, 3, tzinfo=UTC), Fraction(1, 7))
    MeteringState.objects.create(cluster=cluster, begins_at=datetime(2026, 2, 1, tzinfo=UTC))
    query = UsageQuery(date(2026, 2, 1), date(2026, 2, 28), ["tenant"])
    assert usage_totals(finance_user, query)[0].reserved == Fraction(1, 7)

    # Another cluster's window, committed after this reading with rows of lower ids than the
    # newest read (stood in for by rows changed in place): its count moves.
    before = usage_inputs([UsageModelDaily, UsageModelMonthly])
    UsageModelDaily.objects.filter(day=DAY).update(reserved_num=F("reserved_num") * 2)
    UsageModelMonthly.objects.filter(tenant=tenant_a).update(reserved_num=F("reserved_num") * 2)
    assert usage_inputs([UsageModelDaily, UsageModelMonthly]) == before
    MeteringState.objects.filter(cluster=cluster).update(windows_done=F("windows_done") + 1)
    assert usage_inputs([UsageModelDaily, UsageModelMonthly]) != before

    assert usage_totals(finance_user, query)[0].reserved == Fraction(2, 7)


def test_one_tenants_reading_is_kept_for_those_who_see_all_of_it(
    tenant_a: Tenant, lead: User, finance_user: User, developer: User
) -> None:
    cluster = cluster_create(actor=None, name="west")
    hour_of_usage(cluster, tenant_a, datetime(2026, 2, 10, 3, tzinfo=UTC), Fraction(1, 7))
    query = UsageQuery(date(2026, 2, 1), date(2026, 2, 28), ["model"], tenant=tenant_a)

    [row] = usage_totals(lead, query)
    with CaptureQueriesContext(connection) as read:
        [again] = usage_totals(finance_user, query)  # the same rows: all of the tenant's
    assert grouped_reads(read) == []
    assert again == row
    assert row.reserved == Fraction(1, 7)

    # A developer sees their own usage of the tenant (none here): read each time.
    for _ in range(2):
        with CaptureQueriesContext(connection) as read:
            assert usage_totals(developer, query) == []
        assert grouped_reads(read)


def test_kept_readings_expire_the_least_recently_used_go_first_and_large_ones_are_not_kept() -> (
    None
):
    now = [0.0]
    readings: KeptReadings[int] = KeptReadings(rows=3, seconds=60, timer=lambda: now[0])
    reads: list[str] = []

    def reading(key: str, rows: int = 1) -> list[int]:
        reads.append(key)
        return [len(reads)] * rows

    assert readings.read("a", lambda: reading("a")) == [1]
    assert readings.read("a", lambda: reading("a")) == [1]
    now[0] = 61.0  # past its time: read again
    assert readings.read("a", lambda: reading("a")) == [2]
    readings.read("b", lambda: reading("b", rows=2))
    readings.read("c", lambda: reading("c"))  # three rows at most: "a" goes
    assert readings.read("c", lambda: reading("c")) == [4]
    assert readings.read("a", lambda: reading("a")) == [5]  # and "b" (two rows) goes
    assert readings.read("big", lambda: reading("big", rows=4)) == [6] * 4  # not kept
    assert readings.read("big", lambda: reading("big", rows=4)) == [7] * 4
    assert readings.read("c", lambda: reading("c")) == [4]  # nothing pushed out by it
    assert reads == ["a", "a", "b", "c", "a", "big", "big"]
    # Each caller gets its own list of the kept rows.
    mine = readings.read("a", lambda: reading("a"))
    mine.append(99)
    assert readings.read("a", lambda: reading("a")) == [5]
