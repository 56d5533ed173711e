"""The optional "unreserved capacity" line (PORTAL_CHARGE_UNRESERVED), table-driven.

Usage comes from the allocation ledger as in test_pricing (allocations through the services,
moved into last month, collected by the real metering code); the cluster's capacity comes with
each window from a metrics source at the network edge that reports the GPUs the DCGM exporter
would (8 A100s by default) and no pods. Capacity collection from a real Prometheus is tested in
tests/metering/test_capacity.py.
"""

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.billing.models import Statement
from portal.billing.pricing import RateBook, month_bounds, tenant_month_priced
from portal.billing.services import period_close, rate_card_create
from portal.billing.unreserved import unreserved_capacity
from portal.catalog.models import GpuModel, Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import MeteringState
from portal.metering.sources import (
    DeviceUse,
    GpuCapacity,
    PodRequest,
    PodRunning,
    WindowMetrics,
)
from tenants.models import Tenant
from tenants.services import quota_set, tenant_update
from tests.billing.test_pricing import BEGIN, DAY, END, MONTH

A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
UNRESERVED = "unreserved capacity"
H = timedelta(hours=1)


class GpusOnly:
    """A metrics source at the network edge: the DCGM exporter's GPUs, present all hour (GPUs
    per model name), and the pods (namespace, pod, whole A100s) running all hour, if any."""

    def __init__(self, gpus: dict[str, int], pods: Iterable[tuple[str, str, int]] = ()) -> None:
        self.gpus = gpus
        self.pods = list(pods)

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        metrics = WindowMetrics(
            capacity=[GpuCapacity(name, Fraction(count)) for name, count in self.gpus.items()]
        )
        for namespace, pod, gpus in self.pods:
            metrics.requests.append(PodRequest(namespace, pod, "nvidia_com_gpu", Decimal(gpus)))
            metrics.running.append(PodRunning(namespace, pod, 3600))
            metrics.devices.append(
                DeviceUse(namespace, pod, "node-1", f"GPU-{pod}", A100, "", Decimal(0), Decimal(0))
            )
        return metrics


@dataclass
class Books:
    cluster: Cluster
    tenants: dict[str, Tenant]
    members: dict[str, User]
    finance: User
    hours: set[datetime]

    def allocate(
        self, tenant: str, offering: Offering, count: int, starts: datetime, hours_held: int
    ) -> None:
        allocation = gpu_request_submit(
            actor=self.members[tenant], tenant=self.tenants[tenant], offering=offering, count=count
        )
        GpuRequest.objects.filter(pk=allocation.pk).update(
            starts_at=starts, ends_at=starts + hours_held * H
        )
        self.hours.update(hour_floor(starts) + index * H for index in range(hours_held))

    def collect(self, gpus: dict[str, int], pods: Iterable[tuple[str, str, int]] = ()) -> None:
        """Collect every hour allocated, the cluster having `gpus` all along (and `pods`)."""
        for hour in sorted(self.hours):
            window_collect(self.cluster, hour, GpusOnly(gpus, pods))
        MeteringState.objects.filter(cluster=self.cluster).update(complete_until=END)


@pytest.fixture
def books(tenant_a, tenant_b, developer, outsider, admin_user, finance_user, catalog) -> Books:
    """Tenants vision (developer) and nlp (outsider), each with 8 GPU-eq of A100 and of H100,
    auto-approved, on one metered cluster."""
    for tenant in (tenant_a, tenant_b):
        for model in ("a100-80gb", "h100-80gb"):
            quota_set(
                actor=admin_user,
                tenant=tenant,
                gpu_model=GpuModel.objects.get(slug=model),
                gpu_eq=8,
            )
        tenant_update(
            actor=admin_user, tenant=tenant, auto_approve_gpu_eq="8", auto_approve_hours=24
        )
    cluster = cluster_create(actor=None, name="east")
    metering_begin(cluster=cluster, at=BEGIN)
    return Books(
        cluster,
        {"vision": tenant_a, "nlp": tenant_b},
        {"vision": developer, "nlp": outsider},
        finance_user,
        set(),
    )


def card(books: Books, price: str, effective, model: str = "a100-80gb") -> None:
    rate_card_create(
        actor=books.finance,
        gpu_model=GpuModel.objects.get(slug=model),
        backend=None,
        currency="EUR",
        price_per_gpu_eq_hour=price,
        effective_from=effective,
    )


