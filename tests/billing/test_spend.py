"""Spend per tenant per month: the chargeback page's chart and table, and `GET spend/`.

Closed months are the stored statements' totals; open months are priced from the rollups (the
monthly one, or the daily one where a price changes within the month) and rounded once per
tenant and month (README, "Spend per month"). Usage comes from the allocation ledger as in
test_pages (allocations moved into last month, collected by the real metering code with a
metrics source that sees no pods).
"""

import io
import json
import re
from datetime import date
from decimal import Decimal
from html import unescape
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import User
from portal.billing.models import Period, PeriodState, Statement
from portal.billing.pricing import current_month
from portal.billing.selectors import statements_for
from portal.billing.services import period_close, period_reopen, rate_card_create
from portal.billing.spend import (
    OTHER,
    Spend,
    SpendRow,
    TenantName,
    shift,
    spend_charts,
    spend_charts_for,
    spend_for,
)
from portal.catalog.models import GpuModel, SharingBackend
from tenants.models import MemberRole, Tenant
from tenants.services import membership_set, quota_set, tenant_update
from tests.billing.test_pages import PERIOD, Ledger, ledger, month  # noqa: F401  (fixtures)
from tests.billing.test_pricing import BEGIN, DAY, MONTH
from tests.loaded import page_loaded

API = "/api/v1/spend/"
MIG = "a100-80gb-mig-1g-10gb"
WHOLE = "a100-80gb-whole"


def spend(client: Client, **params: str) -> Any:
    response = client.get(API, params)
    assert response.status_code == 200, response.content
    return response.json()


def totals_of(answer: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(row["period"], row["tenant"]): row["total"] for row in answer["results"]}


def chart_data(html: str) -> dict[str, Any]:
    match = re.search(r'<div id="usage-data" data-json="([^"]*)" hidden>', html)
    assert match, "no chart data"
    data: dict[str, Any] = json.loads(unescape(match.group(1)))
    return data


# Closed months: the statements' totals


def test_a_closed_month_charts_its_statements_totals(
    client_for,
    month: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
) -> None:
    period_close(actor=finance_user, month=MONTH)
    statements = {view.tenant.slug: view.total for view in statements_for(finance_user, MONTH)}
    assert statements == {"vision": Decimal("22.86"), "nlp": Decimal("10.00")}

    rows = spend_for(finance_user, MONTH, MONTH).rows
    answer = spend(client_for(finance_user), **{"from": PERIOD, "to": PERIOD})
    html = page_loaded(client_for(finance_user), f"/chargeback/?period={PERIOD}")

    assert {row.tenant.slug: row.total for row in rows} == statements
    assert all(row.final and not row.approximate for row in rows)
    assert totals_of(answer) == {(PERIOD, "vision"): "22.86", (PERIOD, "nlp"): "10.00"}
    assert answer["months"] == [{"period": PERIOD, "final": True}]
    assert answer["totals"] == [{"period": PERIOD, "currency": "EUR", "total": "32.86"}]
    # The page's table of the chart: the biggest tenant first, then the month's total.
    row = re.search(rf'data-testid="spend-EUR-{PERIOD}">(.*?)</tr>', html, re.S)
    assert row
    assert re.findall(r">([^<>]+)</t[dh]>", row.group(1)) == [
        PERIOD, "22.86", "10.00", "32.86", "final",
    ]  # fmt: skip
    table = chart_data(html)["tables"][0]
    assert table["labels"][1:3] == ["Computer Vision Lab", "Language Models Team"]
    assert table["chart"]["kind"] == "stacked-bars"
    assert len(table["rows"]) == 12  # the twelve months up to the page's month
    assert table["rows"][-1][0] == PERIOD


# Open months: priced from the rollup, rounded once per tenant and month


