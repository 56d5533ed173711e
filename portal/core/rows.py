"""Lists of rows serialised by a plan made once per list: DRF's output, less of its per-row work.

DRF's `ListSerializer` asks every field of every row how to read its value (a walk through
`source_attrs` with a callable check per step, exception handling, a time zone lookup for each
date-time) before converting it. A page of 50 requests is ~1,000 such calls, which cost as much
as the page's queries. `RowsListSerializer` looks at the child serializer's fields once per
list and keeps, for each, a getter (`operator.attrgetter` of its source) and a converter:

- plain text, whole numbers and ISO 8601 date-times converted directly (`str`, `int`, the
  date-time in the request's time zone with `Z` for UTC, as DRF writes it);
- every other field through its own `to_representation`, unchanged.

Whatever the fast path cannot read exactly as DRF would is read by DRF's own code: related
fields, nested serializers, method fields and `source="*"`, a missing attribute (a field's
default, `allow_null` or skip), a callable value, rows that are mappings, and a child serializer
that writes its own `to_representation`. Its output is DRF's, key for key
(tests/core/test_rows.py compares the two).

A serializer opts in with `list_serializer_class = RowsListSerializer` in its `Meta`.

Building a serializer's fields is itself work on every call (a `ModelSerializer` reads its
model's fields and deep-copies its declared ones: about a tenth of a list's time). Where a plan
cannot depend on the call, it is kept for the process, by serializer class and time zone: every
field is one of DRF's own fields that read and write a value by themselves (`_CONTEXT_FREE`),
or a field class of ours that says so (`context_free = True`), with no default that needs the
call's context, and the serializer's fields are DRF's (no `get_fields` of its own but
`StrictFieldsMixin`'s). Every other plan is made for its list.
"""

import functools
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, tzinfo
from operator import attrgetter
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from rest_framework import ISO_8601, fields, relations, serializers
from rest_framework.settings import api_settings

from portal.core.serializers import StrictFieldsMixin

# Field classes whose `to_representation` is `str(value)` (their subclasses may differ).
_TEXT_FIELDS = frozenset(
    {
        fields.CharField,
        fields.SlugField,
        fields.EmailField,
        fields.URLField,
        fields.RegexField,
        fields.IPAddressField,
    }
)

type Getter = Callable[[Any], Any]
type Converter = Callable[[Any], Any]


def _datetime_converter(field: fields.DateTimeField, zone: tzinfo | None) -> Converter:
    """DRF's ISO 8601 output of an aware date-time in `zone` (the request's time zone): the
    same text, without looking the zone up for every value."""

    def convert(value: Any) -> Any:
        if zone is None or not isinstance(value, datetime) or value.utcoffset() is None:
            return field.to_representation(value)
        try:
            text = value.astimezone(zone).isoformat()
        except OverflowError:
            return field.to_representation(value)  # DRF's own error
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return convert


def _converter(field: fields.Field[Any, Any, Any, Any], zone: tzinfo | None) -> Converter:
    kind = type(field)
    if kind in _TEXT_FIELDS:
        return str
    if kind is fields.IntegerField:
        return int
    if kind is fields.DateTimeField and not hasattr(field, "timezone"):
        output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
        if isinstance(output_format, str) and output_format.lower() == ISO_8601:
            return _datetime_converter(field, zone)  # type: ignore[arg-type]
    return field.to_representation


def _fast_getter(field: fields.Field[Any, Any, Any, Any]) -> Getter | None:
    """An attribute getter for `field`'s source, or None when only DRF's own reading is exact."""
    if isinstance(
        field,
        relations.RelatedField
        | relations.ManyRelatedField
        | serializers.BaseSerializer
        | fields.SerializerMethodField
        | fields.HiddenField,
    ):
        return None
    if not field.source_attrs:  # source="*": the whole row
        return None
    return attrgetter(".".join(field.source_attrs))


type Step = tuple[str, fields.Field[Any, Any, Any, Any], Getter | None, Converter]

# DRF's fields whose reading and writing of a value use nothing but the field itself.
_CONTEXT_FREE = frozenset(
    {
        *_TEXT_FIELDS,
        fields.IntegerField,
        fields.BigIntegerField,
        fields.FloatField,
        fields.DecimalField,
        fields.BooleanField,
        fields.ChoiceField,
        fields.DateTimeField,
        fields.DateField,
        fields.TimeField,
        fields.DurationField,
        fields.UUIDField,
        fields.JSONField,
        fields.ReadOnlyField,
    }
)
# Serializers' own `get_fields` that build the same fields whatever the call.
_PLAIN_GET_FIELDS = frozenset(
    {
        serializers.Serializer.get_fields,
        serializers.ModelSerializer.get_fields,
        StrictFieldsMixin.get_fields,
    }
)
# Plans that depend on nothing but the serializer's class and the time zone (module docstring).
_kept_plans: dict[tuple[type[Any], tzinfo | None], list[Step]] = {}


