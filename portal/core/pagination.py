"""Pages of lists that may hold millions of rows: counted up to a bound, walked by keyset.

Two costs grow with a table, and neither is paid here:
- Counting every row a list may show (`COUNT(*)` over a million requests or audit events on
  every page). `BoundedPaginator` counts at most `COUNT_LIMIT` rows (a `COUNT` over a `LIMIT`,
  an index range at most that long); past it the count says "at least" (`count_exact` false in
  the API, "10,000+" on pages), and page numbers stop at the bound. A list of every row of a
  table (an admin's, unfiltered) that PostgreSQL estimates at over `ESTIMATED_BEYOND` rows is
  not counted at all: it is "10,000+" from the estimate, which each process keeps for
  `ESTIMATE_KEPT_SECONDS` (an admin's pages of such a table run one query fewer).
- Skipping rows with OFFSET to reach a deep page. The API's `next` link is a keyset cursor
  (`?cursor=`): the values of the list's order columns in its last row, so the next page starts
  where the previous ended with an index range, at any depth. Page numbers stay for the first
  pages (`?page=`), as the API contract says.

A list whose visibility filter is a union of branches (a lead's requests: their own OR their
tenants', `portal.core.visibility.any_of`) is read branch by branch: a page takes the first
rows of each branch in the list's order, each from its own index, and orders those few; the
count counts each branch up to the bound (without the rows of the branches counted before it,
so that the counts add up). Given the OR instead, PostgreSQL walks the newest-first
index of the whole table past every other tenant's rows, and counts with a heap scan.
"""

import base64
import binascii
import json
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from cachetools import TTLCache
from django.core.paginator import EmptyPage, Page, PageNotAnInteger, Paginator
from django.db import connections, models
from django.db.models import BooleanField, Count, Q, QuerySet, Window
from django.db.models.expressions import RawSQL
from django.utils.functional import cached_property
from django.utils.translation import gettext as _
from rest_framework import exceptions
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from portal.core.errors import NotFound, ValidationFailed
from portal.core.visibility import branches_of, disjoint_branches_of

# The most rows a list counts. Past it a page says "10,000+", and page numbers stop at the
# page holding the 10,000th row; the API's cursors go on.
COUNT_LIMIT = 10_000
CURSOR_PARAM = "cursor"
# A list of every row of a table (an admin's requests, notebooks or audit events) is not
# counted when PostgreSQL estimates the table at more than this: it says "10,000+" from the
# estimate (counting the bound's 10,001 rows took 1.3 ms of every admin's `notebooks/`).
# Twice the bound, so that an estimate behind the table matters only once half of its rows are
# gone since it was last analysed, while autovacuum analyses a table once a tenth of it changed
# (`autovacuum_analyze_scale_factor`, 0.1 by default).
ESTIMATED_BEYOND = 2 * COUNT_LIMIT
# How long a process keeps a table's estimate once it is beyond `ESTIMATED_BEYOND`, so that an
# admin's every page of a large table is one query less (`_estimated_or_counted`). The estimate
# itself moves only when the table is analysed; a table emptied to below the bound is counted
# again at most this much later.
ESTIMATE_KEPT_SECONDS = 60.0

# A list's order as (field, descending) pairs.
type Order = list[tuple[models.Field[Any, Any], bool]]