def test_an_open_month_is_its_exact_price_rounded_once_and_becomes_the_statement_once_closed(
    client_for,
    ledger: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
    admin_user: User,
) -> None:
    # Two users' 1/7 slices for an hour each at 2.00: each statement line is 1/7 x 2.00 = 0.29
    # (rounded), the statement 0.58; the month's exact price is 4/7 = 0.5714..., charted 0.57.
    tenant, first = ledger.tenant("vision", "CC-4100")
    _, second = ledger.tenant("vision", "CC-4100")
    ledger.allocate(tenant, first, MIG, BEGIN + DAY, 1)
    ledger.allocate(tenant, second, MIG, BEGIN + DAY, 1)
    ledger.collect()
    client = client_for(finance_user)

    [statement] = statements_for(finance_user, MONTH)
    [row] = spend_for(finance_user, MONTH, MONTH).rows
    assert (statement.total, row.total, row.approximate) == (
        Decimal("0.58"), Decimal("0.57"), True,
    )  # fmt: skip
    answer = spend(client, **{"from": PERIOD, "to": PERIOD})
    assert answer["results"][0] | {"tenant_name": ""} == {
        "period": PERIOD, "tenant": "vision", "tenant_name": "", "cost_centre": "CC-4100",
        "currency": "EUR", "total": "0.57", "final": False, "approximate": True, "problem": "",
    }  # fmt: skip
    html = page_loaded(client, f"/chargeback/?period={PERIOD}")
    assert re.search(rf'data-testid="spend-EUR-{PERIOD}">.*?0\.57.*?provisional, approx\.', html)

    period_close(actor=finance_user, month=MONTH)
    assert totals_of(spend(client, **{"from": PERIOD, "to": PERIOD})) == {
        (PERIOD, "vision"): "0.58"
    }
    period_reopen(actor=admin_user, month=MONTH, reason="check")
    assert totals_of(spend(client, **{"from": PERIOD, "to": PERIOD})) == {
        (PERIOD, "vision"): "0.57"
    }


def test_open_months_equal_the_statements_when_every_line_is_in_whole_cents(
    month: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
) -> None:
    statements = {view.tenant.slug: view.total for view in statements_for(finance_user, MONTH)}
    rows = spend_for(finance_user, shift(MONTH, -11), MONTH).rows

    assert {row.tenant.slug: row.total for row in rows if row.month == MONTH} == statements
    assert {row.month for row in rows} == {MONTH}  # no usage in the other months


def test_a_month_a_new_price_takes_effect_within_is_priced_by_day_as_its_statement(
    ledger: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
) -> None:
    # 2 hours at 2.00 before the new card, 3 hours at 5.00 from its first day: 19.00. The
    # month's monthly row alone would price all 5 hours at one card.
    tenant, member = ledger.tenant("vision", "CC-4100")
    ledger.allocate(tenant, member, WHOLE, BEGIN + DAY, 2)
    ledger.allocate(tenant, member, WHOLE, BEGIN + 20 * DAY, 3)
    rate_card_create(
        actor=finance_user, gpu_model=GpuModel.objects.get(slug="a100-80gb"), backend=None,
        currency="EUR", price_per_gpu_eq_hour="5.00", effective_from=MONTH + 10 * DAY,
    )  # fmt: skip
    ledger.collect()

    [statement] = statements_for(finance_user, MONTH)
    [row] = spend_for(finance_user, shift(MONTH, -1), MONTH).rows

    assert (row.month, row.total, statement.total) == (MONTH, Decimal("19.00"), Decimal("19.00"))


def test_every_tenants_open_months_are_kept_until_the_usage_or_the_rate_cards_change(
    ledger: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
    lead: User,
) -> None:
    tenant, member = ledger.tenant("vision", "CC-4100")
    membership_set(actor=None, tenant=tenant, user=lead, role=MemberRole.LEAD)
    ledger.allocate(tenant, member, WHOLE, BEGIN + DAY, 2)
    ledger.collect()

    def priced(user: User) -> tuple[Decimal, bool]:
        with CaptureQueriesContext(connection) as read:
            [row] = spend_for(user, MONTH, MONTH).rows
        rollups = [q for q in read.captured_queries if "GROUP BY" in q["sql"]]
        return row.total, bool(rollups)

    assert priced(finance_user) == (Decimal("4.00"), True)  # 2 hours at 2.00
    assert priced(finance_user) == (Decimal("4.00"), False)  # kept
    assert priced(lead) == (Decimal("4.00"), True)  # one tenant's: priced each time
    assert priced(lead) == (Decimal("4.00"), True)

    rate_card_create(
        actor=finance_user, gpu_model=GpuModel.objects.get(slug="a100-80gb"), backend=None,
        currency="EUR", price_per_gpu_eq_hour="5.00", effective_from=MONTH - DAY,
    )  # fmt: skip
    assert priced(finance_user) == (Decimal("10.00"), True)
    ledger.allocate(tenant, member, WHOLE, BEGIN + 2 * DAY, 1)
    ledger.collect()
    assert priced(finance_user) == (Decimal("15.00"), True)
    assert priced(finance_user) == (Decimal("15.00"), False)
    # The rows carry the tenant's cost centre: a tenant changed reads them again.
    tenant_update(actor=finance_user, tenant=tenant, cost_centre="CC-9900")
    assert priced(finance_user) == (Decimal("15.00"), True)
    [row] = spend_for(finance_user, MONTH, MONTH, cost_centre="CC-9900").rows
    assert row.tenant.slug == "vision"


