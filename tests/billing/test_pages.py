"""The chargeback pages: a month's statements per persona, sorting and filtering, closing and
reopening from the page, one statement with its lines, history and CSV, and the rate cards.

Usage comes from the allocation ledger as in test_pricing: allocations made through the
services, moved into last month, their hours collected with a metrics source that sees no pods.
"""

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.template import engines
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import translation

from portal.accounts.models import User
from portal.accounts.services import user_create
from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.billing.models import Period, PeriodState, RateCard, Statement
from portal.billing.pricing import current_month
from portal.billing.selectors import LINE_COLUMNS as CSV_COLUMNS
from portal.billing.services import period_close, period_reopen, rate_card_create
from portal.catalog.models import GpuModel, Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.core.models import AuditEvent
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import MeteringState
from tenants.models import MemberRole, Tenant
from tenants.services import membership_set, quota_set, tenant_create, tenant_update
from tests.billing.test_pricing import BEGIN, DAY, END, MONTH, NoPods
from tests.loaded import page_loaded
from tests.sheets import xlsx_rows

PERIOD = f"{MONTH:%Y-%m}"
# A closed month's page: session, user, cost centres, the last closed month, the watermarks, the
# month's period (and who closed it), a page of statements, their count, the page's budgets, the
# totals per cost centre; the chart's periods, what its open months are priced from (kept
# until that changes: portal/metering/kept.py), the rate cards, the rollups of its open months
# (monthly rows where no card takes effect within the month, daily rows where one does) and its
# two sums.
CLOSED_PAGE_QUERIES = 17


@dataclass
class Ledger:
    cluster: Cluster
    allocate: Callable[..., GpuRequest]
    collect: Callable[[], None]
    tenant: Callable[[str, str], tuple[Tenant, User]]


@pytest.fixture
def ledger(admin_user: User, finance_user: User, catalog: dict[str, Offering]) -> Ledger:
    """Allocations in last month for any tenant, and a price of 2.00 EUR per A100-eq-hour."""
    cluster = cluster_create(actor=None, name="east")
    metering_begin(cluster=cluster, at=BEGIN)
    model = GpuModel.objects.get(slug="a100-80gb")
    rate_card_create(
        actor=finance_user, gpu_model=model, backend=None, currency="EUR",
        price_per_gpu_eq_hour="2.00", effective_from=MONTH - 40 * DAY,
    )  # fmt: skip
    hours: set[datetime] = set()
    members = iter(range(1000))

    def tenant(slug: str, cost_centre: str) -> tuple[Tenant, User]:
        made = Tenant.objects.filter(slug=slug).first() or tenant_create(
            actor=None, slug=slug, name=slug.capitalize(), cost_centre=cost_centre
        )
        quota_set(actor=admin_user, tenant=made, gpu_model=model, gpu_eq=100)
        tenant_update(actor=admin_user, tenant=made, auto_approve_gpu_eq="10", auto_approve_hours=8)
        member = user_create(actor=None, username=f"{slug}-member-{next(members)}")
        membership_set(actor=None, tenant=made, user=member, role=MemberRole.DEVELOPER)
        return made, member

    def allocate(
        tenant: Tenant, user: User, offering: str, starts: datetime, hours_held: float
    ) -> GpuRequest:
        allocation = gpu_request_submit(
            actor=user, tenant=tenant, offering=catalog[offering], count=1
        )
        ends = starts + timedelta(hours=hours_held)
        GpuRequest.objects.filter(pk=allocation.pk).update(starts_at=starts, ends_at=ends)
        moment = hour_floor(starts)
        while moment < ends:
            hours.add(moment)
            moment += timedelta(hours=1)
        return allocation

    def collect() -> None:
        for hour in sorted(hours):
            window_collect(cluster, hour, NoPods())
        MeteringState.objects.filter(cluster=cluster).update(complete_until=END)

    return Ledger(cluster, allocate, collect, tenant)


@pytest.fixture
def month(ledger: Ledger, tenant_a: Tenant, tenant_b: Tenant, lead, developer, outsider) -> Ledger:
    """Last month: vision (CC-4100) 10 whole A100-hours and 10 hours of a 1/7 slice (20.00 +
    2.86 EUR); nlp (CC-4200) 5 whole A100-hours (10.00 EUR)."""
    ledger.tenant("vision", "CC-4100")
    ledger.tenant("nlp", "CC-4200")
    ledger.allocate(tenant_a, developer, "a100-80gb-whole", BEGIN + DAY, 10)
    ledger.allocate(tenant_a, developer, "a100-80gb-mig-1g-10gb", BEGIN + DAY, 10)
    ledger.allocate(tenant_b, outsider, "a100-80gb-whole", BEGIN + 2 * DAY, 5)
    ledger.collect()
    return ledger