class BoundedPaginator(Paginator):  # type: ignore[type-arg]  # generic only in the stubs
    """Django's paginator, counting at most `COUNT_LIMIT` rows of a queryset. A sequence that
    is not a query (a statement's lines, read by position) gives its length, and its pages go
    as deep as it does."""

    @cached_property
    def _counted(self) -> int:
        """The rows, or `COUNT_LIMIT + 1` when there are more."""
        objects = self.object_list
        if not isinstance(objects, QuerySet):
            return len(objects)
        # Unordered: how many of the first COUNT_LIMIT + 1 rows there are does not depend on
        # the order, and a visibility filter's OR would have its matches sorted to be counted.
        postgres = connections[objects.db].vendor == "postgresql"
        if postgres and _whole_table(objects):
            return _estimated_or_counted(objects)
        if not postgres:
            counted: int = objects.order_by()[: COUNT_LIMIT + 1].count()
            return counted
        # The ids alone, counted: Django's count of a slice would select the list's annotations
        # (its names' subqueries) inside it and build the SQL of each.
        branches = disjoint_branches_of(objects) or [objects]
        # Each branch up to the bound, without the rows of the branches before it: their
        # counts add up (UNION ALL). A UNION of the branches as they are, to count a row of
        # two once, hashed every id (a lead's 2,000 requests: 0.95 -> 0.4 ms of PostgreSQL).
        # The sum reaches the bound exactly when the rows do.
        union, params = _union(
            [branch.order_by() for branch in branches], COUNT_LIMIT + 1, every=True
        )
        with connections[objects.db].cursor() as cursor:
            # The SQL is Django's compiled queries; every value is a parameter.
            cursor.execute(f"SELECT COUNT(*) FROM ({union}) AS counted", params)  # noqa: S608
            return min(int(cursor.fetchone()[0]), COUNT_LIMIT + 1)

    @cached_property
    def count(self) -> int:
        if not isinstance(self.object_list, QuerySet):
            return self._counted  # a sequence knows its length: exact at any size
        return min(self._counted, COUNT_LIMIT)

    def page(self, number: int | str) -> Page:  # type: ignore[type-arg]
        """The page `number`, its rows read before any count: a page that ends the list says
        how many rows there are (the rows before it and its own), so a short list (one page,
        or the last) is answered in one query, not two. A full page is counted as before."""
        try:
            wanted = int(number)
        except (TypeError, ValueError):
            # Django's answer, without the count its check runs first (a page opened without
            # `?page=` would be counted before its rows, and read without its branches).
            raise PageNotAnInteger(_("That page number is not an integer")) from None
        # Past the counted bound (or not a page at all), a list that is not a query, orphans
        # or a count already made: Django's own way.
        beyond = wanted < 1 or (wanted - 1) * self.per_page > COUNT_LIMIT
        queried = isinstance(self.object_list, QuerySet)
        if beyond or not queried or self.orphans or "_counted" in self.__dict__:
            return super().page(wanted)
        bottom = (wanted - 1) * self.per_page
        top = bottom + self.per_page
        listed = cast("QuerySet[Any]", self.object_list)
        rows: list[Any] = list(first_rows(listed, top)[bottom:top])
        if len(rows) < self.per_page and (rows or wanted == 1):
            self.__dict__["_counted"] = min(bottom + len(rows), COUNT_LIMIT + 1)
        return Page(rows, self.validate_number(wanted), self)

    def get_page(self, number: Any) -> Page:  # type: ignore[type-arg]
        """As Django's: the first page for a number that is not one, the last for one past
        it; read as `page` reads it."""
        try:
            return self.page(number)
        except PageNotAnInteger:
            return self.page(1)
        except EmptyPage:
            return self.page(self.num_pages)

    @property
    def count_exact(self) -> bool:
        """False when there are more rows than `count` says."""
        return self.count == self._counted


def _whole_table(objects: QuerySet[Any]) -> bool:
    """Whether `objects` is every row of its table (no filter, no DISTINCT, no grouping): an
    admin's list of every request or audit event."""
    query = objects.query
    return (
        not query.where
        and not query.distinct
        and query.combinator is None
        and query.group_by is None
        and not query.is_sliced
    )


class BeyondEstimates:
    """The tables PostgreSQL estimated beyond `ESTIMATED_BEYOND` rows, each kept `seconds`, in
    this process. Only "beyond" is kept: a table below the bound is counted on every page, as
    exactly as before. Safe across threads."""

    def __init__(self, seconds: float, timer: Callable[[], float] = time.monotonic) -> None:
        # Keyed by database and table: a handful in all, however long the process runs.
        self._kept: TTLCache[tuple[str, str], bool] = TTLCache(1024, seconds, timer)
        self._lock = threading.Lock()

    def beyond(self, using: str, table: str) -> bool:
        with self._lock:
            return (using, table) in self._kept

    def keep(self, using: str, table: str) -> None:
        with self._lock:
            self._kept[(using, table)] = True

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