def test_a_tenant_whose_rates_mix_currencies_is_not_charted_but_named(
    client_for,
    ledger: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
) -> None:
    vision, member = ledger.tenant("vision", "CC-4100")
    nlp, other = ledger.tenant("nlp", "CC-4200")
    ledger.allocate(vision, member, MIG, BEGIN + DAY, 7)
    ledger.allocate(vision, member, WHOLE, BEGIN + DAY, 1)
    ledger.allocate(nlp, other, WHOLE, BEGIN + DAY, 1)
    rate_card_create(
        actor=finance_user, gpu_model=GpuModel.objects.get(slug="a100-80gb"),
        backend=SharingBackend.objects.get(slug="mig"), currency="USD",
        price_per_gpu_eq_hour="3.00", effective_from=MONTH - 40 * DAY,
    )  # fmt: skip
    ledger.collect()

    rows = {row.tenant.slug: row for row in spend_for(finance_user, MONTH, MONTH).rows}
    html = page_loaded(client_for(finance_user), f"/chargeback/?period={PERIOD}")

    assert "EUR and USD" in rows["vision"].problem
    assert (rows["vision"].total, rows["vision"].currency) == (Decimal("0.00"), "")
    assert (rows["nlp"].total, rows["nlp"].currency) == (Decimal("2.00"), "EUR")
    assert [table["name"] for table in chart_data(html)["tables"]] == ["spend-EUR"]
    assert re.search(r'data-testid="spend-problem">Not charted: .*vision.*EUR and USD', html)


def test_usage_no_rate_card_prices_is_a_row_at_no_charge_as_on_the_statement(
    ledger: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
    admin_user: User,
) -> None:
    tenant, member = ledger.tenant("vision", "CC-4100")
    h100 = GpuModel.objects.get(slug="h100-80gb")
    quota_set(actor=admin_user, tenant=tenant, gpu_model=h100, gpu_eq=8)
    ledger.allocate(tenant, member, "h100-80gb-whole", BEGIN + DAY, 3)  # no H100 card
    ledger.collect()

    [statement] = statements_for(finance_user, MONTH)
    [row] = spend_for(finance_user, MONTH, MONTH).rows

    assert (statement.total, statement.currency) == (Decimal("0.00"), "")
    assert (row.tenant.slug, row.total, row.currency, row.problem) == (
        tenant.slug,
        Decimal("0.00"),
        "",
        "",
    )
    assert spend_charts(spend_for(finance_user, MONTH, MONTH)) == []


# The chart's series: the biggest tenants, the others summed; a chart per currency


def rows_of(
    totals: dict[str, tuple[str, str]], months: list[date], *, final: bool = True
) -> list[SpendRow]:
    return [
        SpendRow(first, TenantName(0, slug, slug.upper()), "CC", currency, Decimal(total), final)
        for slug, (total, currency) in totals.items()
        for first in months
    ]


def test_the_chart_shows_the_biggest_tenants_and_sums_the_others() -> None:
    months = [date(2026, 1, 1), date(2026, 2, 1)]
    rows = rows_of(
        {"a": ("1.00", "EUR"), "b": ("5.00", "EUR"), "c": ("3.00", "EUR"), "d": ("2.00", "EUR")},
        months,
    )

    [chart] = spend_charts(Spend(months, set(months), rows), top=2)

    assert chart.series == [("b", "B"), ("c", "C"), (OTHER, "Other tenants (2)")]
    assert chart.rows()[0] == ["2026-01", "5.00", "3.00", "3.00", "11.00", "final"]
    # One tenant more than the top is shown itself, not as "other tenants (1)".
    [all_shown] = spend_charts(Spend(months, set(), rows), top=3)
    assert [key for key, _ in all_shown.series] == ["b", "c", "d", "a"]
    assert all_shown.rows()[1][-1] == "provisional, approx."


