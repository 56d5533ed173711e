"""Writing many rows at once: PostgreSQL's COPY, where turning each row into a model instance
and SQL parameters would cost more than the rest of the work (a window's usage records, a
month's statement lines), elsewhere (the demo's SQLite) `bulk_create`; and `INSERT … SELECT`
for rows made from rows already stored (a month's rollup from its days)."""

from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection, models


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
    columns = {field.attname: field.column for field in model._meta.concrete_fields if field.column}
    quote = connection.ops.quote_name
    names = ", ".join(quote(columns[name]) for name in fields)
    statement = f"COPY {quote(model._meta.db_table)} ({names}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def rows_insert_select(
    model: type[models.Model], fields: Sequence[str], rows: models.QuerySet[Any, Any]
) -> None:
    """Insert the rows `rows` selects (a `values_list`, its columns in the order of `fields`,
    attribute names as for `rows_insert`) into `model`'s table in one `INSERT … SELECT`: rows
    made from other rows never leave the database."""
    try:
        select, params = rows.query.get_compiler(using=rows.db).as_sql()
    except EmptyResultSet:  # a filter no row can match: nothing to insert
        return
    columns = {field.attname: field.column for field in model._meta.concrete_fields if field.column}
    quote = connection.ops.quote_name
    names = ", ".join(quote(columns[name]) for name in fields)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {quote(model._meta.db_table)} ({names}) {select}", params)