beyond_estimates = BeyondEstimates(ESTIMATE_KEPT_SECONDS)


def _estimated_or_counted(objects: QuerySet[Any]) -> int:
    """`COUNT_LIMIT + 1` when PostgreSQL estimates the table at more than `ESTIMATED_BEYOND`
    rows (`pg_class.reltuples`, which ANALYZE and autovacuum keep), else the rows counted up to
    the bound, as for any list; in one query, which counts only when the estimate is lower. An
    estimate beyond the bound is kept `ESTIMATE_KEPT_SECONDS` (`beyond_estimates`): the pages
    read in that time run no query for it."""
    table = objects.model._meta.db_table
    if beyond_estimates.beyond(objects.db, table):
        return COUNT_LIMIT + 1
    bounded, params = _union([objects.order_by()], COUNT_LIMIT + 1)
    with connections[objects.db].cursor() as cursor:
        # The SQL is Django's compiled query; every value is a parameter.
        cursor.execute(
            "SELECT CASE WHEN COALESCE((SELECT reltuples FROM pg_class"  # noqa: S608
            " WHERE oid = to_regclass(%s)), 0) > %s THEN -1"
            f" ELSE (SELECT COUNT(*) FROM ({bounded}) AS counted) END",
            [connections[objects.db].ops.quote_name(table), ESTIMATED_BEYOND, *params],
        )
        counted = int(cursor.fetchone()[0])
    if counted < 0:  # beyond the bound by the estimate: "10,000+", and kept so
        beyond_estimates.keep(objects.db, table)
        return COUNT_LIMIT + 1
    return counted


def _union(
    branches: list[QuerySet[Any]],
    limit: int,
    *,
    every: bool = False,
    columns: Sequence[str] = ("pk",),
) -> tuple[str, list[Any]]:
    """The SQL of the ids (or `columns`) of the first `limit` rows of each of `branches`, as
    one UNION (ALL when `every`). Written from each branch's own SQL: Django's `union()`
    compiles the same queries with as much work again around them, on every page of a lead's
    lists."""
    parts, params = [], []
    for branch in branches:
        sql, branch_params = (
            branch.values(*columns)[:limit].query.get_compiler(using=branch.db).as_sql()
        )
        parts.append(f"({sql})")
        params.extend(branch_params)
    return (" UNION ALL " if every else " UNION ").join(parts), params


def _first_of_union(
    branches: list[QuerySet[Any]], order: Order, limit: int
) -> tuple[str, list[Any]]:
    """The SQL of the ids of the first `limit` rows of the union of `branches`, in `order`
    (plain columns ending with the primary key, as `_order_fields` gives): each branch's first
    `limit` rows by its own index, with only the order's columns, then those few ordered and cut
    to `limit`. So the list reads `limit` whole rows, not `limit` of each branch, each wide
    row of a lead's requests page fetched and sorted (a lead of two tenants: 150 -> 50 rows).
    UNION, not UNION ALL: a row of two branches (a lead's own request in a tenant they lead)
    comes once, so the cut keeps `limit` different rows."""
    union, params = _union(branches, limit, columns=[field.attname for field, _descending in order])
    columns = [f"c{index}" for index in range(len(order))]
    ordered = ", ".join(
        f"{column} {'DESC' if descending else 'ASC'}"
        for column, (_field, descending) in zip(columns, order, strict=True)
    )
    # Django's compiled queries and the order's own column names; every value is a parameter.
    sql = (
        f"SELECT {columns[-1]} FROM ({union}) AS branched ({', '.join(columns)})"  # noqa: S608
        f" ORDER BY {ordered} LIMIT %s"
    )
    return sql, [*params, limit]


