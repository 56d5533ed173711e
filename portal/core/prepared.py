"""Reads run on every call with their SQL built once per process.

Django builds a query's SQL anew on each call. For a read by a unique key the building costs
more than PostgreSQL's answer: an API token's lookup with its user took 0.45 ms, 0.2 of it
compiling. `KeyedRead` builds the SQL once per database and runs it with each call's key,
making the model instances from the row as the ORM would (`Model.from_db`). Every call reads
one or two of these first: its API token, or its session and its user.

`KeptRows` does the same for the rows of a `values_list` query whose values are whole
numbers and lists of them (the tenants of a page): built once per shape, the number of values
in each list.

Only on PostgreSQL, and only where psycopg's values are the fields' own (no field converts
what the database gives: no JSON, no custom `from_db_value`), as `plain_rows` reads. Anywhere
else (the demo's SQLite) the same read goes through the ORM.
"""

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import connections, models, router
from django.utils.functional import cached_property

# Stand for the key while the SQL is built, and are found again among its parameters: text,
# or a number (within a 32-bit integer, which Django would otherwise read as no row).
_TEXT_KEY = "\x00key\x00"
_NUMBER_KEY = -2_147_000_001


class KeyedRead[M: models.Model]:
    """`model`'s row whose `key` field (or `pk`) equals a value, with its foreign key
    `related` loaded when named, as `select_related(related).get(key=value)` reads it."""

    def __init__(self, model: type[M], key: str, related: str | None = None) -> None:
        self.model = model
        self.key = key
        self.related = related
        self._plans: dict[tuple[str, str], str | None] = {}

    def get(self, value: Any) -> M | None:
        """The row, or None when no row has that key."""
        using = router.db_for_read(self.model)
        connection = connections[using]
        identity = (using, connection.vendor)
        if identity not in self._plans:
            self._plans[identity] = self._plan(using)
        sql = self._plans[identity]
        if sql is None:
            try:
                return self._rows(using).get(**{self.key: value})
            except ObjectDoesNotExist:
                return None
        with connection.cursor() as cursor:
            cursor.execute(sql, [value])
            row = cursor.fetchone()
        if row is None:
            return None
        own, theirs = self._names
        found = self.model.from_db(using, own, row[: len(own)])
        if self.related is not None:
            related_model = self._related_model
            related_row = row[len(own) :]
            related = (
                None
                if related_row[theirs.index(related_model._meta.pk.attname)] is None
                else related_model.from_db(using, theirs, related_row)
            )
            setattr(found, self.related, related)
        return found

    def _rows(self, using: str) -> models.QuerySet[M]:
        rows = self.model._default_manager.using(using).order_by()
        return rows.select_related(self.related) if self.related is not None else rows

    # Worked out once, on the first read (the models are loaded by then), not on every call.
    @cached_property
    def _related_model(self) -> type[models.Model]:
        related: type[models.Model] = self.model._meta.get_field(str(self.related)).related_model  # type: ignore[assignment]
        return related

    @cached_property
    def _names(self) -> tuple[list[str], list[str]]:
        """The attribute names of the model's columns and of the related model's."""
        own = [field.attname for field in self.model._meta.concrete_fields]
        if self.related is None:
            return own, []
        theirs = [field.attname for field in self._related_model._meta.concrete_fields]
        return own, theirs

    def _plan(self, using: str) -> str | None:
        """The SQL, the key its one parameter; None where the ORM must read."""
        connection = connections[using]
        if connection.vendor != "postgresql":
            return None
        fields = list(self.model._meta.concrete_fields)
        if self.related is not None:
            fields += self._related_model._meta.concrete_fields
        for field in fields:
            column = field.get_col(field.model._meta.db_table)
            if connection.ops.get_db_converters(column) or column.get_db_converters(connection):
                return None  # a value psycopg gives is not the field's own
        key_field = (
            self.model._meta.pk if self.key == "pk" else self.model._meta.get_field(self.key)
        )
        marker: Any = (
            _NUMBER_KEY
            if isinstance(key_field, models.IntegerField | models.AutoField)
            else _TEXT_KEY
        )
        own, theirs = self._names
        try:
            rows = (
                self._rows(using)
                .filter(**{self.key: marker})
                .values_list(*own, *(f"{self.related}__{name}" for name in theirs))
            )
            sql, params = rows.query.get_compiler(using=using).as_sql()
        except (TypeError, ValueError, ValidationError):
            return None  # the stand-in is no value of the key: leave it to the ORM
        if tuple(params) != (marker,):
            return None  # the key is not one plain parameter
        return str(sql)


