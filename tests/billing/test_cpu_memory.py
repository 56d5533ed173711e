"""CPU core-hours and memory GiB-hours on statements: rate cards that price them, the lines they
add beside the GPU line, a closed month that stores them, the downloads that show each line's
unit, budgets in GPU-eq-hours that leave them out, and the rate card's page and API.

Usage is collected by the real metering code from a metrics source at the network edge that
answers as kube-state-metrics would for notebook pods: each holds a whole A100 and requests
CPU cores and memory (bytes) while its allocation runs. Notebooks and allocations are made
through the services and moved into last month.
"""

import csv
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.test import Client

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.billing.budgets import budget_status
from portal.billing.models import Budget, BudgetUnit, RateCard, Statement
from portal.billing.pricing import month_bounds, tenant_month_priced
from portal.billing.services import period_close, rate_card_create
from portal.billing.spend import spend_for
from portal.catalog.models import GpuModel, Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.core.errors import ValidationFailed
from portal.core.models import AuditEvent
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import MeteringState, UsageDaily, UsageRecord
from portal.metering.sources import PodRequest, PodRunning, WindowMetrics
from portal.workloads.models import Notebook
from tenants.models import Tenant
from tests.sheets import xlsx_rows
from tests.workloads.conftest import allocation_of, launch

API = "/api/v1/"
TODAY = datetime.now(UTC).date()
MONTH = (TODAY.replace(day=1) - timedelta(days=1)).replace(day=1)  # last month
BEGIN, END = month_bounds(MONTH)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
GIB = 2**30
WHOLE = "a100-80gb-whole"


@dataclass
class Pod:
    namespace: str
    name: str
    cores: Decimal
    memory_bytes: int
    starts: datetime
    ends: datetime


@dataclass
class NotebookPods:
    """A metrics source at the network edge: kube-state-metrics' requests and phase of the pods
    it was given (a whole GPU, CPU cores, memory in bytes), running from start to end."""

    pods: list[Pod] = field(default_factory=list)

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        metrics = WindowMetrics()
        for pod in self.pods:
            seconds = int((min(pod.ends, start + HOUR) - max(pod.starts, start)).total_seconds())
            if seconds <= 0:
                continue
            metrics.requests += [
                PodRequest(pod.namespace, pod.name, "nvidia_com_gpu", Decimal(1)),
                PodRequest(pod.namespace, pod.name, "cpu", pod.cores),
                PodRequest(pod.namespace, pod.name, "memory", Decimal(pod.memory_bytes)),
            ]
            metrics.running.append(PodRunning(pod.namespace, pod.name, seconds))
        return metrics


@dataclass
class Books:
    tenant: Tenant
    cluster: Cluster
    finance: User
    source: NotebookPods
    run: Callable[..., Notebook]
    collect: Callable[[], None]


@pytest.fixture
def books(a100_tenant, developer, finance_user, catalog: dict[str, Offering]) -> Books:
    cluster = cluster_create(actor=None, name="east")
    metering_begin(cluster=cluster, at=BEGIN)
    source = NotebookPods()
    hours: set[datetime] = set()

    def run(starts: datetime, hours_held: float, *, cores: str, memory_gib: int) -> Notebook:
        """A notebook on a whole A100 from `starts` for `hours_held`, its pod requesting
        `cores` and `memory_gib` all that time."""
        allocation = allocation_of(developer, a100_tenant, catalog[WHOLE])
        notebook = launch(developer, allocation, cpu_cores=cores, memory_gib=memory_gib)
        ends = starts + timedelta(hours=hours_held)
        GpuRequest.objects.filter(pk=allocation.pk).update(starts_at=starts, ends_at=ends)
        Notebook.objects.filter(pk=notebook.pk).update(created_at=starts)
        namespace = cluster.namespace_for(a100_tenant.slug)
        pod = f"{notebook.kubernetes_name}-0"
        source.pods.append(Pod(namespace, pod, Decimal(cores), memory_gib * GIB, starts, ends))
        moment = hour_floor(starts)
        while moment < ends:
            hours.add(moment)
            moment += HOUR
        return notebook

    def collect() -> None:
        for hour in sorted(hours):
            window_collect(cluster, hour, source)
        MeteringState.objects.filter(cluster=cluster).update(complete_until=END)

    return Books(a100_tenant, cluster, finance_user, source, run, collect)