def ids_with(html: str, prefix: str) -> list[str]:
    return re.findall(rf'data-testid="{prefix}([^"]+)"', html)


def cell(html: str, testid: str) -> str:
    match = re.search(rf'data-testid="{testid}"[^>]*>([^<]*)<', html)
    assert match, testid
    return match.group(1).strip()


# Who sees what


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        ("developer", None),
        ("outsider", None),
        ("lead", ["vision"]),
        ("finance_user", ["nlp", "vision"]),
        ("admin_user", ["nlp", "vision"]),
    ],
)
def test_each_persona_sees_the_statements_it_may(
    request: pytest.FixtureRequest, client_for, month: Ledger, persona: str, expected
) -> None:
    client = client_for(request.getfixturevalue(persona))

    response = client.get(f"/chargeback/?period={PERIOD}")

    if expected is None:
        assert response.status_code == 404
        return
    assert response.status_code == 200
    assert ids_with(response.text, "statement-") == expected
    assert ("Close this month" in response.text) == (persona in ("finance_user", "admin_user"))
    assert "Reopen" not in response.text  # the month is open


def test_statements_are_provisional_until_closed_with_totals_per_cost_centre(
    client_for, month: Ledger, finance_user
) -> None:
    html = page_loaded(client_for(finance_user), f"/chargeback/?period={PERIOD}")

    assert cell(html, "total-vision") == "22.86"
    assert cell(html, "total-nlp") == "10.00"
    assert html.count('<span class="state provisional">provisional</span>') == 2
    assert re.search(r'data-testid="centre-CC-4100">.*?22\.86', html)
    assert re.search(r'data-testid="centre-CC-4200">.*?10\.00', html)
    assert re.search(r'data-testid="grand-total-EUR">.*?32\.86', html, re.S)


def test_chargeback_shows_this_month_so_far_by_default(client_for, finance_user) -> None:
    # Finance lands on Home (tests/core/test_home.py); its spend panel links here.
    response = client_for(finance_user).get("/chargeback/")

    assert response.status_code == 200
    assert f"Statements of {current_month():%Y-%m} so far" in response.text
    assert "Close this month" not in response.text  # a running month is not closed
    assert "No month is closed yet." in response.text


@pytest.mark.parametrize(
    ("query", "order"),
    [
        ("sort=tenant", ["nlp", "vision"]),
        ("sort=-tenant", ["vision", "nlp"]),
        ("sort=total", ["nlp", "vision"]),
        ("sort=-total", ["vision", "nlp"]),
        ("sort=-cost_centre", ["nlp", "vision"]),
        ("cost_centre=CC-4100", ["vision"]),
        ("cost_centre=CC-4200&sort=-total", ["nlp"]),
    ],
)
def test_statements_sort_and_filter_on_the_server(
    client_for, month: Ledger, finance_user, query: str, order: list[str]
) -> None:
    response = client_for(finance_user).get(f"/chargeback/?period={PERIOD}&{query}")

    assert response.status_code == 200
    assert ids_with(response.text, "statement-") == order


def test_htmx_gets_the_listing_fragment(client_for, month: Ledger, finance_user) -> None:
    response = client_for(finance_user).get(
        f"/chargeback/?period={PERIOD}&sort=-total", headers={"HX-Request": "true"}
    )

    assert response.status_code == 200
    assert response.text.lstrip().startswith('<div id="chargeback"')
    assert "<html" not in response.text
    assert ids_with(response.text, "statement-") == ["vision", "nlp"]


@pytest.mark.parametrize(
    ("query", "field_error"),
    [
        ("period=2026-13", "Month: Give a month as YYYY-MM, e.g. 2026-10."),
        ("period=last", "Month: Give a month as YYYY-MM, e.g. 2026-10."),
        ("sort=x", "Sort by: Select a valid choice. x is not one of the available choices."),
        ("cost_centre=CC-9999", "Cost centre: Select a valid choice."),
    ],
)
def test_bad_input_is_refused_beside_the_field(
    client_for, finance_user, query: str, field_error: str
) -> None:
    response = client_for(finance_user).get(f"/chargeback/?{query}")

    assert response.status_code == 400
    assert f'<p class="field-error" role="alert">{field_error}' in response.text
    assert 'data-testid="statements"' not in response.text


