"""The chargeback API: rate cards, statements (list, one, lines as JSON and CSV), periods and
their close and reopening, for every persona, with odd input and bounded query counts.

Usage comes from the allocation ledger as in test_pricing: allocations made through the
services, moved into last month, their hours collected with a metrics source that sees no pods
(the network edge), and the cluster's watermark set to the month's end.
"""

import csv
import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import User
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.billing.models import Period, PeriodState, RateCard, Statement
from portal.billing.pricing import month_bounds
from portal.billing.services import rate_card_create
from portal.catalog.models import GpuModel, Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.core.models import AuditEvent
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import MeteringState
from portal.metering.sources import WindowMetrics
from tenants.models import Tenant
from tenants.services import quota_set, tenant_create, tenant_update
from tests.billing.test_pages import closed_month_of
from tests.sheets import xlsx_rows

API = "/api/v1/"
TODAY = datetime.now(UTC).date()
MONTH = (TODAY.replace(day=1) - timedelta(days=1)).replace(day=1)  # last month
PERIOD = f"{MONTH:%Y-%m}"
BEGIN, END = month_bounds(MONTH)
DAY = timedelta(days=1)
WHOLE = "a100-80gb-whole"
MIG = "a100-80gb-mig-1g-10gb"
CSV_COLUMNS = [
    "period", "tenant", "cost_centre", "gpu_model", "offering", "user", "workload", "quantity",
    "unit", "rate", "currency", "amount", "basis", "status",
]  # fmt: skip


class NoPods:
    """A metrics source at the network edge that sees no pods: only the ledger counts."""

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        return WindowMetrics()


@dataclass
class Books:
    """Last month's usage on one cluster, made through the services."""

    cluster: Cluster
    catalog: dict[str, Offering]
    hours: set[datetime] = field(default_factory=set)

    def allocate(
        self, actor: User, tenant: Tenant, offering: str, starts: datetime, hours: float
    ) -> GpuRequest:
        allocation = gpu_request_submit(
            actor=actor, tenant=tenant, offering=self.catalog[offering], count=1
        )
        assert allocation.state == RequestState.APPROVED, allocation.decision_comment
        ends = starts + timedelta(hours=hours)
        GpuRequest.objects.filter(pk=allocation.pk).update(starts_at=starts, ends_at=ends)
        moment = hour_floor(starts)
        while moment < ends:
            self.hours.add(moment)
            moment += timedelta(hours=1)
        return allocation

    def collect(self) -> None:
        for hour in sorted(self.hours):
            window_collect(self.cluster, hour, NoPods())
        MeteringState.objects.filter(cluster=self.cluster).update(complete_until=END)


def priced_tenant(slug: str, cost_centre: str, admin: User, catalog: dict[str, Offering]) -> Tenant:
    tenant = tenant_create(actor=None, slug=slug, name=slug.title(), cost_centre=cost_centre)
    quota_set(actor=admin, tenant=tenant, gpu_model=catalog[WHOLE].gpu_model, gpu_eq=10)
    return tenant_update(actor=admin, tenant=tenant, auto_approve_gpu_eq="1", auto_approve_hours=8)


@pytest.fixture
def books(
    a100_tenant: Tenant, tenant_b: Tenant, developer, lead, outsider, finance_user, admin_user,
    catalog,
) -> Books:  # fmt: skip
    """Last month: the developer held a whole A100 for 10 hours and a 1/7 MIG slice for 10 hours
    in tenant A (vision, CC-4100); the outsider a whole A100 for 3 hours in tenant B (nlp,
    CC-4200). A100s cost 2.10 EUR per GPU-eq-hour."""
    cluster = cluster_create(actor=None, name="east")
    metering_begin(cluster=cluster, at=BEGIN)
    quota_set(actor=admin_user, tenant=tenant_b, gpu_model=catalog[WHOLE].gpu_model, gpu_eq=10)
    tenant_update(actor=admin_user, tenant=tenant_b, auto_approve_gpu_eq="1", auto_approve_hours=8)
    month = Books(cluster, catalog)
    month.allocate(developer, a100_tenant, WHOLE, BEGIN + DAY, 10)
    month.allocate(developer, a100_tenant, MIG, BEGIN + 2 * DAY, 10)
    month.allocate(outsider, tenant_b, WHOLE, BEGIN + 3 * DAY, 3)
    rate_card_create(
        actor=finance_user, gpu_model=catalog[WHOLE].gpu_model, backend=None, currency="EUR",
        price_per_gpu_eq_hour="2.10", effective_from=MONTH,
    )  # fmt: skip
    month.collect()
    return month