def test_tenants_in_two_currencies_get_a_chart_each() -> None:
    months = [date(2026, 1, 1)]
    rows = rows_of({"a": ("1.00", "EUR"), "b": ("2.00", "USD"), "c": ("0.00", "")}, months)

    charts = spend_charts(Spend(months, set(months), rows))

    assert [(chart.currency, chart.series) for chart in charts] == [
        ("EUR", [("a", "A")]),
        ("USD", [("b", "B")]),
    ]


# Who sees what


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("developer", []),
        ("outsider", []),
        ("lead", ["vision"]),
        ("finance_user", ["nlp", "vision"]),
        ("admin_user", ["nlp", "vision"]),
    ],
)
def test_each_persona_sees_the_spend_of_the_statements_it_may(
    request: pytest.FixtureRequest,
    client_for,
    month: Ledger,  # noqa: F811  (the fixture)
    persona: str,
    expected: list[str],
) -> None:
    client = client_for(request.getfixturevalue(persona))

    answer = spend(client)
    page = client.get(f"/chargeback/?period={PERIOD}")

    assert [row["tenant"] for row in answer["results"]] == expected
    assert answer["to"] == f"{current_month():%Y-%m}"
    assert answer["from"] == f"{shift(current_month(), -11):%Y-%m}"
    if not expected:
        assert page.status_code == 404
        return
    labels = chart_data(page_loaded(client, f"/chargeback/?period={PERIOD}"))["tables"][0]["labels"]
    names = {"vision": "Computer Vision Lab", "nlp": "Language Models Team"}
    assert sorted(labels[1:-2]) == sorted(names[slug] for slug in expected)


@pytest.mark.parametrize(
    ("persona", "status"),
    [("developer", 404), ("outsider", 404), ("lead", 404), ("finance_user", 200)],
)
def test_a_named_tenant_the_caller_may_not_see_is_not_found(
    request: pytest.FixtureRequest,
    client_for,
    month: Ledger,  # noqa: F811  (the fixture)
    persona: str,
    status: int,
) -> None:
    response = client_for(request.getfixturevalue(persona)).get(API, {"tenant": "nlp"})

    assert response.status_code == status
    if status == 404:
        assert response.json()["error"]["code"] == "not_found"


def test_anonymous_callers_are_refused(db) -> None:
    assert Client().get(API).status_code == 401


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "2026-13"}, "from"),
        ({"to": "last"}, "to"),
        ({"from": "2026-05", "to": "2026-04"}, "to"),
        ({"from": "2020-01", "to": "2026-04"}, "from"),
        ({"tenant": "no\x00pe"}, "tenant"),
    ],
)
def test_bad_ranges_are_refused_naming_the_field(
    client_for, finance_user: User, params: dict[str, str], field: str
) -> None:
    response = client_for(finance_user).get(API, params)

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]


def test_a_cost_centre_narrows_the_spend(
    client_for,
    month: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
) -> None:
    answer = spend(client_for(finance_user), cost_centre="CC-4200")
    html = page_loaded(
        client_for(finance_user), f"/chargeback/?period={PERIOD}&cost_centre=CC-4200"
    )

    assert [row["tenant"] for row in answer["results"]] == ["nlp"]
    assert chart_data(html)["tables"][0]["labels"][1:-2] == ["Language Models Team"]


def test_an_htmx_month_change_brings_the_chart_data_with_it(
    client_for,
    month: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
) -> None:
    client = client_for(finance_user)
    response = client.get(f"/chargeback/?period={PERIOD}", headers={"HX-Request": "true"})

    # The swapped part loads the chart of that month in its place, which brings its data.
    assert response.text.lstrip().startswith('<div id="chargeback"')
    section = f"/chargeback/sections/spend/?period={PERIOD}&amp;sort=tenant"
    assert f'hx-get="{section}" hx-trigger="load"' in response.text
    chart = client.get(section.replace("&amp;", "&"), headers={"HX-Request": "true"})
    assert chart_data(chart.text)["tables"][0]["rows"][-1][0] == PERIOD