def test_a_lead_sees_only_the_cost_centres_of_their_tenants(
    client_for, month: Ledger, lead
) -> None:
    response = client_for(lead).get(f"/chargeback/?period={PERIOD}&cost_centre=CC-4200")

    assert response.status_code == 400  # not a cost centre the lead sees


# A closed month of many tenants: a page of statements, the totals of all of them


def closed_month_of(tenants: int, finance: User) -> list[Statement]:
    """A closed month with a stored statement for each of `tenants` tenants (bulk inserts: the
    pages read what the close stored, whatever made it): tenant k in cost centre CC-(k % 3),
    charged k + 0.50 EUR."""
    period = Period.objects.create(
        month=MONTH, state=PeriodState.CLOSED, basis="reserved", closed_at=END, closed_by=finance
    )
    made = Tenant.objects.bulk_create(
        Tenant(slug=f"t{number:03d}", name=f"T{number:03d}", cost_centre=f"CC-{number % 3}")
        for number in range(tenants)
    )
    return Statement.objects.bulk_create(
        Statement(period=period, tenant=tenant, cost_centre=tenant.cost_centre, currency="EUR",
                  basis="reserved", total=Decimal(number) + Decimal("0.50"))
        for number, tenant in enumerate(made)
    )  # fmt: skip


@pytest.mark.parametrize("tenants", [3, 120])
def test_a_closed_month_pages_its_statements_and_totals_them_all(
    client_for, finance_user, django_assert_max_num_queries, tenants: int
) -> None:
    closed_month_of(tenants, finance_user)
    client = client_for(finance_user)

    with django_assert_max_num_queries(CLOSED_PAGE_QUERIES):
        first = client.get(f"/chargeback/?period={PERIOD}&sort=-total")
    assert first.status_code == 200
    shown = ids_with(first.text, "statement-")
    assert shown == [f"t{number:03d}" for number in reversed(range(tenants))][:50]
    # The cost centres' totals and the grand total (a section of the page, loaded after it)
    # are of every statement, not the page's.
    with django_assert_max_num_queries(CLOSED_PAGE_QUERIES):
        totals = client.get(
            f"/chargeback/sections/centre-totals/?period={PERIOD}&sort=-total",
            headers={"HX-Request": "true"},
        )
    grand = sum((Decimal(number) + Decimal("0.50") for number in range(tenants)), Decimal(0))
    assert re.search(
        rf'data-testid="grand-total-EUR">.*?<td class="number">{grand:.2f}</td>', totals.text
    )
    centre_0 = sum(Decimal(n) + Decimal("0.50") for n in range(0, tenants, 3))
    assert f"<td>CC-0</td><td>{len(range(0, tenants, 3))}</td><td>EUR</td>" in totals.text
    assert f'<td class="number">{centre_0:.2f}</td>' in totals.text
    if tenants <= 50:
        assert 'class="pager"' not in first.text
        return
    assert f"Page 1 of 3 ({tenants} statements)" in first.text
    last = client.get(f"/chargeback/?period={PERIOD}&sort=-total&page=3")
    assert ids_with(last.text, "statement-") == [f"t{number:03d}" for number in range(19, -1, -1)]
    past = client.get(f"/chargeback/?period={PERIOD}&sort=-total&page=99")
    assert ids_with(past.text, "statement-") == ids_with(last.text, "statement-")
    by_centre = client.get(f"/chargeback/?period={PERIOD}&cost_centre=CC-1&sort=tenant")
    assert ids_with(by_centre.text, "statement-") == [
        f"t{number:03d}" for number in range(1, tenants, 3)
    ]


# The page's sections


