"""Pricing and period close, table-driven, from usage collected by the real metering code.

Usage comes from the allocation ledger (reserved GPU-eq-hours): allocations made through the
services, moved into last month, and their hours collected with a metrics source that reports
no pods (the network edge; reserved hours need no metrics).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.billing.models import Period, PeriodState, Statement
from portal.billing.pricing import month_bounds, price, tenant_month_priced
from portal.billing.selectors import MonthStatements, statements_for
from portal.billing.services import period_close, period_reopen, rate_card_create
from portal.catalog.models import GpuModel, SharingBackend
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.core.errors import Conflict, InvalidTransition, PermissionDenied, ValidationFailed
from portal.core.models import AuditEvent
from portal.metering.collection import daily_rollup, hour_floor, metering_begin, window_collect
from portal.metering.models import MeteringState, UsageRecord
from portal.metering.sources import WindowMetrics
from tenants.models import Tenant
from tenants.services import tenant_create

TODAY = datetime.now(UTC).date()
MONTH = (TODAY.replace(day=1) - timedelta(days=1)).replace(day=1)  # last month
BEGIN, END = month_bounds(MONTH)


class NoPods:
    """A metrics source at the network edge that sees no pods: only the ledger counts."""

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        return WindowMetrics()


@dataclass
class Books:
    tenant: Tenant
    cluster: Cluster
    finance: User
    admin: User
    allocate: Callable[..., GpuRequest]
    collect: Callable[[], None]


@pytest.fixture
def books(a100_tenant, developer, finance_user, admin_user, catalog) -> Books:
    cluster = cluster_create(actor=None, name="east")
    metering_begin(cluster=cluster, at=BEGIN)
    hours: set[datetime] = set()

    def allocate(offering: str, starts: datetime, hours_held: float, count: int = 1) -> GpuRequest:
        allocation = gpu_request_submit(
            actor=developer, tenant=a100_tenant, offering=catalog[offering], count=count
        )
        ends = starts + timedelta(hours=hours_held)
        GpuRequest.objects.filter(pk=allocation.pk).update(starts_at=starts, ends_at=ends)
        moment = hour_floor(starts)
        while moment < ends or moment == hour_floor(starts):
            hours.add(moment)
            moment += timedelta(hours=1)
        return allocation

    def collect() -> None:
        for hour in sorted(hours):
            window_collect(cluster, hour, NoPods())
        # Every other hour of the month had no usage: its windows are done as far as usage goes.
        MeteringState.objects.filter(cluster=cluster).update(complete_until=END)

    return Books(a100_tenant, cluster, finance_user, admin_user, allocate, collect)


def card(books: Books, price_: str, effective: date, *, currency: str = "EUR",
         backend: str | None = None):  # fmt: skip
    return rate_card_create(
        actor=books.finance,
        gpu_model=GpuModel.objects.get(slug="a100-80gb"),
        backend=SharingBackend.objects.get(slug=backend) if backend else None,
        currency=currency,
        price_per_gpu_eq_hour=price_,
        effective_from=effective,
    )


def lines(books: Books) -> list[tuple[str, Fraction, Decimal | None, Decimal]]:
    priced = tenant_month_priced(books.tenant, MONTH, basis="reserved")
    return [(line.offering, line.quantity, line.rate, line.amount) for line in priced.lines]


DAY = timedelta(days=1)


@pytest.mark.parametrize(
    ("case", "allocations", "cards", "expected"),
    [
        (
            "a MIG 1/7 slice for 10 hours is exactly 10/7 GPU-eq-hours",
            [("a100-80gb-mig-1g-10gb", BEGIN + DAY, 10)],
            [("2.10", MONTH)],
            [(Fraction(10, 7), Decimal("2.1000"), Decimal("3.00"))],
        ),
        (
            "a price change in mid-month gives a line per price",
            [("a100-80gb-whole", BEGIN + 9 * DAY + timedelta(hours=20), 8)],
            [("2.00", MONTH), ("3.00", MONTH + 10 * DAY)],
            [
                (Fraction(4), Decimal("2.0000"), Decimal("8.00")),
                (Fraction(4), Decimal("3.0000"), Decimal("12.00")),
            ],
        ),
        (
            "an allocation across the month boundary counts its hours in this month only",
            [("a100-80gb-whole", END - timedelta(hours=3), 10)],
            [("1.00", MONTH - 40 * DAY)],
            [(Fraction(3), Decimal("1.0000"), Decimal("3.00"))],
        ),
        (
            "a zero-length allocation gives no line",
            [("a100-80gb-whole", BEGIN + 2 * DAY, 0)],
            [("1.00", MONTH)],
            [],
        ),
        (
            "half a cent rounds up, once per line",
            [("a100-80gb-mig-1g-10gb", BEGIN + DAY, 7)],  # 1 GPU-eq-hour
            [("0.125", MONTH)],
            [(Fraction(1), Decimal("0.1250"), Decimal("0.13"))],
        ),
        (
            "usage with no price is listed at no charge",
            [("a100-80gb-whole", BEGIN + DAY, 2)],
            [],
            [(Fraction(2), None, Decimal("0.00"))],
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_pricing(books: Books, case, allocations, cards, expected) -> None:
    for offering, starts, hours_held in allocations:
        books.allocate(offering, starts, hours_held)
    for price_, effective in cards:
        card(books, price_, effective)
    books.collect()

    assert [line[1:] for line in lines(books)] == expected, case


def test_price_rounds_half_up_to_the_cent() -> None:
    assert price(Fraction(1, 2), Decimal("0.01")) == Decimal("0.01")
    assert price(Fraction(10, 7), Decimal("2.1")) == Decimal("3.00")
    assert price(Fraction(1, 3), Decimal("1")) == Decimal("0.33")


def two_currencies(books: Books) -> None:
    """Usage of whole GPUs priced in EUR and of MIG slices priced in USD, collected."""
    books.allocate("a100-80gb-whole", BEGIN + DAY, 2)
    books.allocate("a100-80gb-mig-1g-10gb", BEGIN + DAY, 7)
    card(books, "2.00", MONTH, currency="EUR", backend="whole")
    card(books, "2.00", MONTH, currency="USD", backend="mig")
    books.collect()


def test_two_currencies_in_one_statement_are_refused(books: Books) -> None:
    two_currencies(books)

    with pytest.raises(Conflict, match="EUR and USD"):
        tenant_month_priced(books.tenant, MONTH, basis="reserved")
    with pytest.raises(Conflict, match="EUR and USD"):
        period_close(actor=books.finance, month=MONTH)
    assert not Period.objects.filter(state=PeriodState.CLOSED).exists()


def test_a_closed_month_is_frozen_and_reopening_and_closing_again_recomputes_it(
    books: Books,
) -> None:
    allocation = books.allocate("a100-80gb-whole", BEGIN + DAY, 10)
    card(books, "2.00", MONTH)
    books.collect()

    period_close(actor=books.finance, month=MONTH)

    statement = Statement.objects.get(period__month=MONTH, tenant=books.tenant)
    assert (statement.total, statement.currency, statement.basis) == (
        Decimal("20.00"), "EUR", "reserved",
    )  # fmt: skip
    # Every tenant's totals per cost centre of the closed month, kept for the process.
    assert _centre_totals(books.finance) == [("EUR", Decimal("20.00"), 1)]
    # Usage collected again differently, and a new price: the closed month does not move.
    GpuRequest.objects.filter(pk=allocation.pk).update(ends_at=BEGIN + DAY + timedelta(hours=5))
    UsageRecord.objects.all().delete()
    books.collect()
    card(books, "9.00", TODAY.replace(day=1))
    with pytest.raises(Conflict, match="closed"):
        card(books, "5.00", MONTH)  # a price inside a closed month
    statement.refresh_from_db()
    assert statement.total == Decimal("20.00")
    assert [(line.quantity, line.amount) for line in statement.lines.all()] == [
        (Fraction(10), Decimal("20.00"))
    ]
    with pytest.raises(InvalidTransition):
        period_close(actor=books.finance, month=MONTH)

    with pytest.raises(PermissionDenied):
        period_reopen(actor=books.finance, month=MONTH, reason="late usage")
    with pytest.raises(ValidationFailed):
        period_reopen(actor=books.admin, month=MONTH, reason=" ")
    period_reopen(actor=books.admin, month=MONTH, reason="usage was collected again")
    period_close(actor=books.finance, month=MONTH)

    again = Statement.objects.get(period__month=MONTH, tenant=books.tenant)
    assert again.total == Decimal("10.00")  # five hours now, at the month's price
    # Closed again, a new `closed_at`: the kept totals are not the first close's.
    assert _centre_totals(books.finance) == [("EUR", Decimal("10.00"), 1)]
    assert len(MonthStatements(books.finance, MONTH)) == 1
    history = AuditEvent.objects.filter(target_type="billing.period").order_by("id")
    assert [(event.action, event.changes["totals"]) for event in history] == [
        ("period.close", [None, {"vision": "20.00 EUR"}]),
        ("period.reopen", [{"vision": "20.00 EUR"}, None]),
        ("period.close", [None, {"vision": "10.00 EUR"}]),
    ]
    assert history[1].comment == "usage was collected again"


def _centre_totals(user: User) -> list[tuple[str, Decimal, int]]:
    return [
        (row.currency, row.total, row.statements)
        for row in MonthStatements(user, MONTH).centre_totals()
    ]


def test_a_month_is_not_closed_before_its_usage_is_complete(books: Books, lead: User) -> None:
    books.allocate("a100-80gb-whole", BEGIN + DAY, 2)
    books.collect()
    MeteringState.objects.filter(cluster=books.cluster).update(complete_until=END - DAY)

    with pytest.raises(Conflict, match="east \\(complete until"):
        period_close(actor=books.finance, month=MONTH)
    with pytest.raises(Conflict, match="has not ended"):
        period_close(actor=books.finance, month=TODAY)
    with pytest.raises(PermissionDenied):
        period_close(actor=lead, month=MONTH)


def test_a_tenant_with_two_currencies_does_not_hide_the_others_statements(books: Books) -> None:
    two_currencies(books)

    [statement] = statements_for(books.finance, MONTH)

    assert statement.tenant == books.tenant
    assert "EUR and USD" in statement.problem
    assert statement.total == Decimal("0.00")


def _usage(books: Books, month_begin: datetime, tenants: int) -> None:
    """Two workloads' hours in `tenants` new tenants, in the month that begins at
    `month_begin` (records and the day's rollup as metering writes them)."""
    model = GpuModel.objects.get(slug="a100-80gb")
    for number in range(tenants):
        tenant = tenant_create(actor=None, slug=f"close-{month_begin:%m}-{number}", name="T")
        for workload in ("job-a", "job-b"):
            record = UsageRecord(
                cluster=books.cluster, hour=month_begin + DAY, tenant=tenant,
                namespace=f"t-{tenant.slug}", workload_kind="pod", workload=workload,
                gpu_model=model, used_gpu_hours=Decimal("0.5"),
            )  # fmt: skip
            record.reserved = record.requested = Fraction(1)
            record.save()
    daily_rollup(books.cluster, (month_begin + DAY).date())


def test_closing_a_month_stores_every_statement_in_queries_that_do_not_grow_with_tenants(
    books: Books,
) -> None:
    earlier = (MONTH - DAY).replace(day=1)
    card(books, "2.00", earlier)
    _usage(books, datetime.combine(earlier, datetime.min.time(), tzinfo=UTC), tenants=2)
    _usage(books, BEGIN, tenants=12)
    MeteringState.objects.filter(cluster=books.cluster).update(complete_until=END)

    with CaptureQueriesContext(connection) as two:
        period_close(actor=books.finance, month=earlier)
    with CaptureQueriesContext(connection) as twelve:
        period_close(actor=books.finance, month=MONTH)

    assert len(twelve) == len(two)
    stored = Statement.objects.filter(period__month=MONTH).order_by("tenant__slug")
    assert [(s.tenant.slug, s.total, s.lines.count()) for s in stored] == [
        (f"close-{BEGIN:%m}-{number}", Decimal("4.00"), 2) for number in sorted(range(12), key=str)
    ]