def test_the_schema_documents_spend(db) -> None:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json",
                 stdout=out)  # fmt: skip
    operation = json.loads(out.getvalue())["paths"]["/api/v1/spend/"]["get"]

    assert {param["name"] for param in operation["parameters"]} >= {
        "from", "to", "tenant", "cost_centre", "page",
    }  # fmt: skip
    page = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert page.endswith("/SpendPage")


# The page's chart: the closed months summed in the database, as the rows would chart them


def closed_months_of(months: list[date], tenants: list[Tenant], finance: User) -> None:
    """Closed months with a stored statement per tenant (bulk inserts: the chart reads what a
    close stored): mostly EUR, some USD, one unpriced; totals that tie and differ."""
    for offset, first in enumerate(months):
        period = Period.objects.create(
            month=first, state=PeriodState.CLOSED, basis="reserved", closed_by=finance
        )
        Statement.objects.bulk_create(
            Statement(
                period=period, tenant=tenant, cost_centre=tenant.cost_centre,
                currency="" if number == 5 else "USD" if number % 4 == 3 else "EUR",
                basis="reserved", total=Decimal(f"{(number * 7 + offset) % 11}.25"),
            )
            for number, tenant in enumerate(tenants)
        )  # fmt: skip


@pytest.mark.parametrize("persona", ["finance_user", "lead"])
@pytest.mark.parametrize("cost_centre", [None, "CC-1"])
def test_the_pages_chart_sums_closed_months_in_the_database_as_the_rows_would(
    request: pytest.FixtureRequest,
    month: Ledger,  # noqa: F811  (the fixture: usage in the open MONTH)
    finance_user: User,
    persona: str,
    cost_centre: str | None,
) -> None:
    vision, nlp = Tenant.objects.get(slug="vision"), Tenant.objects.get(slug="nlp")
    more = [month.tenant(f"team-{number:02d}", f"CC-{number % 3}")[0] for number in range(14)]
    user: User = request.getfixturevalue(persona)
    for tenant in more[:3]:  # the lead leads vision and three more
        membership_set(actor=None, tenant=tenant, user=user, role=MemberRole.LEAD)
    closed_months_of([shift(MONTH, -2), shift(MONTH, -1)], [vision, nlp, *more], finance_user)
    first = shift(MONTH, -11)

    charts, problems = spend_charts_for(user, first, MONTH, cost_centre=cost_centre)
    rows = spend_for(user, first, MONTH, cost_centre=cost_centre)

    assert charts == spend_charts(rows)
    assert problems == [row for row in rows.rows if row.problem]
    # The lead's one tenant of CC-1 (team-01) is charged in USD.
    assert [chart.currency for chart in charts] == (
        ["USD"] if persona == "lead" and cost_centre else ["EUR", "USD"]
    )
    if persona == "finance_user" and cost_centre is None:
        eur = charts[0]
        assert len(eur.series) == 9  # 8 tenants and the others
        assert eur.series[-1][0] == OTHER
        assert eur.total(shift(MONTH, -1)) == sum(
            Statement.objects.filter(period__month=shift(MONTH, -1), currency="EUR").values_list(
                "total", flat=True
            ),
            Decimal(0),
        )