def test_the_page_loads_its_totals_and_spend_after_it_with_the_pages_query(
    client_for, month: Ledger, finance_user
) -> None:
    client = client_for(finance_user)
    page = client.get(f"/chargeback/?period={PERIOD}&cost_centre=CC-4100").text

    # Placeholders htmx replaces once the page is shown, each with a link for no JavaScript.
    for name in ("centre-totals", "spend"):
        assert f'data-testid="chargeback-section-{name}"' in page
        url = (
            f"/chargeback/sections/{name}/?period={PERIOD}&amp;cost_centre=CC-4100&amp;sort=tenant"
        )
        assert f'hx-get="{url}" hx-trigger="load"' in page
        assert f'href="{url}#{name}"' in page
    assert 'data-testid="grand-total-EUR"' not in page

    fragment = client.get(
        f"/chargeback/sections/centre-totals/?period={PERIOD}&cost_centre=CC-4100",
        headers={"HX-Request": "true"},
    )
    assert fragment.status_code == 200
    assert fragment["Vary"].count("HX-Request") == 1
    assert fragment.text.lstrip().startswith('<section id="centre-totals"')
    assert re.search(r'data-testid="grand-total-EUR">.*?22\.86', fragment.text, re.S)
    assert 'data-testid="centre-CC-4200"' not in fragment.text  # narrowed to the cost centre

    spend = client.get(
        f"/chargeback/sections/spend/?period={PERIOD}", headers={"HX-Request": "true"}
    )
    assert spend.status_code == 200
    assert 'data-testid="chart-spend-EUR"' in spend.text
    assert 'id="usage-data"' in spend.text

    # Without JavaScript: the page, with that section written in and the other still loading.
    alone = client.get(f"/chargeback/sections/spend/?period={PERIOD}")
    assert alone.status_code == 200
    assert 'data-testid="statement-vision"' in alone.text
    assert 'data-testid="chart-spend-EUR"' in alone.text
    assert 'data-testid="chargeback-section-centre-totals"' in alone.text
    assert 'data-testid="chargeback-section-spend"' not in alone.text


@pytest.mark.parametrize("persona", ["developer", "outsider"])
def test_a_section_is_not_found_for_who_may_not_read_chargeback(
    request: pytest.FixtureRequest, client_for, month: Ledger, persona: str
) -> None:
    client = client_for(request.getfixturevalue(persona))
    for name in ("centre-totals", "spend"):
        url = f"/chargeback/sections/{name}/?period={PERIOD}"
        assert client.get(url, headers={"HX-Request": "true"}).status_code == 404
        assert client.get(url).status_code == 404


def test_an_unknown_section_or_a_bad_month_is_refused(client_for, finance_user) -> None:
    client = client_for(finance_user)
    assert client.get("/chargeback/sections/nonsense/").status_code == 404
    refused = client.get("/chargeback/sections/spend/?period=2026-13")
    assert refused.status_code == 400
    assert "Month:" in refused.text


# Query counts