def first_rows[M: models.Model](rows: QuerySet[M], number: int) -> QuerySet[M]:
    """`rows`, narrowed where its filter has branches (see the module's docstring) to the first
    `number` rows of each branch in `rows`' order: slice it up to `number` to read the same
    rows as from `rows` itself. On PostgreSQL (SQLite, the demo's, reads the plain filter)."""
    connection = connections[rows.db]
    branches = branches_of(rows) if connection.vendor == "postgresql" else None
    if branches is None or not rows.ordered:
        return rows
    order: Sequence[Any] = rows.query.order_by or rows.model._meta.ordering or ()
    ordered = [branch.order_by(*order) for branch in branches]
    keyset = _order_fields(rows)
    union, params = (
        _union(ordered, number, every=True)
        if keyset is None
        else _first_of_union(ordered, keyset, number)
    )
    # `= ANY(ARRAY(...))` rather than `IN (...)`: the ids are then a value computed first, not
    # a join that PostgreSQL plans with the list's own joins (planning 4.6 -> 1.3 ms).
    quote = connection.ops.quote_name
    pk_column = cast("str", rows.model._meta.pk.column)
    column = f"{quote(rows.model._meta.db_table)}.{quote(pk_column)}"
    among = RawSQL(  # noqa: S611 - Django's compiled queries; every value is a parameter
        f"{column} = ANY(ARRAY({union}))", params, output_field=BooleanField()
    )
    return rows.filter(among)


def first_with_count[M: models.Model](rows: QuerySet[M], limit: int) -> tuple[list[M], int]:
    """The first `limit` of `rows` and how many there are in all, in one query whatever the
    number (a window count computed before the LIMIT): for panels that show a few and say how
    many, which a separate COUNT would make one query more once they are full."""
    found = list(rows.annotate(rows_in_all=Window(Count("pk")))[:limit])
    return found, (found[0].rows_in_all if found else 0)  # type: ignore[attr-defined]


def _order_fields(rows: QuerySet[Any]) -> Order | None:
    """The (field, descending) pairs `rows` is ordered by, when a keyset can follow them: plain
    non-null columns of the model itself, ending with the primary key (so the order is total)."""
    names = list(rows.query.order_by or rows.model._meta.ordering)
    if not names or not all(isinstance(name, str) for name in names):
        return None
    fields = []
    for name in names:
        descending = name.startswith("-")
        attname = name.lstrip("-")
        try:
            field = rows.model._meta.get_field("id" if attname == "pk" else attname)
        except Exception:  # noqa: BLE001 - a related path or an annotation: no keyset
            return None
        if not field.concrete or field.null or field.is_relation:
            return None
        fields.append((field, descending))
    if not fields[-1][0].primary_key:
        return None
    return fields


def cursor_after(rows: QuerySet[Any], row: Any) -> str | None:
    """The cursor of the page that follows `row` in `rows`' order (None when that order has no
    keyset): what a page's next link carries when `row` ends it."""
    order = _order_fields(rows)
    if order is None:
        return None
    return _encode([getattr(row, field.attname) for field, _descending in order])


def _encode(values: Sequence[Any]) -> str:
    plain = [value.isoformat() if isinstance(value, datetime) else value for value in values]
    return base64.urlsafe_b64encode(json.dumps(plain).encode()).decode().rstrip("=")


def _decode(cursor: str, fields: Order) -> list[Any]:
    invalid = ValidationFailed(
        _("cursor: not a cursor of this list; follow the next link of its last page."),
        fields={CURSOR_PARAM: [_("Not a cursor of this list with this sort.")]},
    )
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        raise invalid from None
    if not isinstance(plain, list) or len(plain) != len(fields):
        raise invalid
    try:
        values = [
            field.to_python(value)
            for (field, _descending), value in zip(fields, plain, strict=True)
        ]
    except Exception:  # noqa: BLE001 - to_python raises ValidationError, TypeError, ...
        raise invalid from None
    if any(value is None for value in values):
        raise invalid
    return values


def after(fields: Order, values: list[Any]) -> Q:
    """The rows after `values` in the order of `fields`. The leading column's bound comes
    first and alone (`created_at <= v`), so the scan starts there in the index; the rest breaks
    the ties (`created_at < v OR (created_at = v AND id < w)`)."""

    def beyond(index: int) -> Q:
        field, descending = fields[index]
        strictly = Q(**{f"{field.attname}__{'lt' if descending else 'gt'}": values[index]})
        if index == len(fields) - 1:
            return strictly
        return strictly | (Q(**{field.attname: values[index]}) & beyond(index + 1))

    leading, descending = fields[0]
    bound = Q(**{f"{leading.attname}__{'lte' if descending else 'gte'}": values[0]})
    return bound & beyond(0)