def card(books: Books, gpu: str, effective: date, cpu: str | None, ram: str | None) -> RateCard:
    return rate_card_create(
        actor=books.finance,
        gpu_model=GpuModel.objects.get(slug="a100-80gb"),
        backend=None,
        currency="EUR",
        price_per_gpu_eq_hour=gpu,
        price_per_cpu_core_hour=cpu,
        price_per_ram_gib_hour=ram,
        effective_from=effective,
    )


def lines(books: Books) -> list[tuple[str, Fraction, Decimal | None, Decimal]]:
    priced = tenant_month_priced(books.tenant, MONTH, basis="reserved")
    return [(line.unit, line.quantity, line.rate, line.amount) for line in priced.lines]


GPU_H, CPU_H, RAM_H = "GPU-eq-hour", "CPU core-hour", "memory GiB-hour"


@pytest.mark.parametrize(
    ("case", "pods", "cards", "expected"),
    [
        (
            "4 cores and 16 GiB for 10 hours: 40 core-hours and 160 GiB-hours beside the GPU",
            [(BEGIN + DAY, 10, "4", 16)],
            [("2.00", MONTH, "0.05", "0.01")],
            [
                (GPU_H, Fraction(10), Decimal("2.0000"), Decimal("20.00")),
                (CPU_H, Fraction(40), Decimal("0.0500"), Decimal("2.00")),
                (RAM_H, Fraction(160), Decimal("0.0100"), Decimal("1.60")),
            ],
        ),
        (
            "a card without CPU and memory prices gives no such lines",
            [(BEGIN + DAY, 10, "4", 16)],
            [("2.00", MONTH, None, None)],
            [(GPU_H, Fraction(10), Decimal("2.0000"), Decimal("20.00"))],
        ),
        (
            "a card with a CPU price only charges CPU",
            [(BEGIN + DAY, 3, "0.5", 2)],
            [("1.00", MONTH, "0.10", None)],
            [
                (GPU_H, Fraction(3), Decimal("1.0000"), Decimal("3.00")),
                (CPU_H, Fraction(3, 2), Decimal("0.1000"), Decimal("0.15")),
            ],
        ),
        (
            "a price change in mid-month splits them by the day",
            [(BEGIN + 9 * DAY + timedelta(hours=20), 8, "4", 16)],
            [("2.00", MONTH, "0.05", "0.01"), ("3.00", MONTH + 10 * DAY, "0.10", None)],
            [
                (GPU_H, Fraction(4), Decimal("2.0000"), Decimal("8.00")),
                (CPU_H, Fraction(16), Decimal("0.0500"), Decimal("0.80")),
                (RAM_H, Fraction(64), Decimal("0.0100"), Decimal("0.64")),
                (GPU_H, Fraction(4), Decimal("3.0000"), Decimal("12.00")),
                (CPU_H, Fraction(16), Decimal("0.1000"), Decimal("1.60")),
            ],
        ),
        (
            "half a cent rounds up once per line, as every line",
            [(BEGIN + DAY, 1, "1", 1)],
            [("1.00", MONTH, "0.125", "0.005")],
            [
                (GPU_H, Fraction(1), Decimal("1.0000"), Decimal("1.00")),
                (CPU_H, Fraction(1), Decimal("0.1250"), Decimal("0.13")),
                (RAM_H, Fraction(1), Decimal("0.0050"), Decimal("0.01")),
            ],
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_cpu_and_memory_lines(books: Books, case, pods, cards, expected) -> None:
    for starts, hours_held, cores, memory_gib in pods:
        books.run(starts, hours_held, cores=cores, memory_gib=memory_gib)
    for gpu, effective, cpu, ram in cards:
        card(books, gpu, effective, cpu, ram)
    books.collect()

    assert lines(books) == expected, case
    priced = tenant_month_priced(books.tenant, MONTH, basis="reserved")
    assert priced.total == sum((line[3] for line in expected), Decimal("0.00"))
    # Each line is the notebook's, with its model, offering and user; only GPU lines used GPUs.
    notebook = Notebook.objects.get()
    assert {(line.offering, line.user, line.workload) for line in priced.lines} == {
        ("NVIDIA A100-SXM4-80GB, whole GPU", notebook.owner.username, notebook.name)
    }
    assert all(line.used_gpu_hours == 0 for line in priced.lines if line.unit != GPU_H)


def test_the_usage_records_and_the_daily_rollup_carry_cpu_and_memory(books: Books) -> None:
    books.run(BEGIN + DAY + 30 * timedelta(minutes=1), 2, cores="4", memory_gib=16)
    books.collect()

    hourly = list(
        UsageRecord.objects.order_by("hour").values_list("hour", "cpu_core_hours", "ram_gib_hours")
    )
    assert hourly == [
        (BEGIN + DAY, Decimal(2), Decimal(8)),  # the pod ran half the hour
        (BEGIN + DAY + HOUR, Decimal(4), Decimal(16)),
        (BEGIN + DAY + 2 * HOUR, Decimal(2), Decimal(8)),
    ]
    [daily] = UsageDaily.objects.values_list("cpu_core_hours", "ram_gib_hours")
    assert daily == (Decimal(8), Decimal(32))


def test_the_spend_of_an_open_month_counts_cpu_and_memory(books: Books) -> None:
    books.run(BEGIN + DAY, 10, cores="4", memory_gib=16)
    card(books, "2.00", MONTH, "0.05", "0.01")
    books.collect()

    [row] = spend_for(books.finance, MONTH, MONTH).rows

    assert (row.final, row.currency, row.total) == (False, "EUR", Decimal("23.60"))


def csv_rows(response: Any) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_a_closed_month_stores_them_and_the_downloads_show_each_lines_unit(
    books: Books, client_for
) -> None:
    books.run(BEGIN + DAY, 10, cores="4", memory_gib=16)
    card(books, "2.00", MONTH, "0.05", "0.01")
    books.collect()

    period_close(actor=books.finance, month=MONTH)
    # Prices and usage change afterwards; the stored lines do not.
    card(books, "9.00", TODAY.replace(day=1), "1.00", "1.00")
    UsageRecord.objects.update(cpu_core_hours=0, ram_gib_hours=0)

    statement = Statement.objects.get(period__month=MONTH, tenant=books.tenant)
    stored = [(line.unit, line.quantity, line.rate, line.amount) for line in statement.lines.all()]
    assert stored == [
        (GPU_H, Fraction(10), Decimal("2.0000"), Decimal("20.00")),
        (CPU_H, Fraction(40), Decimal("0.0500"), Decimal("2.00")),
        (RAM_H, Fraction(160), Decimal("0.0100"), Decimal("1.60")),
    ]
    assert statement.total == Decimal("23.60")

    client = client_for(books.finance)
    path = f"{API}statements/{MONTH:%Y-%m}-{books.tenant.slug}/lines/"
    rows = csv_rows(client.get(path, {"format": "csv"}))
    assert [(row["unit"], row["quantity"], row["amount"]) for row in rows] == [
        (GPU_H, "10", "20.00"),
        (CPU_H, "40", "2.00"),
        (RAM_H, "160", "1.60"),
    ]
    assert sum(Decimal(row["amount"]) for row in rows) == statement.total
    header, cells = xlsx_rows(client.get(path, {"format": "xlsx"}))
    by_name = [dict(zip(header, row, strict=True)) for row in cells]
    assert [row["unit"] for row in by_name] == [GPU_H, CPU_H, RAM_H]
    assert sum(Decimal(str(row["amount"])) for row in by_name) == statement.total
    as_json = client.get(path).json()["results"]
    assert [line["unit"] for line in as_json] == [GPU_H, CPU_H, RAM_H]
    page = client.get(f"/chargeback/statements/{MONTH:%Y-%m}-{books.tenant.slug}/")
    assert page.status_code == 200
    assert f"<td>{CPU_H}</td>" in page.text
    assert f"<td>{RAM_H}</td>" in page.text


def test_a_budget_in_gpu_eq_hours_counts_only_the_gpu_lines(books: Books) -> None:
    books.run(BEGIN + DAY, 10, cores="4", memory_gib=16)
    card(books, "2.00", MONTH, "0.05", "0.01")
    books.collect()
    in_hours = Budget.objects.create(
        tenant=books.tenant, unit=BudgetUnit.GPU_EQ_HOURS, amount=Decimal(100)
    )

    status = budget_status(in_hours, now=END - HOUR)

    assert status.spent == Decimal("10.00")
    assert status.series[-1].spent == Decimal("10.00")
    in_money = Budget(
        tenant=books.tenant, unit=BudgetUnit.MONEY, amount=Decimal(100), currency="EUR"
    )
    money = budget_status(in_money, now=END - HOUR)
    assert money.spent == money.series[-1].spent == Decimal("23.60")


# The rate card: API and page


def post(client: Client, body: dict[str, Any]) -> Any:
    return client.post(f"{API}rate-cards/", body, content_type="application/json")


BODY = {
    "gpu_model": "a100-80gb", "backend": None, "currency": "EUR",
    "price_per_gpu_eq_hour": "2.50", "effective_from": TODAY.isoformat(),
}  # fmt: skip


def test_finance_adds_cpu_and_memory_prices_through_the_api(
    client_for, finance_user, catalog
) -> None:
    client = client_for(finance_user)

    with_them = post(
        client, {**BODY, "price_per_cpu_core_hour": "0.05", "price_per_ram_gib_hour": "0.01"}
    )
    without = post(client, {**BODY, "price_per_cpu_core_hour": None, "price_per_ram_gib_hour": ""})

    assert with_them.status_code == without.status_code == 201, with_them.content
    assert (
        with_them.json()["price_per_cpu_core_hour"],
        with_them.json()["price_per_ram_gib_hour"],
    ) == ("0.0500", "0.0100")
    assert (
        without.json()["price_per_cpu_core_hour"],
        without.json()["price_per_ram_gib_hour"],
    ) == (None, None)
    event = AuditEvent.objects.get(action="rate_card.create", target_id=str(with_them.json()["id"]))
    assert event.changes["price_per_cpu_core_hour"] == [None, "0.0500"]
    assert event.changes["price_per_ram_gib_hour"] == [None, "0.0100"]
    listed = client.get(f"{API}rate-cards/").json()["results"]
    assert {card["price_per_cpu_core_hour"] for card in listed} == {"0.0500", None}
    schema = json.loads(
        client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").content
    )
    fields = schema["components"]["schemas"]["RateCardInputRequest"]["properties"]
    assert {"price_per_cpu_core_hour", "price_per_ram_gib_hour"} <= set(fields)


@pytest.mark.parametrize("bad", ["price_per_cpu_core_hour", "price_per_ram_gib_hour"])
@pytest.mark.parametrize(
    "value", ["-1", "NaN", "Infinity", "1e999", "12345678901.5", "0.12345", "two", 0.05]
)
def test_a_bad_cpu_or_memory_price_is_refused_naming_the_field(
    client_for, finance_user, catalog, bad: str, value: Any
) -> None:
    response = post(client_for(finance_user), {**BODY, bad: value})

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], list(error["fields"])) == ("invalid", [bad])
    assert not RateCard.objects.exists()


@pytest.mark.parametrize("bad", ["price_per_cpu_core_hour", "price_per_ram_gib_hour"])
@pytest.mark.parametrize("value", ["-1", "NaN", "1e999"])
def test_the_service_refuses_a_bad_cpu_or_memory_price_naming_the_field(
    finance_user, catalog, bad: str, value: str
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        rate_card_create(
            actor=finance_user, gpu_model=GpuModel.objects.get(slug="a100-80gb"), backend=None,
            currency="EUR", price_per_gpu_eq_hour="2.00", effective_from=TODAY, **{bad: value},
        )  # fmt: skip
    assert list(refused.value.fields) == [bad]


def test_finance_adds_cpu_and_memory_prices_on_the_rates_page(
    client_for, finance_user, catalog
) -> None:
    client = client_for(finance_user)
    form = {
        "gpu_model": "a100-80gb",
        "backend": "",
        "currency": "EUR",
        "price_per_gpu_eq_hour": "2.50",
        "price_per_cpu_core_hour": "0.03",
        "price_per_ram_gib_hour": "",
        "effective_from": TODAY.isoformat(),
    }

    added = client.post("/chargeback/rates/", form, follow=True)

    assert added.redirect_chain == [("/chargeback/rates/", 302)]
    card = RateCard.objects.get()
    assert (card.price_per_cpu_core_hour, card.price_per_ram_gib_hour) == (Decimal("0.03"), None)
    assert '<td class="number" data-testid="cpu-price">0.0300</td>' in added.text
    assert '<td class="number" data-testid="ram-price">not charged</td>' in added.text

    bad = client.post("/chargeback/rates/", {**form, "price_per_ram_gib_hour": "-1"})
    assert bad.status_code == 400
    assert (
        '<p class="field-error" role="alert">Price per memory GiB-hour: Ensure this value is '
        "greater than or equal to 0." in bad.text
    )
    assert RateCard.objects.count() == 1