def get(client: Client, path: str, **params: Any) -> Any:
    return client.get(f"{API}{path}", params)


def post(
    client: Client, path: str, body: dict[str, Any] | None = None, *, key: str | None = None
) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    return client.post(f"{API}{path}", body or {}, content_type="application/json", headers=headers)


def csv_rows(response: Any) -> list[dict[str, str]]:
    assert response.streaming, "the CSV is streamed"
    text = b"".join(response.streaming_content).decode()
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == CSV_COLUMNS
    return list(reader)


# Rate cards


def test_everyone_signed_in_reads_the_rate_cards_filtered_by_model_and_currency(
    books: Books, client_for, developer, outsider, finance_user
) -> None:
    h100 = GpuModel.objects.get(slug="h100-80gb")
    rate_card_create(
        actor=finance_user, gpu_model=h100, backend=None, currency="USD",
        price_per_gpu_eq_hour="4.5", effective_from=MONTH,
    )  # fmt: skip
    for user in (developer, outsider):
        body = get(client_for(user), "rate-cards/").json()
        assert body["count"] == 2
    client = client_for(outsider)
    only = get(client, "rate-cards/", gpu_model="a100-80gb").json()["results"]
    assert [(card["gpu_model"], card["backend"], card["currency"], card["price_per_gpu_eq_hour"])
            for card in only] == [("a100-80gb", None, "EUR", "2.1000")]  # fmt: skip
    assert get(client, "rate-cards/", currency="USD").json()["results"][0]["gpu_model"] == (
        "h100-80gb"
    )
    bad = get(client, "rate-cards/", gpu_model="a100\x01")
    assert bad.status_code == 400
    assert list(bad.json()["error"]["fields"]) == ["gpu_model"]
    assert Client().get(f"{API}rate-cards/").status_code == 401


def test_finance_adds_a_rate_card_and_the_audit_records_it(
    books: Books, client_for, finance_user, admin_user, lead, developer
) -> None:
    body = {
        "gpu_model": "a100-80gb", "backend": "mig", "currency": "EUR",
        "price_per_gpu_eq_hour": "3.25", "effective_from": TODAY.isoformat(),
    }  # fmt: skip
    for user in (lead, developer):
        refused = post(client_for(user), "rate-cards/", body)
        assert refused.status_code == 403, refused.content
        assert refused.json()["error"]["code"] == "forbidden"

    created = post(client_for(finance_user), "rate-cards/", body)

    assert created.status_code == 201, created.content
    card = created.json()
    assert (card["backend"], card["price_per_gpu_eq_hour"], card["created_by"]) == (
        "mig", "3.2500", "finance",
    )  # fmt: skip
    assert AuditEvent.objects.filter(
        action="rate_card.create", target_id=str(card["id"]), actor=finance_user
    ).exists()
    every_backend = post(client_for(admin_user), "rate-cards/", {**body, "backend": None})
    assert every_backend.status_code == 201
    assert every_backend.json()["backend"] is None


@pytest.mark.parametrize(
    ("change", "bad"),
    [
        ({"price_per_gpu_eq_hour": "1e999"}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": "NaN"}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": "Infinity"}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": "-1"}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": "12345678901.5"}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": "9" * 2000}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": "2.12345"}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": 2.5}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": "two"}, "price_per_gpu_eq_hour"),
        ({"price_per_gpu_eq_hour": None}, "price_per_gpu_eq_hour"),
        ({"gpu_model": "nope"}, "gpu_model"),
        ({"gpu_model": "a100\x00"}, "gpu_model"),
        ({"backend": "nope"}, "backend"),
        ({"currency": "eur"}, "currency"),
        ({"currency": "EURO"}, "currency"),
        ({"currency": "EU\n"}, "currency"),
        ({"effective_from": "2026-02-30"}, "effective_from"),
        ({"effective_from": "yesterday"}, "effective_from"),
    ],
    ids=lambda value: repr(value)[:40] if isinstance(value, dict) else "",
)
def test_a_bad_rate_card_is_refused_naming_the_field(
    books: Books, client_for, finance_user, change: dict[str, Any], bad: str
) -> None:
    body = {
        "gpu_model": "a100-80gb", "backend": None, "currency": "EUR",
        "price_per_gpu_eq_hour": "2.50", "effective_from": TODAY.isoformat(), **change,
    }  # fmt: skip
    before = RateCard.objects.count()

    response = post(client_for(finance_user), "rate-cards/", body)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], list(error["fields"])) == ("invalid", [bad])
    assert RateCard.objects.count() == before


