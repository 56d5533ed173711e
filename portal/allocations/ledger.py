"""The allocation ledger's totals: what approved and active allocations hold, exactly.

The tenants app shows quota left from these; it reads them through the slots
`tenants.selectors.allocations_held` and `allocations_holding`, which this app fills when it
is ready.
"""

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from portal.allocations.models import HOLDING_STATES, GpuRequest
from portal.catalog.gpu_eq import gpu_eq_sums, gpu_eq_sums_query
from portal.core.prepared import KeptRows
from tenants.models import Quota


def gpu_eq_held_by(
    tenant_ids: Iterable[int] | QuerySet[Any], gpu_model_id: int | None = None
) -> dict[tuple[int, int], Fraction]:
    """GPU-eq held per (tenant id, GPU model id), in one query; only `gpu_model_id` if given.
    The tenants are ids (the query's SQL kept for the process: `_HELD`), or a query of ids (run
    inside this one)."""
    if isinstance(tenant_ids, QuerySet):
        rows: Iterable[tuple[Any, ...]] = _held_sums(tenant_ids)
    else:
        ids = list(tenant_ids)
        if not ids:
            return {}
        rows = _HELD.rows(ids) if gpu_model_id is None else _HELD.rows(ids, gpu_model_id)
    sums = gpu_eq_sums(rows)
    return {(int(tenant), int(model)): total for (tenant, model), total in sums.items()}  # type: ignore[call-overload]


def _held_sums(
    tenant_ids: Iterable[int] | QuerySet[Any], gpu_model_id: int | None = None
) -> QuerySet[Any, tuple[Any, ...]]:
    held = GpuRequest.objects.filter(tenant_id__in=tenant_ids, state__in=HOLDING_STATES)
    if gpu_model_id is not None:
        held = held.filter(gpu_model_id=gpu_model_id)
    return gpu_eq_sums_query(held, name="gpu_eq", group_by=("tenant_id", "gpu_model_id"))


# Every page of tenants reads what they hold: its SQL built once per number of tenants (and
# once more with a GPU model).
_HELD = KeptRows(GpuRequest, _held_sums)


def allocations_holding(tenant_id: int, gpu_model_id: int) -> list[tuple[int, Fraction]]:
    """The allocations holding the tenant's quota of one model, newest first: (id, GPU-eq)."""
    held = GpuRequest.objects.filter(
        tenant_id=tenant_id, gpu_model_id=gpu_model_id, state__in=HOLDING_STATES
    ).order_by("-starts_at", "-pk")
    return [(gpu_request.pk, gpu_request.gpu_eq) for gpu_request in held]


# How far below its quota a float sum of what a line holds may fall and the line still be
# looked at exactly: a float sum of n GPU-eq is within n * 2**-52 of its own size of the exact
# sum, so lines of up to a million allocations each are never missed.
_MARGIN = 1e-9


def gpu_eq_maybe_over(tenant_ids: QuerySet[Any]) -> list[tuple[int, int]]:
    """The (tenant id, GPU model id) quota lines of `tenant_ids` (a query of ids) whose
    allocations may hold more than the quota, in one query: what is held summed in floating
    point beside each quota, with a margin that keeps every line over it. A superset: the
    caller decides exactly. An admin's Home asks this of every active tenant, so PostgreSQL
    compares the thousands of lines and only the few near or over their quota come back.

    What is held is summed first, over the few holding requests (`gpurequest_holding`), then
    joined to the quotas: a derived table, which the ORM does not write. Asked per quota line
    instead (a correlated subquery, as before), the 2,000 lines of 1,000 tenants took 2,000
    index probes: 4.4 ms of the panel's query against 1.6 ms."""
    using = tenant_ids.db
    quote = connections[using].ops.quote_name
    ids_sql, ids_params = tenant_ids.query.get_compiler(using=using).as_sql()
    states = ", ".join(["%s"] * len(HOLDING_STATES))
    sql = f"""
        SELECT q.tenant_id, q.gpu_model_id FROM {quote(Quota._meta.db_table)} q
        JOIN (
            SELECT tenant_id, gpu_model_id,
                SUM(CAST(gpu_eq_num AS DOUBLE PRECISION) / gpu_eq_den) AS held
            FROM {quote(GpuRequest._meta.db_table)}
            WHERE state IN ({states}) AND tenant_id IN ({ids_sql})
            GROUP BY tenant_id, gpu_model_id
        ) h ON h.tenant_id = q.tenant_id AND h.gpu_model_id = q.gpu_model_id
        WHERE h.held >= CAST(q.gpu_eq_num AS DOUBLE PRECISION) / q.gpu_eq_den * %s
    """  # noqa: S608 (names from the models, values as parameters)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [*HOLDING_STATES, *ids_params, 1 - _MARGIN])
        return [(tenant_id, gpu_model_id) for tenant_id, gpu_model_id in cursor.fetchall()]