def test_every_tenants_closed_months_are_summed_once_until_a_month_or_a_tenant_changes(
    month: Ledger,  # noqa: F811  (the fixture: usage in the open MONTH)
    finance_user: User,
    lead: User,
    admin_user: User,
) -> None:
    vision = Tenant.objects.get(slug="vision")
    membership_set(actor=None, tenant=vision, user=lead, role=MemberRole.LEAD)
    period_close(actor=finance_user, month=MONTH)
    first = shift(MONTH, -11)

    def charted(user: User) -> tuple[dict[str, Decimal], int]:
        with CaptureQueriesContext(connection) as read:
            charts, _problems = spend_charts_for(user, first, MONTH)
        summed = [q for q in read.captured_queries if '"billing_statement"' in q["sql"]]
        [chart] = charts
        return {label: chart.cells[MONTH][key] for key, label in chart.series}, len(summed)

    both = {"Computer Vision Lab": Decimal("22.86"), "Language Models Team": Decimal("10.00")}
    assert charted(finance_user) == (both, 2)  # the tenants' sums, then the charted months'
    assert charted(finance_user) == (both, 0)  # kept
    assert charted(lead) == ({"Computer Vision Lab": Decimal("22.86")}, 2)  # some tenants'
    assert charted(lead) == ({"Computer Vision Lab": Decimal("22.86")}, 2)  # read each time
    # The rows carry the tenants' names: a tenant changed reads them again.
    tenant_update(actor=finance_user, tenant=vision, name="Vision")
    renamed = {"Vision": Decimal("22.86"), "Language Models Team": Decimal("10.00")}
    # The tenants charted are part of the question: another ranking is summed for itself.
    for top in (0, 1):
        charts, _problems = spend_charts_for(finance_user, first, MONTH, top=top)
        assert charts == spend_charts(spend_for(finance_user, first, MONTH), top=top), top
    assert charted(finance_user) == (renamed, 0)  # kept: as charted with the top one (both)
    # Reopened, the month is priced from the rollups; closed again, its new statements are read.
    period_reopen(actor=admin_user, month=MONTH, reason="late usage")
    assert charted(finance_user)[1] == 0  # no closed month left
    period_close(actor=finance_user, month=MONTH)
    assert charted(finance_user) == (renamed, 2)
    assert charted(finance_user) == (renamed, 0)


# Query counts: neither provisional statements nor spend cost queries per tenant

# The finance page of an open month: session, user, cost centres, periods, watermarks, what
# the totals are priced from and the tenants with usage whose stored total is not current; on
# the first reading rate cards, the month's grouped usage and offerings and the store of the
# totals; then a page of the stored totals, their count and totals per cost centre; then the
# spend chart's periods, what its open months are priced from, rate cards, rollups (monthly
# and daily rows, by sharing backend) and tenants (the last three only when what they are
# priced from changed: portal/metering/kept.py), and the budgets of the *Budget used* column.
# The statements list and `spend/` read their share of those. The same with 3 tenants as with
# 30.
PAGE_QUERIES = 22
STORED_PAGE_QUERIES = 17
STATEMENTS_QUERIES = 8
SPEND_QUERIES = 8


@pytest.mark.parametrize("tenants", [3, 30])
def test_open_month_pages_and_lists_take_a_bounded_number_of_queries(
    client_for,
    ledger: Ledger,  # noqa: F811  (the fixture)
    finance_user: User,
    django_assert_max_num_queries,
    tenants: int,
) -> None:
    for index in range(tenants):
        tenant, member = ledger.tenant(f"team-{index:02d}", f"CC-{index % 4}")
        ledger.allocate(tenant, member, WHOLE, BEGIN + DAY, 1 + index % 3)
        ledger.allocate(tenant, member, MIG, BEGIN + 2 * DAY, 2)
    ledger.collect()
    client = client_for(finance_user)

    with django_assert_max_num_queries(PAGE_QUERIES):
        page = client.get(f"/chargeback/?period={PERIOD}")
    with django_assert_max_num_queries(STORED_PAGE_QUERIES):
        again = client.get(f"/chargeback/?period={PERIOD}")
    assert again.text.count('<span class="state provisional">provisional</span>') == tenants
    with django_assert_max_num_queries(STATEMENTS_QUERIES):
        statements = client.get("/api/v1/statements/", {"period": PERIOD, "page_size": 100})
    with django_assert_max_num_queries(SPEND_QUERIES):
        answer = spend(client, page_size="100")
    # The page's sections, loaded after it.
    for name in ("centre-totals", "spend"):
        with django_assert_max_num_queries(PAGE_QUERIES):
            section = client.get(
                f"/chargeback/sections/{name}/?period={PERIOD}", headers={"HX-Request": "true"}
            )
        assert section.status_code == 200

    assert page.text.count('<span class="state provisional">provisional</span>') == tenants
    assert statements.json()["count"] == tenants
    assert answer["count"] == tenants
    labels = chart_data(section.text)["tables"][0]["labels"]
    assert len(labels) == 3 + min(tenants, 9)  # month, 8 tenants and "other" at most, total, status