def _context_free(field: fields.Field[Any, Any, Any, Any]) -> bool:
    kind = type(field)
    if kind not in _CONTEXT_FREE and not getattr(kind, "context_free", False):
        return False
    return not getattr(field.default, "requires_context", False)


def _steps(serializer: serializers.Serializer[Any], zone: tzinfo | None) -> list[Step]:
    steps: list[Step] = []
    for field in serializer._readable_fields:
        getter = _fast_getter(field)
        convert = field.to_representation if getter is None else _converter(field, zone)
        steps.append((field.field_name, field, getter, convert))  # type: ignore[arg-type]
    return steps


def _plan(child: serializers.Serializer[Any]) -> list[Step]:
    zone = timezone.get_current_timezone() if settings.USE_TZ else None
    kind = type(child)
    kept = _kept_plans.get((kind, zone))
    if kept is not None:
        return kept
    steps = _steps(child, zone)
    if kind.get_fields in _PLAIN_GET_FIELDS and all(_context_free(step[1]) for step in steps):
        try:
            alone = kind()  # the kept fields' own serializer: they hold no call's rows
        except TypeError:
            return steps  # a serializer that needs arguments: planned for each list
        _kept_plans[(kind, zone)] = _steps(alone, zone)
    return steps


def _row(steps: list[Step], instance: Any) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, field, getter, convert in steps:
        read = getter is not None
        if read:
            try:
                value = getter(instance)  # type: ignore[misc]
            except (AttributeError, KeyError, ObjectDoesNotExist):
                read = False  # DRF decides: the field's default, null, or skip
            else:
                read = not (callable(value) and fields.is_simple_callable(value))  # DRF calls it
        if not read:
            try:
                value = field.get_attribute(instance)
            except fields.SkipField:
                continue
            if isinstance(value, relations.PKOnlyObject) and value.pk is None:
                value = None
        row[name] = None if value is None else convert(value)
    return row


class RowsListSerializer(serializers.ListSerializer[Any]):
    """A `ListSerializer` whose rows are read through one plan per list (module docstring)."""

    def to_representation(self, data: Any) -> list[Any]:
        child: Any = self.child
        if type(child).to_representation is not serializers.Serializer.to_representation:
            return super().to_representation(data)  # the child writes its rows itself
        rows: Iterable[Any] = data.all() if isinstance(data, models.manager.BaseManager) else data
        steps: list[Step] | None = None
        out = []
        for instance in rows:
            if isinstance(instance, Mapping):
                out.append(child.to_representation(instance))
                continue
            if steps is None:
                steps = _plan(child)
            out.append(_row(steps, instance))
        return out


def row_writer(serializer: serializers.Serializer[Any]) -> Callable[[Any], dict[str, Any]]:
    """`serializer.to_representation` for many rows read through one plan, as a list's rows
    are: for rows written one by one (a tenant's quota lines, nested in each of a page's
    tenants), where a list serializer per tenant would plan again each time."""
    if type(serializer).to_representation is not serializers.Serializer.to_representation:
        return serializer.to_representation  # the serializer writes its rows itself
    steps = _plan(serializer)
    return lambda instance: _row(steps, instance)


def names_listed[M: models.Model](
    rows: models.QuerySet[M], names: Mapping[str, str]
) -> models.QuerySet[M]:
    """`rows` with the joined rows' names a list shows read as values of their own (`names`:
    attribute -> a foreign key and its field, `{"tenant_slug": "tenant__slug"}`) instead of
    joined instances: a page of 50 requests made some 170 model instances, of which 120 only
    to give three names. The list's serializer reads the attributes (`source="tenant_slug"`).
    Each name is a subquery of its row's key rather than a join, so that counting the list
    (`BoundedPaginator`, up to 10,000 rows) reads none of them."""
    listed: models.QuerySet[M] = rows.select_related(None).annotate(
        **_name_subqueries(rows.model, tuple(names.items()))
    )
    return listed


@functools.cache
def _name_subqueries(
    model: type[models.Model], names: tuple[tuple[str, str], ...]
) -> dict[str, Subquery]:
    """The subqueries of `names_listed`, built once per model and names for the process (a
    third of a millisecond a list): `annotate` resolves a copy of each, never the kept one."""
    values: dict[str, Subquery] = {}
    for name, path in names:
        key, field_name = path.split("__")
        related = model._meta.get_field(key).related_model._default_manager  # type: ignore[union-attr]
        values[name] = Subquery(related.filter(pk=OuterRef(key)).values(field_name))
    return values