def test_a_price_inside_a_closed_month_is_a_conflict(
    books: Books, client_for, finance_user
) -> None:
    client = client_for(finance_user)
    assert post(client, f"periods/{PERIOD}/close").status_code == 200
    body = {
        "gpu_model": "a100-80gb", "currency": "EUR", "price_per_gpu_eq_hour": "9.00",
        "effective_from": MONTH.isoformat(),
    }  # fmt: skip

    response = post(client, "rate-cards/", body)

    assert response.status_code == 409
    assert response.json()["error"]["fields"] == {
        "effective_from": ["After the last closed month."]
    }


def test_a_rate_card_posted_twice_with_one_idempotency_key_is_created_once(
    books: Books, client_for, finance_user
) -> None:
    client = client_for(finance_user)
    body = {
        "gpu_model": "a100-80gb", "currency": "EUR", "price_per_gpu_eq_hour": "2.50",
        "effective_from": TODAY.isoformat(),
    }  # fmt: skip
    first = post(client, "rate-cards/", body, key="card-1")
    again = post(client, "rate-cards/", body, key="card-1")

    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert RateCard.objects.filter(price_per_gpu_eq_hour=Decimal("2.50")).count() == 1


# Statements


def test_each_persona_sees_the_statements_it_may(
    books: Books, client_for, developer, lead, outsider, finance_user, admin_user
) -> None:
    seen = {}
    for user in (developer, lead, outsider, finance_user, admin_user):
        response = get(client_for(user), "statements/", period=PERIOD)
        assert response.status_code == 200, response.content
        seen[user.username] = [
            (row["id"], row["total"], row["final"], row["provisional"])
            for row in response.json()["results"]
        ]
    everything = [
        (f"{PERIOD}-nlp", "6.30", False, True),
        (f"{PERIOD}-vision", "24.00", False, True),  # 10 h x 2.10 + 10/7 h x 2.10
    ]
    assert seen == {
        "dev": [], "outsider": [], "lead": [everything[1]], "finance": everything,
        "admin": everything,
    }  # fmt: skip
    assert Client().get(f"{API}statements/").status_code == 401


def test_the_statements_carry_their_fields_and_the_totals_per_cost_centre(
    books: Books, client_for, finance_user
) -> None:
    body = get(client_for(finance_user), "statements/", period=PERIOD).json()

    assert body["period"] == PERIOD
    assert body["cost_centres"] == [
        {"cost_centre": "CC-4100", "currency": "EUR", "total": "24.00"},
        {"cost_centre": "CC-4200", "currency": "EUR", "total": "6.30"},
    ]
    assert body["results"][1] == {
        "id": f"{PERIOD}-vision", "period": PERIOD, "tenant": "vision",
        "tenant_name": "Computer Vision Lab", "cost_centre": "CC-4100", "currency": "EUR",
        "basis": "reserved", "unit": "GPU-eq-hour", "total": "24.00", "final": False,
        "provisional": True, "problem": "",
    }  # fmt: skip


def test_statements_are_filtered_by_tenant_and_cost_centre(
    books: Books, client_for, finance_user, lead, developer
) -> None:
    finance = client_for(finance_user)
    one = get(finance, "statements/", period=PERIOD, tenant="nlp").json()
    assert [row["tenant"] for row in one["results"]] == ["nlp"]
    assert one["cost_centres"] == [{"cost_centre": "CC-4200", "currency": "EUR", "total": "6.30"}]
    by_centre = get(finance, "statements/", period=PERIOD, cost_centre="CC-4100").json()
    assert [row["tenant"] for row in by_centre["results"]] == ["vision"]
    # A tenant whose statements the caller may not see does not exist for them.
    assert get(client_for(lead), "statements/", period=PERIOD, tenant="nlp").status_code == 404
    assert get(client_for(developer), "statements/", tenant="vision").status_code == 404
    assert get(finance, "statements/", tenant="nowhere").status_code == 404