def count_queries(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_page_queries_do_not_grow_with_the_lines_or_closed_statements(
    client_for, ledger: Ledger, finance_user, admin_user
) -> None:
    client = client_for(finance_user)
    tenant, member = ledger.tenant("alpha", "CC-1")
    ledger.allocate(tenant, member, "a100-80gb-whole", BEGIN + DAY, 3)
    ledger.collect()
    listing, detail = f"/chargeback/?period={PERIOD}", f"/chargeback/statements/{PERIOD}-alpha/"
    small = (count_queries(client, listing), count_queries(client, detail))

    for number in range(6):  # more users and workloads: more lines in the same statement
        _, other = ledger.tenant("alpha", "CC-1")
        ledger.allocate(tenant, other, "a100-80gb-mig-1g-10gb", BEGIN + number * DAY, 2)
    ledger.collect()
    assert (count_queries(client, listing), count_queries(client, detail)) == small

    # A closed month: statements are read stored, so more tenants cost no more queries either.
    period_close(actor=finance_user, month=MONTH)
    closed_small = (count_queries(client, listing), count_queries(client, detail))
    assert closed_small[0] <= small[0]
    period_reopen(actor=admin_user, month=MONTH, reason="more tenants")
    for slug in ("beta", "gamma", "delta"):
        more, member = ledger.tenant(slug, f"CC-{slug}")
        ledger.allocate(more, member, "a100-80gb-whole", BEGIN + DAY, 1)
    ledger.collect()
    period_close(actor=finance_user, month=MONTH)
    assert (count_queries(client, listing), count_queries(client, detail)) == closed_small


# Closing and reopening from the page


def test_finance_closes_the_month_and_an_admin_reopens_it_with_a_reason(
    client_for, month: Ledger, finance_user, admin_user
) -> None:
    finance = client_for(finance_user)

    closed = finance.post(f"/chargeback/periods/{PERIOD}/close/", follow=True)

    assert closed.redirect_chain[0] == (f"/chargeback/?period={PERIOD}", 302)
    assert f"{PERIOD} is closed: 2 statements are final." in closed.text
    assert closed.text.count('<span class="state final">final</span>') == 2
    assert "Close this month" not in closed.text
    assert "Reopen" not in closed.text  # finance does not reopen
    assert AuditEvent.objects.filter(action="period.close", actor=finance_user).count() == 1
    assert f'data-testid="last-closed">{PERIOD}<' in closed.text

    admin = client_for(admin_user)
    page = admin.get(f"/chargeback/?period={PERIOD}").text
    assert 'data-testid="reopen-form"' in page
    refused = admin.post(f"/chargeback/periods/{PERIOD}/reopen/", {"reason": "  "})
    assert refused.status_code == 400
    assert '<p class="field-error" role="alert">Reason: This field is required.' in refused.text

    reopened = admin.post(
        f"/chargeback/periods/{PERIOD}/reopen/", {"reason": "late usage from east"}, follow=True
    )

    assert f"{PERIOD} is open again" in reopened.text
    assert reopened.text.count('<span class="state provisional">provisional</span>') == 2
    event = AuditEvent.objects.get(action="period.reopen")
    assert (event.actor, event.comment) == (admin_user, "late usage from east")

    history = admin.get(f"/chargeback/statements/{PERIOD}-vision/").text
    assert ids_with(history, "history-") == ["1", "2"]
    rows = re.findall(r'data-testid="history-\d">(.*?)</tr>', history, re.S)
    assert "closed" in rows[0]
    assert "finance" in rows[0]
    assert "22.86 EUR" in rows[0]
    assert "reopened" in rows[1]
    assert "late usage from east" in rows[1]


def test_a_close_held_back_by_a_cluster_is_shown_in_place(
    client_for, month: Ledger, finance_user
) -> None:
    MeteringState.objects.filter(cluster=month.cluster).update(complete_until=END - DAY)

    response = client_for(finance_user).post(f"/chargeback/periods/{PERIOD}/close/")

    assert response.status_code == 409
    assert re.search(
        r'data-testid="close-error">Usage of \d{4}-\d\d is not complete yet: east \(complete until',
        response.text,
    )
    assert "Close this month" in response.text
    assert not AuditEvent.objects.filter(action="period.close").exists()


def test_a_running_month_cannot_be_closed(client_for, finance_user) -> None:
    response = client_for(finance_user).post(f"/chargeback/periods/{current_month():%Y-%m}/close/")

    assert response.status_code == 409
    assert "has not ended yet" in response.text


@pytest.mark.parametrize(
    ("persona", "status"), [("lead", 403), ("developer", 404), ("outsider", 404)]
)
def test_only_finance_and_admins_close(
    request: pytest.FixtureRequest, client_for, month: Ledger, persona: str, status: int
) -> None:
    client = client_for(request.getfixturevalue(persona))

    assert client.post(f"/chargeback/periods/{PERIOD}/close/").status_code == status
    assert client.post(f"/chargeback/periods/{PERIOD}/reopen/", {"reason": "x"}).status_code == (
        status
    )
    assert not AuditEvent.objects.filter(target_type="billing.period").exists()


def test_a_bad_month_in_the_url_is_refused(client_for, finance_user) -> None:
    response = client_for(finance_user).post("/chargeback/periods/2026-13/close/")

    assert response.status_code == 400
    assert "Give a month as YYYY-MM" in response.text


# One statement


def test_a_statement_shows_its_lines_exactly_and_rounded(client_for, month: Ledger, lead) -> None:
    response = client_for(lead).get(f"/chargeback/statements/{PERIOD}-vision/")

    assert response.status_code == 200
    html = response.text
    assert '<td class="number" title="10/7">1.429</td>' in html
    assert '<td class="number" title="10">10.000</td>' in html
    assert cell(html, "lines-total") == "22.86"
    assert cell(html, "statement-state") == "provisional"
    assert "The month has not been closed yet." in html


@pytest.mark.parametrize("persona", ["developer", "outsider"])
@pytest.mark.parametrize("path", ["", "csv/", "xlsx/"])
def test_outsiders_do_not_find_a_statement(
    request: pytest.FixtureRequest, client_for, month: Ledger, persona: str, path: str
) -> None:
    client = client_for(request.getfixturevalue(persona))

    assert client.get(f"/chargeback/statements/{PERIOD}-vision/{path}").status_code == 404


def test_a_lead_does_not_find_another_tenants_statement(client_for, month: Ledger, lead) -> None:
    assert client_for(lead).get(f"/chargeback/statements/{PERIOD}-nlp/").status_code == 404
    assert client_for(lead).get("/chargeback/statements/nonsense/csv/").status_code == 404
    assert client_for(lead).get(f"/chargeback/statements/{PERIOD}-vision/pdf/").status_code == 404


@pytest.mark.parametrize("copy", [True, False], ids=["written-by-postgresql", "python"])
@pytest.mark.parametrize("closed", [False, True], ids=["provisional", "final"])
def test_the_csv_adds_up_to_the_total_on_the_page(
    client_for, month: Ledger, finance_user, closed: bool, copy: bool, settings
) -> None:
    settings.PORTAL_CSV_COPY = copy
    if closed:
        period_close(actor=finance_user, month=MONTH)
    client = client_for(finance_user)
    page = client.get(f"/chargeback/?period={PERIOD}").text

    response = client.get(f"/chargeback/statements/{PERIOD}-vision/csv/")

    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert f'filename="statement-{PERIOD}-vision.csv"' in response["Content-Disposition"]
    header, *rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert header == list(CSV_COLUMNS)
    lines = [dict(zip(header, row, strict=True)) for row in rows]
    assert sum(Decimal(line["amount"]) for line in lines) == Decimal(cell(page, "total-vision"))
    assert {line["quantity"] for line in lines} == {"10", "10/7"}
    assert {(line["status"], line["basis"], line["currency"]) for line in lines} == {
        ("final" if closed else "provisional", "reserved", "EUR")
    }
    header, cells = xlsx_rows(client.get(f"/chargeback/statements/{PERIOD}-vision/xlsx/"))
    assert header == list(CSV_COLUMNS)
    sheet = [dict(zip(header, row, strict=True)) for row in cells]
    assert sum(Decimal(str(line["amount"])) for line in sheet) == Decimal(
        cell(page, "total-vision")
    )


# Rate cards


@pytest.mark.parametrize("persona", ["developer", "outsider", "lead", "finance_user"])
def test_everyone_signed_in_sees_the_rate_cards(
    request: pytest.FixtureRequest, client_for, ledger: Ledger, persona: str
) -> None:
    response = client_for(request.getfixturevalue(persona)).get("/chargeback/rates/")

    assert response.status_code == 200
    card = RateCard.objects.get()
    assert f'data-testid="rate-card-{card.pk}"' in response.text
    assert "in effect" in response.text
    assert ('data-testid="rate-card-form"' in response.text) == (persona == "finance_user")


def test_finance_adds_a_rate_card_and_sees_errors_beside_the_fields(
    client_for, ledger: Ledger, finance_user, developer
) -> None:
    client = client_for(finance_user)
    form = {
        "gpu_model": "a100-80gb",
        "backend": "",
        "currency": "EUR",
        "price_per_gpu_eq_hour": "2.50",
        "effective_from": f"{current_month() + 40 * DAY:%Y-%m-01}",
    }

    added = client.post("/chargeback/rates/", form, follow=True)

    assert added.redirect_chain == [("/chargeback/rates/", 302)]
    assert "NVIDIA A100-SXM4-80GB: 2.50 EUR per GPU-eq-hour" in added.text
    assert "upcoming" in added.text
    assert AuditEvent.objects.filter(action="rate_card.create", actor=finance_user).exists()

    bad = client.post("/chargeback/rates/", {**form, "price_per_gpu_eq_hour": "-1"})
    assert bad.status_code == 400
    assert (
        '<p class="field-error" role="alert">Price per GPU-eq-hour: Ensure this value is greater '
        "than or equal to 0." in bad.text
    )

    ledger.collect()
    period_close(actor=finance_user, month=MONTH)
    conflict = client.post("/chargeback/rates/", {**form, "effective_from": f"{MONTH:%Y-%m-%d}"})
    assert conflict.status_code == 409
    assert (
        '<p class="field-error" role="alert">Effective from: After the last closed month.'
        in conflict.text
    )

    assert client_for(developer).post("/chargeback/rates/", form).status_code == 403
    assert RateCard.objects.count() == 2


def test_the_month_shows_closed_state_to_a_lead(
    client_for, month: Ledger, lead, finance_user
) -> None:
    period_close(actor=finance_user, month=MONTH)

    html = client_for(lead).get(f"/chargeback/?period={PERIOD}").text

    assert cell(html, "month-state") == "closed"
    assert ids_with(html, "statement-") == ["vision"]
    assert "Reopen" not in html
    assert "Close this month" not in html


# The rows as templates/billing/statements.html and _spend.html wrote them before
# `portal.core.cells` did.
STATEMENT_ROWS = """{% load i18n %}{% for statement in statements %}
        <tr data-testid="statement-{{ statement.tenant.slug }}">
          <td><a href="{% url 'billing:statement' statement.id %}">{{ statement.tenant.name }}</a></td>
          <td>{{ statement.cost_centre|default:"—" }}</td>
          <td>{{ statement.currency|default:"—" }}</td>
          <td class="number" data-testid="total-{{ statement.tenant.slug }}">{{ statement.total }}</td>
          <td class="number" data-testid="budget-used-{{ statement.tenant.slug }}">{{ statement.budget_used|default:"—" }}</td>
          <td>{% if statement.final %}<span class="state final">{% translate "final" %}</span>{% else %}<span class="state provisional">{% translate "provisional" %}</span>{% endif %}{% if statement.problem %}<br><small class="error" data-testid="problem-{{ statement.tenant.slug }}">{{ statement.problem }}</small>{% endif %}</td>
        </tr>{% endfor %}"""  # noqa: E501
CENTRE_ROWS = """{% for row in centres.object_list %}
        <tr data-testid="centre-{{ row.cost_centre|default:'none' }}"><td>{{ row.cost_centre|default:"—" }}</td><td>{{ row.statements }}</td><td>{{ row.currency|default:"—" }}</td><td class="number">{{ row.total }}</td></tr>{% endfor %}"""  # noqa: E501
SPEND_ROWS = """{% for row in chart.rows %}
            <tr data-testid="spend-{{ chart.currency }}-{{ row.0 }}">{% for cell in row %}{% if forloop.first %}<th scope="row">{{ cell }}</th>{% elif forloop.last %}<td>{{ cell }}</td>{% else %}<td class="number">{{ cell }}</td>{% endif %}{% endfor %}</tr>
          {% endfor %}"""  # noqa: E501


def tbody(html: str, testid: str) -> str:
    table = re.search(rf'<table data-testid="{testid}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert table, testid
    return re.sub(r">\s+<", "><", table.group(1).strip())


@pytest.mark.parametrize("closed", [False, True])
def test_the_rows_are_written_as_the_templates_wrote_them(
    client_for, month: Ledger, finance_user, admin_user, tenant_a, closed: bool
) -> None:
    """The statements', the cost centres' and the spend table's rows (`portal.core.cells`)
    against the template loops they replace, in Chinese, provisional and final, with markup in
    a tenant's name."""
    tenant_update(actor=admin_user, tenant=tenant_a, name='<Vision> & "co"', cost_centre="")
    if closed:
        period_close(actor=finance_user, month=MONTH)

    client = client_for(finance_user)
    response = client.get(f"/chargeback/?period={PERIOD}", HTTP_ACCEPT_LANGUAGE="zh-hans")
    # The totals per cost centre and the spend chart: sections loaded after the page.
    totals, spent = (
        client.get(
            f"/chargeback/sections/{name}/?period={PERIOD}",
            HTTP_ACCEPT_LANGUAGE="zh-hans",
            HTTP_HX_REQUEST="true",
        )
        for name in ("centre-totals", "spend")
    )

    assert (response.status_code, totals.status_code, spent.status_code) == (200, 200, 200)
    engine = engines["django"]
    with translation.override("zh-hans"):
        statements = engine.from_string(STATEMENT_ROWS).render(
            {"statements": response.context["statements"]}
        )
        centres = engine.from_string(CENTRE_ROWS).render({"centres": totals.context["centres"]})
        [chart] = spent.context["spend_charts"]
        spend = engine.from_string(SPEND_ROWS).render({"chart": chart})
    assert tbody(response.text, "statements") == re.sub(r">\s+<", "><", statements.strip())
    assert tbody(totals.text, "centre-totals") == re.sub(r">\s+<", "><", centres.strip())
    assert 'data-testid="centre-none"' in centres  # the tenant without a cost centre
    assert tbody(spent.text, "table-spend-EUR") == re.sub(r">\s+<", "><", spend.strip())
    assert "&lt;Vision&gt; &amp; &quot;co&quot;" in statements
    assert ("最终" if closed else "暂估") in statements