# Stand for `KeptRows`' values while their SQL is built: argument i's are _MARK - i * _SPAN
# and below, one per value of a list; no real id is negative.
_MARK = -2_100_000_000
_SPAN = 100_000


@dataclass(frozen=True)
class _Value:
    """Where a parameter of `KeptRows`' SQL comes from: argument `argument` of the call, or
    its value `index` when that is a list."""

    argument: int
    index: int | None

    def of(self, values: tuple[Any, ...]) -> Any:
        given = values[self.argument]
        return given if self.index is None else given[self.index]


# A `KeptRows` shape's database, SQL, parameters (a call's `_Value` or the query's constant)
# and the converters of its columns.
_Plan = tuple[str, str, list[Any], Callable[[list[tuple[Any, ...]]], Iterable[Any]] | None]


class KeptRows:
    """The rows of `build(*values)`, a `values_list` query of `model` given whole numbers (ids)
    and lists of them, with its SQL built once per process for each shape of the values (how
    many a list holds) and run with each call's. `build` must use each value as a query
    parameter (a filter's value, `__in` a list), nothing else. Elsewhere than on PostgreSQL,
    for a list of a shape not kept (empty, or of 100,000 values or more), or where the SQL's
    parameters are not found as built, the ORM runs `build(*values)`."""

    def __init__(
        self,
        model: type[models.Model],
        build: Callable[..., models.QuerySet[Any, tuple[Any, ...]]],
    ) -> None:
        self.model = model
        self.build = build
        self._plan = functools.lru_cache(maxsize=128)(self._planned)

    def rows(self, *values: int | Sequence[int]) -> list[tuple[Any, ...]]:
        shape = tuple(None if isinstance(value, int) else len(value) for value in values)
        plan = None
        if all(size is None or 0 < size < _SPAN for size in shape):
            plan = self._plan(router.db_for_read(self.model), shape)
        if plan is None:
            return list(self.build(*values))
        using, sql, sources, convert = plan
        params = [source.of(values) if isinstance(source, _Value) else source for source in sources]
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            fetched: list[tuple[Any, ...]] = cursor.fetchall()
        return fetched if convert is None else [tuple(row) for row in convert(fetched)]

    def _planned(self, using: str, shape: tuple[int | None, ...]) -> _Plan | None:
        """The SQL of `shape`, where each parameter's value comes from ((argument, index in
        its list or None), or the constant the query holds), and what converts the values of
        the columns that Django converts (an aggregate's). None where the ORM must read."""
        if connections[using].vendor != "postgresql":
            return None
        where: dict[int, _Value] = {}
        marks: list[Any] = []
        for i, size in enumerate(shape):
            if size is None:
                where[_MARK - i * _SPAN] = _Value(i, None)
                marks.append(_MARK - i * _SPAN)
            else:
                listed = [_MARK - i * _SPAN - j for j in range(size)]
                where.update({mark: _Value(i, j) for j, mark in enumerate(listed)})
                marks.append(listed)
        compiler = self.build(*marks).query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        sources = [
            where[param] if isinstance(param, int) and param in where else param for param in params
        ]
        if {source for source in sources if isinstance(source, _Value)} != set(where.values()):
            return None  # a value was not used as a parameter of its own
        converters = compiler.get_converters([column for column, _sql, _alias in compiler.select])
        convert = None
        if converters:

            def convert(rows: list[tuple[Any, ...]]) -> Iterable[Any]:
                converted: Iterable[Any] = compiler.apply_converters(rows, converters)
                return converted

        return using, str(sql), sources, convert
