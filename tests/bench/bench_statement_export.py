"""A closed month's statement with 100,000 lines, downloaded as CSV and as XLSX.

The statement is seeded with bulk inserts (a close through the services would need 100,000
lines of usage first; the close's own cost is not what is measured here). Measured: the time to
download, and the peak of Python memory allocated while the download is produced and read
(tracemalloc), for 10,000 and for 100,000 lines. Checked: both downloads add up to the
statement's total, and memory stays flat (the 100,000-line peak is not ten times the 10,000's).
"""

import csv
import io
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from portal.accounts.models import User
from portal.billing.models import Basis, Period, PeriodState, Statement, StatementLine
from tenants.models import Tenant
from tests.sheets import xlsx_rows

MONTH = date(2026, 9, 1)
SIZES = (10_000, 100_000)


def seed_statement(tenant: Tenant, lines: int, month: date) -> Statement:
    period = Period.objects.create(
        month=month, state=PeriodState.CLOSED, basis=Basis.RESERVED, closed_at=datetime.now(UTC)
    )
    statement = Statement.objects.create(
        period=period, tenant=tenant, cost_centre=tenant.cost_centre, currency="EUR",
        basis=Basis.RESERVED, total=Decimal(0),
    )  # fmt: skip
    total = Decimal(0)
    batch: list[StatementLine] = []
    for position in range(lines):
        # A seventh of a GPU for 1 to 24 hours at 2.1000 EUR: quantities like 17/7.
        hours = position % 24 + 1
        amount = (Decimal(hours) * Decimal("2.1") / 7).quantize(Decimal("0.01"))
        total += amount
        batch.append(
            StatementLine(
                statement=statement,
                position=position,
                gpu_model="NVIDIA A100-SXM4-80GB",
                offering="NVIDIA A100-SXM4-80GB, MIG 1g.10gb",
                user=f"user-{position % 5000}",
                workload=f"notebook-{position}",
                quantity_num=hours,
                quantity_den=7,
                unit="GPU-eq-hour",
                rate=Decimal("2.1000"),
                currency="EUR",
                amount=amount,
                used_gpu_hours=Decimal(hours) / 10,
            )
        )
        if len(batch) == 5000:
            StatementLine.objects.bulk_create(batch)
            batch = []
    StatementLine.objects.bulk_create(batch)
    Statement.objects.filter(pk=statement.pk).update(total=total)
    statement.refresh_from_db()
    return statement


def measured(download: Callable[..., Any], *args: Any) -> tuple[Any, float, int]:
    """What `download(*args)` returns, the seconds it took and its peak of Python memory in
    bytes."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = download(*args)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, seconds, peak


def csv_amounts(response: Any) -> Decimal:
    """Read the streamed CSV chunk by chunk, summing the amount column as it goes."""
    total, header = Decimal(0), None
    for line in csv.reader(
        io.TextIOWrapper(io.BufferedReader(_Chunks(response.streaming_content)), "utf-8")
    ):
        if header is None:
            header = line
            continue
        total += Decimal(line[header.index("amount")])
    return total


def downloaded_csv_total(client: Any, url: str) -> Decimal:
    return csv_amounts(client.get(url, {"format": "csv"}))


class _Chunks(io.RawIOBase):
    """The streamed answer as a file, read chunk by chunk (never joined in memory)."""

    def __init__(self, chunks: Any) -> None:
        self.chunks, self.rest = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.rest:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.rest = chunk.encode() if isinstance(chunk, str) else chunk
        size = min(len(buffer), len(self.rest))
        buffer[:size], self.rest = self.rest[:size], self.rest[size:]
        return size


@pytest.mark.django_db
def bench_statement_export_streams_with_flat_memory(
    client_for: Callable[[User], Any], finance_user: User, tenant_a: Tenant, bench_report: Any
) -> None:
    client = client_for(finance_user)
    results: dict[str, Any] = {}
    peaks: dict[tuple[str, int], int] = {}
    for index, size in enumerate(SIZES):
        month = date(MONTH.year, MONTH.month - index, 1)
        statement = seed_statement(tenant_a, size, month)
        url = f"/api/v1/statements/{month:%Y-%m}-{tenant_a.slug}/lines/"

        csv_total, seconds, peak = measured(downloaded_csv_total, client, url)
        assert csv_total == statement.total, "the CSV adds up to the statement's total"
        peaks["csv", size] = peak
        results[f"csv {size} lines"] = (
            f"{seconds:.2f} s, {size / seconds:,.0f} lines/s, peak {peak / 2**20:.1f} MiB"
        )

        response, seconds, peak = measured(client.get, url, {"format": "xlsx"})
        header, rows = xlsx_rows(response)
        amount = header.index("amount")
        xlsx_total = sum((Decimal(str(row[amount])) for row in rows), Decimal(0))
        assert len(rows) == size
        assert xlsx_total == statement.total, "the XLSX adds up to the statement's total"
        peaks["xlsx", size] = peak
        results[f"xlsx {size} lines"] = (
            f"{seconds:.2f} s, {size / seconds:,.0f} lines/s, peak {peak / 2**20:.1f} MiB"
        )

    bench_report("statement_export", results)
    small, large = SIZES
    for fmt in ("csv", "xlsx"):
        growth = peaks[fmt, large] / peaks[fmt, small]
        assert growth < 2, f"{fmt}: memory grows with the lines ({growth:.1f}x for 10x the lines)"