def test_the_statements_default_to_the_current_month(
    books: Books, client_for, finance_user
) -> None:
    body = get(client_for(finance_user), "statements/").json()

    assert body["period"] == f"{TODAY:%Y-%m}"
    assert body["results"] == []  # all the usage was last month
    assert (
        get(client_for(finance_user), "statements/", period="").json()["period"] == body["period"]
    )


@pytest.mark.parametrize(
    "period", ["2026-13", "2026-00", "abc", "2026-5", "1999-12", "2026-05\x01", "2026-05-01"]
)
def test_a_bad_period_is_refused_naming_it(
    books: Books, client_for, finance_user, period: str
) -> None:
    response = get(client_for(finance_user), "statements/", period=period)

    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["fields"]) == ["period"]


@pytest.mark.parametrize(
    ("param", "value"), [("tenant", "vi sion"), ("tenant", "x" * 64), ("cost_centre", "c" * 65)]
)
def test_bad_statement_filters_are_refused_naming_them(
    books: Books, client_for, finance_user, param: str, value: str
) -> None:
    response = get(client_for(finance_user), "statements/", **{param: value})

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == [param]


def test_one_statement_is_seen_by_whom_may_and_is_404_to_others(
    books: Books, client_for, developer, lead, outsider, finance_user, admin_user
) -> None:
    path = f"statements/{PERIOD}-vision/"
    for user in (lead, finance_user, admin_user):
        response = get(client_for(user), path)
        assert response.status_code == 200, (user, response.content)
        assert (response.json()["total"], response.json()["history"]) == ("24.00", [])
    for user in (developer, outsider):
        assert get(client_for(user), path).status_code == 404
        assert get(client_for(user), f"{path}lines/").status_code == 404
        assert get(client_for(user), f"{path}lines/", format="csv").status_code == 404
    assert get(client_for(lead), f"statements/{PERIOD}-nlp/").status_code == 404
    finance = client_for(finance_user)
    # (A control character in the id is refused before this: tests/core/test_bad_input.py.)
    odd = ("2026-13-vision", "nope", f"{PERIOD}-nowhere", f"{PERIOD}-VISION")
    for name in odd:
        response = get(finance, f"statements/{name}/")
        assert response.status_code == 404, name
        assert response.json()["error"]["code"] == "not_found"


def lines_json(client: Client, statement: str) -> list[dict[str, Any]]:
    body = get(client, f"statements/{statement}/lines/", page_size=2).json()
    rows = list(body["results"])
    page = 2
    while body["next"]:
        body = get(client, f"statements/{statement}/lines/", page_size=2, page=page).json()
        rows += body["results"]
        page += 1
    return rows


def assert_csv_equals_json_and_sums_to_the_total(
    client: Client, statement: str, status: str
) -> None:
    total = get(client, f"statements/{statement}/").json()["total"]
    as_json = lines_json(client, statement)
    response = get(client, f"statements/{statement}/lines/", format="csv")
    assert response["Content-Disposition"] == f'attachment; filename="statement-{statement}.csv"'
    as_csv = csv_rows(response)

    assert len(as_json) == len(as_csv) > 0
    for line, row in zip(as_json, as_csv, strict=True):
        for name in ("gpu_model", "offering", "user", "workload", "quantity", "unit", "currency",
                     "amount"):  # fmt: skip
            assert row[name] == line[name], name
        assert row["rate"] == (line["rate"] or "")
        assert (row["period"], row["basis"], row["status"]) == (PERIOD, "reserved", status)
    assert sum(Decimal(row["amount"]) for row in as_csv) == Decimal(total)
    header, as_xlsx = xlsx_rows(get(client, f"statements/{statement}/lines/", format="xlsx"))
    assert header == CSV_COLUMNS
    assert len(as_xlsx) == len(as_csv)
    for cells, row in zip(as_xlsx, as_csv, strict=True):
        sheet = dict(zip(header, cells, strict=True))
        assert Decimal(str(sheet["amount"])) == Decimal(row["amount"])
        assert sheet["quantity"] == pytest.approx(float(Fraction(row["quantity"])))
        assert (sheet["user"], sheet["status"]) == (row["user"], row["status"])
    amounts = [Decimal(str(dict(zip(header, cells, strict=True))["amount"])) for cells in as_xlsx]
    assert sum(amounts) == Decimal(total)


