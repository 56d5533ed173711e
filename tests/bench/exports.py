"""The exports and the month of statements of issue 19's target 4, on the portal the read
benchmark serves (tests/bench/bench_portal_reads.py), after its reads.

- The audit log's CSV as the admin (`/api/v1/audit-events/?format=csv`: every event, 1,000,000
  at scale 1.0) and the biggest statement's CSV as finance (`/api/v1/statements/<id>/lines/
  ?format=csv`, 100,000 lines and more), each downloaded once by one client that streams it to
  a file: lines a second, and the peak resident memory (VmHWM) of the workers before and after.
  The download is then checked, untimed: as many rows as the database holds, and the
  statement's amounts adding up to its stored total.
- A closed month's statements for every tenant, as finance reads them through the API: every
  page, following `next`, timed as a whole; checked: one statement per tenant.
- Closing a month for every tenant (`month_close`), last: an earlier closed month reopened and
  closed again through the API, the close timed; checked: a statement per tenant with usage.
"""

import csv
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import requests

from tests.bench.serving import Gunicorn

LINES_PER_SECOND_TARGET = 100_000
# A streamed export keeps a chunk or two of rows in memory, never the whole file: the workers'
# peak resident memory may grow by this much at most while it runs.
FLAT_MEMORY_MIB = 50.0
MONTH_SECONDS_TARGET = 2.0


@dataclass
class Export:
    name: str
    rows: int  # data rows in the download (the header not counted)
    expected_rows: int
    seconds: float
    megabytes: float
    peak_before_mib: float
    peak_after_mib: float
    total_ok: bool = True

    @property
    def per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0

    @property
    def growth_mib(self) -> float:
        return self.peak_after_mib - self.peak_before_mib


def _download(url: str, token: str, out: Path) -> tuple[float, int]:
    """Stream `url` to `out`; the seconds it took and its size in bytes."""
    size = 0
    started = time.perf_counter()
    with (
        requests.get(
            url, headers={"Authorization": f"Bearer {token}"}, stream=True, timeout=900
        ) as response,
        out.open("wb") as file,
    ):
        assert response.status_code == 200, f"{url}: {response.status_code} {response.text[:300]}"
        for chunk in response.iter_content(chunk_size=1 << 20):
            size += len(chunk)
            file.write(chunk)
    return time.perf_counter() - started, size


def _rows(path: Path, amount_column: str = "") -> tuple[int, Decimal]:
    """Data rows of the CSV at `path`, and the sum of `amount_column` when named."""
    count, total = 0, Decimal(0)
    with path.open(newline="", encoding="utf-8") as file:
        reader = csv.reader(file)
        header = next(reader)
        index = header.index(amount_column) if amount_column else -1
        for row in reader:
            count += 1
            if index >= 0:
                total += Decimal(row[index])
    return count, total


def _export(
    name: str, portal: Gunicorn, path: str, token: str, out: Path, expected_rows: int
) -> tuple[Export, Path]:
    before = max(portal.workers_rss_mib("VmHWM"), default=0.0)
    seconds, size = _download(f"http://127.0.0.1:{portal.port}{path}", token, out)
    after = max(portal.workers_rss_mib("VmHWM"), default=0.0)
    rows, _ = _rows(out)
    export = Export(name, rows, expected_rows, seconds, size / 1e6, before, after)
    return export, out


def exports(
    database_url: str, portal: Gunicorn, personas: dict[str, Any], workdir: Path
) -> list[Export]:
    """The audit log's CSV and the biggest statement's CSV, each downloaded and checked."""
    with psycopg.connect(database_url) as conn:
        events = conn.execute("SELECT count(*) FROM core_auditevent").fetchone()
        biggest = conn.execute(
            "SELECT p.month, t.slug, s.total, count(l.id) FROM billing_statement s"
            " JOIN billing_period p ON p.id = s.period_id"
            " JOIN tenants_tenant t ON t.id = s.tenant_id"
            " JOIN billing_statementline l ON l.statement_id = s.id"
            " GROUP BY p.month, t.slug, s.total ORDER BY count(l.id) DESC LIMIT 1"
        ).fetchone()
    assert events is not None
    assert biggest is not None
    audit, _ = _export(
        "audit events CSV (admin)",
        portal,
        "/api/v1/audit-events/?format=csv",
        personas["admin"]["token"],
        workdir / "audit.csv",
        events[0],
    )
    statement_month, slug, stored_total, lines = biggest
    statement, path = _export(
        f"statement CSV {statement_month:%Y-%m}-{slug} (finance)",
        portal,
        f"/api/v1/statements/{statement_month:%Y-%m}-{slug}/lines/?format=csv",
        personas["finance"]["token"],
        workdir / "statement.csv",
        lines,
    )
    _, total = _rows(path, "amount")
    statement.total_ok = total == stored_total
    for name in ("audit.csv", "statement.csv"):
        (workdir / name).unlink(missing_ok=True)
    return [audit, statement]


@dataclass
class Month:
    month: str
    statements: int
    tenants: int
    pages: int
    seconds: float


