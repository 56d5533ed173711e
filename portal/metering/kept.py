"""Readings of every tenant's usage, kept in each process until the usage they read changes.

Finance's and admins' readings (`usage/` without a tenant, *All usage*) group every tenant's
rollup rows: a year of 1,000 tenants by GPU model is some 25,000 rows grouped into 2,000 (about
50 ms, 16 of them PostgreSQL's), of which a page shows 50. Reading the next page, or the same
page again, grouped the same rows again. Usage changes only when a window is collected, so each
process keeps its latest readings (`KEEP_ROWS` rows of them in all, the least recently used
going first; a larger reading is not kept), keyed by the question and by what it was read from
(`usage_inputs`, one query):

- the newest id of each table the reading grouped: collecting a window rewrites its day's
  rollup rows and its month's (delete, then insert: ids never used before);
- the windows each cluster has collected (`MeteringState.windows_done`), counted in the
  transaction that writes a window's usage: a window that commits after another cluster's
  window with newer ids still moves them;
- how many clusters are metered, and the newest of them;
- the catalog's version in the shared cache (readings name GPU models and offerings, and
  spend is priced by an offering's sharing backend), where there is one;
- for readings that carry tenants' names and cost centres (spend), the latest time a tenant
  was changed.

The chargeback page's spend chart keeps its open months priced from the rollups the same way
(`portal/billing/spend.py`), keyed by the rate cards too.

A reading is kept at most `KEEP_SECONDS`: a change these do not see (usage deleted with nothing
written after it, a user renamed, the catalog changed where there is no shared cache) shows by
then. Callers share the kept rows: they
read them and never change them. Only readings that are the same for every caller are kept:
every tenant's usage, for those who see all of it, and one tenant's from the rollups, for those
who see all of that tenant's (its lead, finance, admins; kept apart, so that many tenants'
small readings do not push out every tenant's). One user's own usage, or a developer's view of
a tenant, is read each time.
"""

import threading
import time
from collections.abc import Callable, Hashable, Sequence

from cachetools import TTLCache
from django.db import connection, models

from portal.catalog.cache import catalog_rows
from portal.core import per_request
from portal.metering.models import MeteringState

# How many rows each kept kind of readings holds in a process (usage rows some 1.3 kB each:
# about 13 MB; three kinds), and for how long at most.
KEEP_ROWS = 10_000
KEEP_SECONDS = 15 * 60


class KeptReadings[T]:
    """Readings of up to `rows` rows in all, the least recently used going first, each kept
    `seconds` at most; a reading of more rows than that is not kept. Safe across threads."""

    def __init__(
        self,
        rows: int = KEEP_ROWS,
        seconds: float = KEEP_SECONDS,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rows = rows
        self._readings: TTLCache[Hashable, tuple[T, ...]] = TTLCache(
            rows, seconds, timer, getsizeof=_rows_of
        )
        self._lock = threading.Lock()

    def read(self, key: Hashable, reading: Callable[[], list[T]]) -> list[T]:
        """The rows kept for `key`, else `reading()`'s, kept. Two callers missing at once both
        read (the later one's rows are kept): no caller waits for another."""
        with self._lock:
            kept = self._readings.get(key)
        if kept is not None:
            return list(kept)
        rows = reading()
        if _rows_of(rows) <= self._rows:
            with self._lock:
                self._readings[key] = tuple(rows)
        return rows


def _rows_of(reading: Sequence[object]) -> int:
    return max(len(reading), 1)  # an empty reading takes a place too


def usage_inputs(
    tables: Sequence[type[models.Model]],
    *,
    counted: Sequence[type[models.Model]] = (),
    stamped: Sequence[type[models.Model]] = (),
) -> tuple[object, ...]:
    """What a reading of `tables` (usage rollups or records) was read from: the newest id of
    each, the windows collected, the clusters metered and the newest of them, and the
    catalog's version (module docstring); the newest id and the number of rows of each of
    `counted`, small tables whose rows are written and deleted but never changed (rate cards);
    and the latest `updated_at` of each of `stamped` (tenants, whose names and cost centres
    readings carry). One query, and the catalog's version from the shared cache; asked once
    per read request (a page's tables and charts ask it each)."""
    key = (
        "usage-inputs",
        *(table._meta.label for table in tables),
        "counted",
        *(table._meta.label for table in counted),
        "stamped",
        *(table._meta.label for table in stamped),
    )
    return per_request.once(key, lambda: _inputs_read(tables, counted, stamped))


def _inputs_read(
    tables: Sequence[type[models.Model]],
    counted: Sequence[type[models.Model]],
    stamped: Sequence[type[models.Model]],
) -> tuple[object, ...]:
    # Table names of our models; no value from outside.
    quote = connection.ops.quote_name
    newest = [
        f"(SELECT MAX(id) FROM {quote(table._meta.db_table)})"  # noqa: S608
        for table in [*tables, *counted]
    ]
    counts = [f"(SELECT COUNT(*) FROM {quote(table._meta.db_table)})" for table in counted]  # noqa: S608
    stamps = [f"(SELECT MAX(updated_at) FROM {quote(table._meta.db_table)})" for table in stamped]  # noqa: S608
    states = quote(MeteringState._meta.db_table)
    sql = (
        f"SELECT {', '.join([*newest, *counts, *stamps])}, "  # noqa: S608
        f"(SELECT COALESCE(SUM(windows_done), 0) FROM {states}), "
        f"(SELECT COUNT(*) FROM {states}), (SELECT MAX(id) FROM {states})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = tuple(cursor.fetchone())
    catalog = catalog_rows()
    return (*row, None if catalog is None else catalog.version)
