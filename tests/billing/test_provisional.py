"""An open month's provisional totals are stored and read again until what they are priced
from changes (portal/billing/provisional.py)."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation

from portal.billing.models import OpenMonthTotal
from portal.billing.provisional import REPRICE_AFTER, pricing_inputs
from portal.billing.selectors import statements_for
from portal.billing.services import period_close
from portal.billing.tasks import price_open_months
from portal.metering.models import MeteringState, UsageWorkloadDaily
from tenants.models import MemberRole, Membership, Tenant
from tenants.services import membership_set
from tests.billing.test_pricing import (
    BEGIN,
    DAY,
    MONTH,
    Books,
    _usage,
    books,
    card,
    two_currencies,
)

__all__ = ["books"]  # the fixture, shared with the pricing tests

ROLLUP = UsageWorkloadDaily._meta.db_table


def _totals(books: Books, user=None) -> list[tuple[str, str, Decimal]]:
    return [
        (view.tenant.slug, view.currency, view.total)
        for view in statements_for(user or books.finance, MONTH)
    ]


def _rollup_reads(captured: CaptureQueriesContext) -> list[str]:
    """The queries that read the usage rollup's rows (pricing), not just its newest id."""
    return [
        query["sql"]
        for query in captured.captured_queries
        if ROLLUP in query["sql"] and "MAX(id)" not in query["sql"]
    ]


@pytest.mark.django_db
def test_an_open_months_totals_are_stored_and_priced_again_when_usage_or_prices_change(
    books: Books,
) -> None:
    slug = books.tenant.slug
    books.allocate("a100-80gb-whole", BEGIN + DAY, 2)
    card(books, "2.00", MONTH)
    books.collect()

    with CaptureQueriesContext(connection) as first:
        assert _totals(books) == [(slug, "EUR", Decimal("4.00"))]
    assert _rollup_reads(first)
    [stored] = OpenMonthTotal.objects.all()
    assert (stored.tenant, stored.basis, stored.total, stored.currencies) == (
        books.tenant, "reserved", Decimal("4.00"), "EUR",
    )  # fmt: skip

    # Read again with nothing changed: the stored total, the usage not read.
    OpenMonthTotal.objects.update(total=Decimal("123.45"))
    with CaptureQueriesContext(connection) as again:
        assert _totals(books) == [(slug, "EUR", Decimal("123.45"))]
    assert not _rollup_reads(again)
    assert len(again) < len(first)

    # More usage collected: priced again.
    books.allocate("a100-80gb-whole", BEGIN + 2 * DAY, 1)
    books.collect()
    assert _totals(books) == [(slug, "EUR", Decimal("6.00"))]

    # A new price: priced again.
    card(books, "5.00", MONTH, backend="whole")
    assert _totals(books) == [(slug, "EUR", Decimal("15.00"))]

    # A window done after another cluster's newer rows moves the inputs too (it is counted
    # in the transaction that writes its usage).
    before = pricing_inputs("reserved")
    OpenMonthTotal.objects.update(total=Decimal("123.45"))
    MeteringState.objects.update(windows_done=F("windows_done") + 1)
    assert pricing_inputs("reserved") != before
    assert _totals(books) == [(slug, "EUR", Decimal("15.00"))]  # priced again

    # Older than REPRICE_AFTER (a change the inputs do not see): priced again.
    OpenMonthTotal.objects.update(total=Decimal("123.45"))
    assert _totals(books) == [(slug, "EUR", Decimal("123.45"))]
    stale = timezone.now() - REPRICE_AFTER - timedelta(seconds=1)
    OpenMonthTotal.objects.update(priced_at=stale)
    assert _totals(books) == [(slug, "EUR", Decimal("15.00"))]
    assert OpenMonthTotal.objects.get().priced_at > stale


@pytest.mark.django_db
def test_a_stored_total_in_two_currencies_is_explained_in_each_readers_language(
    books: Books,
) -> None:
    two_currencies(books)

    [english] = statements_for(books.finance, MONTH)
    with translation.override("zh-hans"):
        [chinese] = statements_for(books.finance, MONTH)

    assert OpenMonthTotal.objects.get().currencies == "EUR,USD"
    assert "EUR and USD" in english.problem
    assert "EUR 和 USD" in chinese.problem
    for view in (english, chinese):
        assert (view.currency, view.total) == ("", Decimal("0.00"))


@pytest.mark.django_db
def test_a_leads_reading_stores_their_tenants_totals_and_finance_prices_only_the_rest(
    books: Books, lead
) -> None:
    books.allocate("a100-80gb-whole", BEGIN + DAY, 2)
    card(books, "2.00", MONTH)
    books.collect()
    _usage(books, BEGIN, tenants=1)  # two GPU-eq-hours in a new tenant
    other = Tenant.objects.get(slug=f"close-{BEGIN:%m}-0")
    Membership.objects.filter(user=lead).delete()
    membership_set(actor=None, tenant=other, user=lead, role=MemberRole.LEAD)

    assert _totals(books, lead) == [(other.slug, "EUR", Decimal("4.00"))]
    assert list(OpenMonthTotal.objects.values_list("tenant", flat=True)) == [other.pk]

    OpenMonthTotal.objects.update(total=Decimal("7.00"))  # so its reading shows
    assert sorted(_totals(books)) == sorted([
        (books.tenant.slug, "EUR", Decimal("4.00")),
        (other.slug, "EUR", Decimal("7.00")),
    ])  # fmt: skip
    assert OpenMonthTotal.objects.count() == 2


@pytest.mark.django_db
def test_the_periodic_task_prices_last_months_totals_while_it_is_open(books: Books) -> None:
    books.allocate("a100-80gb-whole", BEGIN + DAY, 2)
    card(books, "2.00", MONTH)
    books.collect()

    assert price_open_months.apply().get() == 1
    [stored] = OpenMonthTotal.objects.all()
    assert (stored.month, stored.total) == (MONTH, Decimal("4.00"))
    assert price_open_months.apply().get() == 1  # current: the same row, not priced again
    assert OpenMonthTotal.objects.get().priced_at == stored.priced_at

    period_close(actor=books.finance, month=MONTH)
    OpenMonthTotal.objects.all().delete()
    assert price_open_months.apply().get() == 0
    assert not OpenMonthTotal.objects.exists()
