"""Many rows at once. Writing: PostgreSQL's COPY, where turning each row into a model instance
and SQL parameters would cost more than the rest of the work (a window's usage records, a
month's statement lines), elsewhere (the demo's SQLite) `bulk_create`; and `INSERT … SELECT`
for rows made from rows already stored (a month's rollup from its days). Reading: a
`values_list`'s rows as the driver gives them (`plain_rows`)."""

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection, connections, models


def rows_insert(
    model: type[models.Model], fields: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """Insert `rows` into `model`'s table: each row the values of `fields` (attribute names,
    `tenant_id` for a foreign key), in that order. No model's `save` or signals run, as with
    `bulk_create`."""
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(
            (model(**dict(zip(fields, row, strict=True))) for row in rows), batch_size=2000
        )
        return
    statement = f"COPY {_table_columns(model, fields)} FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def rows_insert_select(
    model: type[models.Model], fields: Sequence[str], rows: models.QuerySet[Any, Any]
) -> None:
    """Insert the rows `rows` selects (a `values_list`, its columns in the order of `fields`,
    attribute names as for `rows_insert`) into `model`'s table in one `INSERT … SELECT`: rows
    made from other rows never leave the database."""
    select = _select_sql(rows)
    if select is None:  # a filter no row can match: nothing to insert
        return
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {_table_columns(model, fields)} {select[0]}", select[1])


def plain_rows(rows: models.QuerySet[Any, tuple[Any, ...]]) -> Iterable[tuple[Any, ...]]:
    """The rows of a `values_list` as the driver gives them on PostgreSQL, where psycopg's
    ints, Decimals and dates are what Django's per-value converters would give again (some
    tens of thousands of rows for a month's statements); through those converters elsewhere."""
    if connections[rows.db].vendor != "postgresql":
        return rows
    select = _select_sql(rows)
    if select is None:
        return []
    with connections[rows.db].cursor() as cursor:
        cursor.execute(*select)
        fetched: list[tuple[Any, ...]] = cursor.fetchall()
    return fetched


def counted_sql(querysets: Sequence[models.QuerySet[Any, Any]]) -> tuple[str, list[Any]] | None:
    """The SQL and parameters that count how many rows `querysets` hold together (a row of two
    counted twice) in one query of their own SQL, `SELECT (SELECT COUNT(*) FROM (…)) + …`, to
    be run by `count_of`; None when no row can match. Django's `union(…).count()` of the same
    querysets compiles them with as much work again around them (every lead's page counts its
    approvals queue: 1.5 ms of Python for a 0.1 ms query; make bench), and the SQL can be kept
    and run again with other values of its parameters."""
    parts: list[str] = []
    params: list[Any] = []
    for rows in querysets:
        select = _select_sql(rows.order_by().values("pk"))
        if select is not None:  # a filter no row can match adds nothing
            parts.append(f"(SELECT COUNT(*) FROM ({select[0]}) AS counted)")  # noqa: S608
            params.extend(select[1])
    if not parts:
        return None
    return f"SELECT {' + '.join(parts)}", params


def count_of(using: str, sql: str, params: Sequence[Any]) -> int:
    """Run a count's SQL (`counted_sql`: Django's compiled queries, every value a parameter)."""
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.fetchone()[0])


def _select_sql(rows: models.QuerySet[Any, Any]) -> tuple[str, Sequence[Any]] | None:
    """The SQL and parameters `rows` runs, or None when no row can match (`pk__in=[]`)."""
    try:
        sql, params = rows.query.get_compiler(using=rows.db).as_sql()
    except EmptyResultSet:
        return None
    return str(sql), tuple(params)


def _table_columns(model: type[models.Model], fields: Sequence[str]) -> str:
    """`"table" ("column", …)` of `model` for `fields` (attribute names)."""
    columns = {field.attname: field.column for field in model._meta.concrete_fields if field.column}
    quote = connection.ops.quote_name
    names = ", ".join(quote(columns[name]) for name in fields)
    return f"{quote(model._meta.db_table)} ({names})"