def month_of_statements(
    database_url: str, portal: Gunicorn, personas: dict[str, Any], month: str
) -> Month:
    """Every page of a closed month's statements as finance, following `next`."""
    with psycopg.connect(database_url) as conn:
        tenants = conn.execute("SELECT count(*) FROM tenants_tenant").fetchone()
    assert tenants is not None
    headers = {"Authorization": f"Bearer {personas['finance']['token']}"}
    url: str | None = f"http://127.0.0.1:{portal.port}/api/v1/statements/?period={month}"
    seen, pages = 0, 0
    started = time.perf_counter()
    with requests.Session() as session:
        while url:
            response = session.get(url, headers=headers, timeout=60)
            assert response.status_code == 200, f"{url}: {response.status_code}"
            body = response.json()
            seen += len(body["results"])
            pages += 1
            url = body["next"]
    return Month(month, seen, tenants[0], pages, time.perf_counter() - started)


@dataclass
class Close:
    month: str
    status: int
    statements: int  # stored by the close
    tenants: int  # with usage in the month, each of which gets a statement
    records: int  # the month's hourly usage records it priced
    seconds: float


def month_close(database_url: str, portal: Gunicorn, personas: dict[str, Any]) -> Close:
    """Close a month again as the admin does through the API: the closed month six months back
    (its hourly usage in the data set) is reopened, then `POST periods/<month>/close` is timed:
    every tenant's statement priced from the month's usage records and stored. Last, as it
    rewrites that month's statements."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT to_char(month, 'YYYY-MM'), month FROM billing_period WHERE state = 'closed'"
            " ORDER BY month DESC OFFSET 5 LIMIT 1"
        ).fetchone()
        assert row is not None, "this data set has fewer than six closed months"
        month, first = row
        counted = conn.execute(
            "SELECT count(*), count(DISTINCT tenant_id) FROM metering_usagerecord"
            " WHERE hour >= %s AND hour < %s::date + interval '1 month'",
            [first, first],
        ).fetchone()
    assert counted is not None
    headers = {"Authorization": f"Bearer {personas['admin']['token']}"}
    base = f"http://127.0.0.1:{portal.port}/api/v1/periods/{month}"
    with requests.Session() as session:
        reopened = session.post(
            f"{base}/reopen", json={"reason": "make bench: close it again"}, headers=headers
        )
        assert reopened.status_code == 200, f"reopen {month}: {reopened.status_code}"
        started = time.perf_counter()
        closed = session.post(f"{base}/close", headers=headers, timeout=600)
        seconds = time.perf_counter() - started
    with psycopg.connect(database_url) as conn:
        stored = conn.execute(
            "SELECT count(*) FROM billing_statement s JOIN billing_period p"
            " ON p.id = s.period_id WHERE p.month = %s",
            [first],
        ).fetchone()
    assert stored is not None
    return Close(month, closed.status_code, stored[0], counted[1], counted[0], seconds)


def targets(found: list[Export], month: Month, close: Close) -> list[dict[str, Any]]:
    """Target 4 of the issue, each met or not."""
    rows: list[dict[str, Any]] = []
    for export in found:
        rows.append(
            {
                "target": f"{export.name}: >= {LINES_PER_SECOND_TARGET:,} lines/s",
                "met": export.per_second >= LINES_PER_SECOND_TARGET,
                "value": f"{export.per_second:,.0f} lines/s",
            }
        )
        rows.append(
            {
                "target": f"{export.name}: workers' peak memory grows <= {FLAT_MEMORY_MIB:g} MiB",
                "met": export.growth_mib <= FLAT_MEMORY_MIB,
                "value": f"{export.peak_before_mib:.0f} -> {export.peak_after_mib:.0f} MiB",
            }
        )
    rows.append(
        {
            "target": f"statements of {month.month} for {month.tenants} tenants: <= "
            f"{MONTH_SECONDS_TARGET:g} s",
            "met": month.seconds <= MONTH_SECONDS_TARGET,
            "value": f"{month.seconds:.2f} s in {month.pages} pages",
        }
    )
    rows.append(
        {
            "target": f"closing {close.month} for {close.tenants} tenants: <= "
            f"{MONTH_SECONDS_TARGET:g} s",
            "met": close.status == 200 and close.seconds <= MONTH_SECONDS_TARGET,
            "value": f"{close.seconds:.2f} s for {close.records:,} usage records",
        }
    )
    return rows


def problems(found: list[Export], month: Month, close: Close) -> list[str]:
    """What makes the benchmark fail: a download that is not what the database holds."""
    wrong = [
        f"{e.name}: {e.rows} rows, the database holds {e.expected_rows}"
        for e in found
        if e.rows != e.expected_rows
    ]
    wrong += [f"{e.name}: the amounts do not add up to the total" for e in found if not e.total_ok]
    if month.statements != month.tenants:
        wrong.append(f"{month.month}: {month.statements} statements for {month.tenants} tenants")
    if close.status != 200 or close.statements != close.tenants:
        wrong.append(
            f"closing {close.month}: HTTP {close.status}, {close.statements} statements for"
            f" {close.tenants} tenants with usage"
        )
    return wrong


def lines(found: list[Export], month: Month, close: Close) -> list[str]:
    out = [
        f"{e.name}: {e.rows:,} rows, {e.megabytes:.0f} MB in {e.seconds:.2f} s = "
        f"{e.per_second:,.0f} lines/s; workers' peak RSS {e.peak_before_mib:.0f} -> "
        f"{e.peak_after_mib:.0f} MiB"
        for e in found
    ]
    out.append(
        f"statements of {month.month}: {month.statements} in {month.pages} pages "
        f"in {month.seconds:.2f} s"
    )
    out.append(
        f"closing {close.month} (reopened): HTTP {close.status}, {close.statements} statements"
        f" from {close.records:,} usage records in {close.seconds:.2f} s"
    )
    return out