class PagePagination(PageNumberPagination):
    """`?page=` and `?page_size=` for the first pages, counted up to `COUNT_LIMIT`; `next` is a
    keyset cursor where the list's order allows one (`?cursor=`, any depth)."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    django_paginator_class = BoundedPaginator

    # What the page being answered holds (set by paginate_queryset).
    _order: Order | None = None
    _paginator: BoundedPaginator
    _rows: list[Any]
    _more: bool  # rows follow the last one
    _by_cursor: bool = False

    def paginate_queryset(  # type: ignore[override]
        self, queryset: QuerySet[Any], request: Request, view: Any = None
    ) -> list[Any] | None:
        self.request = request
        self._order = _order_fields(queryset) if isinstance(queryset, QuerySet) else None
        cursor = request.query_params.get(CURSOR_PARAM)
        self._by_cursor = cursor is not None
        if cursor is None:
            try:
                rows = super().paginate_queryset(queryset, request, view)
            except exceptions.NotFound:
                raise NotFound(self._past_the_pages(queryset)) from None
            page = cast("Page[Any]", self.page)
            paginator = cast("BoundedPaginator", page.paginator)
            self._paginator = paginator
            self._rows = rows or []
            self._more = page.has_next() or (
                not paginator.count_exact and page.number == paginator.num_pages
            )
            return rows
        if self._order is None:
            raise ValidationFailed(
                _("cursor: this list is read by page numbers."),
                fields={CURSOR_PARAM: [_("This list is read by page numbers.")]},
            )
        size = self.get_page_size(request) or self.page_size
        self.page = None
        self._paginator = BoundedPaginator(queryset, size)
        following = queryset.filter(after(self._order, _decode(cursor, self._order)))
        rows = list(first_rows(following, size + 1)[: size + 1])
        self._rows, self._more = rows[:size], len(rows) > size
        return self._rows

    def _past_the_pages(self, queryset: QuerySet[Any]) -> str:
        """Why a page number is not there: past the last page, or past the counted bound of a
        longer list (then the cursors go on)."""
        if self._order is not None and not BoundedPaginator(queryset, 1).count_exact:
            return _(
                "There is no such page: page numbers stop at %(limit)s rows. Follow the next"
                " link (a cursor) to read further, or narrow the list with its filters."
            ) % {"limit": f"{COUNT_LIMIT:,}"}
        return _("There is no such page.")

    def get_next_link(self) -> str | None:
        if self._order is None:
            return super().get_next_link()
        if not self._more or not self._rows or self.request is None:
            return None
        values = [getattr(self._rows[-1], field.attname) for field, _descending in self._order]
        url = remove_query_param(self.request.build_absolute_uri(), self.page_query_param)
        return replace_query_param(url, CURSOR_PARAM, _encode(values))

    def get_previous_link(self) -> str | None:
        if self._by_cursor:
            return None  # cursors go forward; the first page is the link without one
        return super().get_previous_link()

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "count": self._paginator.count,
                "count_exact": self._paginator.count_exact,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        described = super().get_paginated_response_schema(schema)
        properties = described["properties"]
        properties["count"]["description"] = (
            f"rows in the list, counted up to {COUNT_LIMIT:,} (see count_exact)"
        )
        properties["count_exact"] = {
            "type": "boolean",
            "description": f"false when the list holds more than {COUNT_LIMIT:,} rows",
        }
        properties["next"]["description"] = "the next page: a cursor link where the list allows"
        described["required"] = ["count", "count_exact", "results"]
        return described

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        parameters.append(
            {
                "name": CURSOR_PARAM,
                "required": False,
                "in": "query",
                "description": "where to go on: taken from a page's next link",
                "schema": {"type": "string"},
            }
        )
        return parameters