def test_the_lines_as_json_and_csv_agree_and_sum_to_the_total_open_and_closed(
    books: Books, client_for, finance_user
) -> None:
    client = client_for(finance_user)
    statement = f"{PERIOD}-vision"
    lines = lines_json(client, statement)
    assert sorted(
        (line["gpu_model"], line["offering"], line["user"], line["quantity"], line["unit"],
         line["rate"], line["currency"], line["amount"])
        for line in lines
    ) == [
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB, MIG 1g.10gb", "dev", "10/7",
         "GPU-eq-hour", "2.1000", "EUR", "3.00"),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB, whole GPU", "dev", "10",
         "GPU-eq-hour", "2.1000", "EUR", "21.00"),
    ]  # fmt: skip
    assert_csv_equals_json_and_sums_to_the_total(client, statement, "provisional")

    post(client, f"periods/{PERIOD}/close")

    assert_csv_equals_json_and_sums_to_the_total(client, statement, "final")
    rows = csv_rows(get(client, f"statements/{statement}/lines/", format="csv"))
    assert sorted((row["quantity"], row["amount"]) for row in rows) == [
        ("10", "21.00"), ("10/7", "3.00"),
    ]  # fmt: skip


def test_an_unknown_line_format_is_refused(books: Books, client_for, finance_user) -> None:
    response = get(client_for(finance_user), f"statements/{PERIOD}-vision/lines/", format="pdf")

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["format"]


# Periods


def test_finance_closes_a_month_and_an_admin_reopens_it_with_a_reason_all_audited(
    books: Books, client_for, developer, lead, outsider, finance_user, admin_user
) -> None:
    close = f"periods/{PERIOD}/close"
    reopen = f"periods/{PERIOD}/reopen"
    for user in (developer, lead, outsider):
        assert post(client_for(user), close).status_code == 404
        assert post(client_for(user), reopen, {"reason": "x"}).status_code == 404
        assert get(client_for(user), "periods/").status_code == 404
    finance, admin = client_for(finance_user), client_for(admin_user)

    closed = post(finance, close)

    assert closed.status_code == 200, closed.content
    body = closed.json()
    assert (body["period"]["month"], body["period"]["state"], body["period"]["closed_by"]) == (
        PERIOD, "closed", "finance",
    )  # fmt: skip
    assert [(row["id"], row["total"], row["final"]) for row in body["statements"]] == [
        (f"{PERIOD}-nlp", "6.30", True), (f"{PERIOD}-vision", "24.00", True),
    ]  # fmt: skip
    assert Statement.objects.filter(period__month=MONTH).count() == 2
    again = post(finance, close)
    assert again.status_code == 409
    assert again.json()["error"]["message"] == f"{PERIOD} is closed already."
    assert post(finance, reopen, {"reason": "late usage"}).status_code == 403
    no_reason = post(admin, reopen, {"reason": "  "})
    assert no_reason.status_code == 400
    assert list(no_reason.json()["error"]["fields"]) == ["reason"]

    reopened = post(admin, reopen, {"reason": "usage collected again"})

    assert reopened.status_code == 200, reopened.content
    assert reopened.json()["period"]["state"] == "open"
    assert [row["final"] for row in reopened.json()["statements"]] == [False, False]
    assert post(admin, reopen, {"reason": "twice"}).status_code == 409
    assert post(admin, close).status_code == 200
    history = get(client_for(lead), f"statements/{PERIOD}-vision/").json()["history"]
    assert [(entry["action"], entry["actor"], entry["comment"], entry["total"],
             entry["currency"]) for entry in history] == [
        ("period.close", "finance", "", "24.00", "EUR"),
        ("period.reopen", "admin", "usage collected again", "24.00", "EUR"),
        ("period.close", "admin", "", "24.00", "EUR"),
    ]  # fmt: skip
    assert AuditEvent.objects.filter(target_type="billing.period").count() == 3
    listed = get(finance, "periods/").json()["results"]
    assert [(row["month"], row["state"], row["basis"], row["closed_by"]) for row in listed] == [
        (PERIOD, "closed", "reserved", "admin")
    ]