def unreserved(tenant: Tenant) -> list[tuple[str, Fraction, Decimal | None, Decimal]]:
    priced = tenant_month_priced(tenant, MONTH, basis="reserved")
    return [
        (line.gpu_model, line.quantity, line.rate, line.amount)
        for line in priced.lines
        if line.workload == UNRESERVED and (line.offering, line.user) == ("", "")
    ]


DAY10 = BEGIN + 9 * DAY


def a100(
    quantity: Fraction, rate: str | None, amount: str
) -> tuple[str, Fraction, Decimal | None, Decimal]:
    return (A100, quantity, Decimal(rate) if rate else None, Decimal(amount))


@pytest.mark.parametrize(
    ("case", "setting", "gpus", "allocations", "cards", "expected"),
    [
        (
            "1/4 and 1/2 of 8 GPUs' hours reserved: the unreserved quarter is split 1:2",
            True,
            {A100: 8},
            [("vision", "a100-80gb-whole", 2, DAY10, 10), ("nlp", "a100-80gb-whole", 4, DAY10, 10)],
            [("3.00", MONTH)],
            {
                "vision": [a100(Fraction(20, 3), "3.0000", "20.00")],
                "nlp": [a100(Fraction(40, 3), "3.0000", "40.00")],
            },
        ),
        (
            "fractional reservations count exactly (a 1/7 MIG slice for 7 hours is 1)",
            True,
            {A100: 1},
            [
                ("vision", "a100-80gb-mig-1g-10gb", 1, DAY10, 7),
                ("nlp", "a100-80gb-mig-3g-40gb", 1, DAY10, 7),
            ],
            [("1.00", MONTH)],
            {
                "vision": [a100(Fraction(3, 4), "1.0000", "0.75")],
                "nlp": [a100(Fraction(9, 4), "1.0000", "2.25")],
            },
        ),
        (
            "a tenant reserving none of a model gets no line of it",
            True,
            {A100: 8},
            [("vision", "h100-80gb-whole", 2, DAY10, 10), ("nlp", "a100-80gb-whole", 4, DAY10, 10)],
            [("3.00", MONTH)],
            {
                "vision": [],  # and no H100 line: no H100 capacity was seen
                "nlp": [a100(Fraction(40), "3.0000", "120.00")],
            },
        ),
        (
            "capacity below what was reserved gives no line, never a negative one",
            True,
            {A100: 4},
            [("vision", "a100-80gb-whole", 2, DAY10, 10), ("nlp", "a100-80gb-whole", 4, DAY10, 10)],
            [("3.00", MONTH)],
            {"vision": [], "nlp": []},
        ),
        (
            "with the setting off there is no line",
            False,
            {A100: 8},
            [("vision", "a100-80gb-whole", 2, DAY10, 10), ("nlp", "a100-80gb-whole", 4, DAY10, 10)],
            [("3.00", MONTH)],
            {"vision": [], "nlp": []},
        ),
        (
            "a price change in mid-month gives a line per price, each rounded once",
            True,
            {A100: 8},
            # 4 hours on each side of midnight before the 11th, when the price changes.
            [
                ("vision", "a100-80gb-whole", 2, DAY10 + 20 * H, 8),
                ("nlp", "a100-80gb-whole", 4, DAY10 + 20 * H, 8),
            ],
            [("2.00", MONTH), ("3.00", MONTH + 10 * DAY)],
            {
                "vision": [
                    a100(Fraction(8, 3), "2.0000", "5.33"),
                    a100(Fraction(8, 3), "3.0000", "8.00"),
                ],
                "nlp": [
                    a100(Fraction(16, 3), "2.0000", "10.67"),
                    a100(Fraction(16, 3), "3.0000", "16.00"),
                ],
            },
        ),
        (
            "a model without a rate card is listed at no charge",
            True,
            {A100: 8},
            [("vision", "a100-80gb-whole", 2, DAY10, 10), ("nlp", "a100-80gb-whole", 4, DAY10, 10)],
            [],
            {
                "vision": [a100(Fraction(20, 3), None, "0.00")],
                "nlp": [a100(Fraction(40, 3), None, "0.00")],
            },
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_unreserved_capacity_line(
    books: Books, catalog, settings, case, setting, gpus, allocations, cards, expected
) -> None:
    settings.PORTAL_CHARGE_UNRESERVED = setting
    for tenant, offering, count, starts, hours_held in allocations:
        books.allocate(tenant, catalog[offering], count, starts, hours_held)
    for price, effective in cards:
        card(books, price, effective)
    books.collect(gpus)

    assert {slug: unreserved(tenant) for slug, tenant in books.tenants.items()} == expected, case


def test_a_closed_month_keeps_its_unreserved_line_and_page_and_csv_show_it(
    books: Books, catalog, settings, client_for
) -> None:
    settings.PORTAL_CHARGE_UNRESERVED = True
    books.allocate("vision", catalog["a100-80gb-whole"], 2, DAY10, 10)
    books.allocate("nlp", catalog["a100-80gb-whole"], 4, DAY10, 10)
    card(books, "3.00", MONTH)
    books.collect({A100: 8})

    period_close(actor=books.finance, month=MONTH)
    # The capacity collected again, differently: open pricing would move, the closed month not.
    books.collect({A100: 16})
    assert unreserved(books.tenants["vision"]) == [
        (A100, Fraction(100, 3), Decimal("3.0000"), Decimal("100.00"))
    ]

    statement = Statement.objects.get(period__month=MONTH, tenant=books.tenants["vision"])
    assert statement.total == Decimal("60.00") + Decimal("20.00")
    stored = statement.lines.get(workload=UNRESERVED)
    assert (stored.gpu_model, stored.offering, stored.user) == (A100, "", "")
    assert (stored.quantity, stored.unit, stored.rate, stored.amount) == (
        Fraction(20, 3),
        "GPU-eq-hour",
        Decimal("3.0000"),
        Decimal("20.00"),
    )
    client = client_for(books.finance)
    page = client.get(f"/chargeback/statements/{MONTH:%Y-%m}-vision/").text
    assert UNRESERVED in page
    assert 'title="20/3">6.667</td>' in page
    response = client.get(f"/chargeback/statements/{MONTH:%Y-%m}-vision/csv/")
    header, *rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    line = next(dict(zip(header, row, strict=True)) for row in rows if UNRESERVED in row)
    assert (line["workload"], line["quantity"], line["amount"], line["status"]) == (
        UNRESERVED,
        "20/3",
        "20.00",
        "final",
    )
    assert sum(Decimal(row[header.index("amount")]) for row in rows) == statement.total


def test_one_call_shares_out_a_month_for_every_tenant_in_two_queries(
    books: Books, catalog, settings, django_assert_num_queries
) -> None:
    settings.PORTAL_CHARGE_UNRESERVED = True
    books.allocate("vision", catalog["a100-80gb-whole"], 2, DAY10, 10)
    books.allocate("nlp", catalog["a100-80gb-whole"], 4, DAY10, 10)
    books.collect({A100: 8})
    rates = RateBook.load()
    begin, end = month_bounds(MONTH)

    with django_assert_num_queries(2):  # capacity, and every tenant's usage
        month = unreserved_capacity(begin, end, basis="reserved", rates=rates)

    assert [
        [(share.gpu_model, share.workload, share.quantity) for share in month.of(tenant.pk)]
        for tenant in books.tenants.values()
    ] == [[(A100, UNRESERVED, Fraction(20, 3))], [(A100, UNRESERVED, Fraction(40, 3))]]
    settings.PORTAL_CHARGE_UNRESERVED = False
    with django_assert_num_queries(0):
        assert unreserved_capacity(begin, end, basis="reserved", rates=rates).shares == {}


def test_on_the_requested_basis_the_capacity_no_pod_held_is_shared_by_requests(
    books: Books, settings
) -> None:
    settings.PORTAL_CHARGE_UNRESERVED = True
    card(books, "3.00", MONTH)
    books.hours.update(DAY10 + index * H for index in range(10))
    books.collect({A100: 8}, [("t-vision", "job-a", 2), ("t-nlp", "job-b", 4)])

    priced = tenant_month_priced(books.tenants["nlp"], MONTH, basis="requested")

    assert [(line.workload, line.quantity, line.amount) for line in priced.lines] == [
        ("job-b", Fraction(40), Decimal("120.00")),
        ("unrequested capacity", Fraction(40, 3), Decimal("40.00")),
    ]
    assert unreserved(books.tenants["nlp"]) == []  # nothing reserved: no reserved-basis line