def test_a_month_whose_usage_is_not_complete_is_not_closed_and_the_cluster_is_named(
    books: Books, client_for, finance_user
) -> None:
    MeteringState.objects.filter(cluster=books.cluster).update(complete_until=END - DAY)

    response = post(client_for(finance_user), f"periods/{PERIOD}/close")

    assert response.status_code == 409
    assert "east (complete until" in response.json()["error"]["message"]
    assert not Period.objects.filter(state=PeriodState.CLOSED).exists()


@pytest.mark.parametrize("month", ["2026-13", "abc", "2026-5"])
def test_a_bad_month_to_close_is_refused_naming_the_period(
    books: Books, client_for, finance_user, lead, month: str
) -> None:
    response = post(client_for(finance_user), f"periods/{month}/close")

    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["fields"]) == ["period"]
    assert post(client_for(lead), f"periods/{month}/close").status_code == 404


def test_a_control_character_in_the_month_is_refused_naming_the_path_parameter(
    client_for, finance_user
) -> None:
    response = post(client_for(finance_user), "periods/2026-05%01/close")

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["month"]


def test_a_close_retried_with_its_idempotency_key_answers_the_first_result(
    books: Books, client_for, finance_user
) -> None:
    client = client_for(finance_user)
    first = post(client, f"periods/{PERIOD}/close", key="close-1")
    again = post(client, f"periods/{PERIOD}/close", key="close-1")

    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json() == first.json()
    assert AuditEvent.objects.filter(action="period.close").count() == 1


# Query counts


def more_tenants(books: Books, admin: User, vision: Tenant, count: int) -> None:
    """`count` more tenants with usage last month, each with three lines, and (with any) three
    more lines in vision."""
    for index in range(count):
        tenant = priced_tenant(f"extra-{index}", f"CC-9{index:03d}", admin, books.catalog)
        for hours in (1, 2, 3):
            books.allocate(admin, tenant, WHOLE, BEGIN + hours * DAY, hours)
            if index == 0:
                books.allocate(admin, vision, WHOLE, BEGIN + (hours + 10) * DAY, hours)
    books.collect()


# The statements list of an open month: session, user, period, what the totals are priced
# from and the tenants with usage whose stored total is not current; the first reading then
# prices those (rate cards, and the grouped usage and its offerings' backends of all tenants at
# once, `month_priced`) and stores them in one statement; then, like a closed month, a page of
# the stored totals, their count and their totals per cost centre. None grow with the
# tenants. A closed month reads a page of its stored statements, their count and their totals
# per cost centre, whatever their number; a page of a final statement's lines reads that page
# by position (the statement stored its line count), whatever the statement's size.
LIST_QUERIES = 12
STORED_LIST_QUERIES = 8
PER_OPEN_TENANT = 0
CLOSED_QUERIES = 6
LINES_QUERIES = 7


@pytest.mark.parametrize("extra", [0, 4])
def test_the_statements_list_takes_a_bounded_number_of_queries(
    books: Books, client_for, finance_user, admin_user, a100_tenant, django_assert_max_num_queries,
    extra: int,
) -> None:  # fmt: skip
    more_tenants(books, admin_user, a100_tenant, extra)
    client = client_for(finance_user)
    tenants = 2 + extra

    with django_assert_max_num_queries(LIST_QUERIES + PER_OPEN_TENANT * tenants):
        open_month = get(client, "statements/", period=PERIOD)
    assert open_month.json()["count"] == tenants
    with django_assert_max_num_queries(STORED_LIST_QUERIES + PER_OPEN_TENANT * tenants):
        again = get(client, "statements/", period=PERIOD)
    assert again.json() == open_month.json()
    post(client, f"periods/{PERIOD}/close")
    with django_assert_max_num_queries(CLOSED_QUERIES):
        closed_month = get(client, "statements/", period=PERIOD)
    assert closed_month.json()["count"] == tenants
    with django_assert_max_num_queries(LINES_QUERIES):
        lines = get(client, f"statements/{PERIOD}-vision/lines/")
    assert lines.json()["count"] == (5 if extra else 2)


def test_a_final_statements_lines_are_paged_by_position_and_never_counted(
    books: Books, client_for, finance_user, admin_user, a100_tenant
) -> None:
    """The close stores each statement's lines at positions 1 to its line count: a page is a
    range of positions (no OFFSET, whatever its depth) and the count is the stored one."""
    more_tenants(books, admin_user, a100_tenant, 1)  # vision: five lines
    client = client_for(finance_user)
    post(client, f"periods/{PERIOD}/close")
    stored = Statement.objects.get(period__month=MONTH, tenant__slug="vision")

    with CaptureQueriesContext(connection) as queries:
        pages = [
            get(client, f"statements/{PERIOD}-vision/lines/", page_size=2, page=number).json()
            for number in (1, 2, 3)
        ]

    assert stored.line_count == 5
    assert sorted(stored.lines.values_list("position", flat=True)) == [1, 2, 3, 4, 5]
    assert [(page["count"], page["count_exact"], len(page["results"])) for page in pages] == [
        (5, True, 2), (5, True, 2), (5, True, 1),
    ]  # fmt: skip
    read = [query["sql"] for query in queries.captured_queries if "statementline" in query["sql"]]
    assert len(read) == 3  # a page's rows, nothing else
    assert not [sql for sql in read if "COUNT(" in sql or "OFFSET" in sql]
    assert_csv_equals_json_and_sums_to_the_total(client, f"{PERIOD}-vision", "final")


def test_a_closed_months_statements_come_a_page_at_a_time_with_every_cost_centres_total(
    client_for, finance_user, django_assert_max_num_queries
) -> None:
    closed_month_of(120, finance_user)
    client = client_for(finance_user)

    with django_assert_max_num_queries(CLOSED_QUERIES):
        first = get(client, "statements/", period=PERIOD).json()
    second = client.get(first["next"]).json()
    third = client.get(second["next"]).json()

    assert (first["count"], third["next"]) == (120, None)
    slugs = [row["tenant"] for page in (first, second, third) for row in page["results"]]
    assert slugs == [f"t{number:03d}" for number in range(120)]
    assert {row["final"] for row in first["results"]} == {True}
    expected = {
        f"CC-{centre}": sum(Decimal(n) + Decimal("0.50") for n in range(centre, 120, 3))
        for centre in range(3)
    }
    for page in (first, third):  # every page totals all of them
        assert {row["cost_centre"]: Decimal(row["total"]) for row in page["cost_centres"]} == (
            expected
        )
    narrowed = get(client, "statements/", period=PERIOD, cost_centre="CC-2").json()
    assert narrowed["count"] == 40
    assert [row["cost_centre"] for row in narrowed["cost_centres"]] == ["CC-2"]


def test_the_schema_documents_the_chargeback_api(db) -> None:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json",
                 stdout=out)  # fmt: skip
    paths = json.loads(out.getvalue())["paths"]
    for path in (
        "rate-cards/", "statements/", "statements/{statement_id}/",
        "statements/{statement_id}/lines/", "periods/", "periods/{month}/close",
        "periods/{month}/reopen",
    ):  # fmt: skip
        assert f"/api/v1/{path}" in paths, path


# Months out of range


@pytest.mark.parametrize("path", ["statements/", "spend/"])
@pytest.mark.parametrize("month", ["9999-12", "1999-12", "2026-13"])
def test_a_month_out_of_range_is_a_400_naming_the_field(
    books: Books, client_for, finance_user, path: str, month: str
) -> None:
    field = "period" if path == "statements/" else "to"
    response = get(client_for(finance_user), path, **{field: month})

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == [field]


@pytest.mark.parametrize("suffix", ["", "lines/?format=xlsx"])
def test_a_statement_of_a_month_out_of_range_is_not_found(
    books: Books, client_for, finance_user, suffix: str
) -> None:
    client = client_for(finance_user)

    assert client.get(f"/api/v1/statements/9999-12-vision/{suffix}").status_code == 404
    assert client.get("/chargeback/statements/9999-12-vision/").status_code == 404
    assert client.get("/chargeback/?period=9999-12").status_code == 400


def test_each_gpu_line_says_its_utilisation_and_what_was_paid_for_and_not_used(
    books: Books, client_for, finance_user
) -> None:
    """The books' allocations ran no pod: nothing of what they reserved was used."""
    client = client_for(finance_user)
    lines = lines_json(client, f"{PERIOD}-vision")

    assert lines
    for line in lines:
        assert line["utilisation"] == "0.000"
        assert line["idle_cost"] == line["amount"]
    page = client.get(f"/chargeback/statements/{PERIOD}-vision/").text
    total = re.search(r'data-testid="lines-total">([^<]*)<', page)
    idle = re.search(r'data-testid="idle-total">([^<]*)<', page)
    assert total
    assert idle
    assert idle.group(1) == total.group(1)
