"""What every serializer that reads a request body shares: bounded, strict input.

`StrictFieldsMixin` refuses fields the serializer does not write (a typo must not be ignored
silently), control characters in any text of the body, text longer than its limit and whole
numbers beyond the column they go to. All answer 400 naming the field, before any field is
parsed.
"""

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.utils.translation import gettext as _
from rest_framework import serializers

from portal.core.validators import (
    INTEGER_MAX,
    INTEGER_MIN,
    LINE_MAX_LENGTH,
    TEXT_MAX_LENGTH,
    control_characters_problem,
    name_shown,
)


def _bound_text(field: serializers.CharField, *, multiline: bool) -> None:
    if field.max_length is None:
        field.max_length = TEXT_MAX_LENGTH if multiline else LINE_MAX_LENGTH
        message = field.error_messages["max_length"].format(max_length=field.max_length)
        field.validators.append(MaxLengthValidator(field.max_length, message=message))


def _bound_integer(field: serializers.IntegerField) -> None:
    # An IntegerField that does not say its range goes to an `integer` column.
    if field.max_value is None:
        field.max_value = INTEGER_MAX
        message = field.error_messages["max_value"].format(max_value=INTEGER_MAX)
        field.validators.append(MaxValueValidator(INTEGER_MAX, message=message))
    if field.min_value is None:
        field.min_value = INTEGER_MIN
        message = field.error_messages["min_value"].format(min_value=INTEGER_MIN)
        field.validators.append(MinValueValidator(INTEGER_MIN, message=message))


class StrictFieldsMixin:
    """For serializers of request bodies (POST, PUT, PATCH): unknown fields, control characters,
    over-long text and out-of-range whole numbers answer 400 naming the field.

    Text is one line unless its field is in `multiline_fields` (tab, LF and CR allowed there);
    a text field without `max_length` gets LINE_MAX_LENGTH or TEXT_MAX_LENGTH, and an
    IntegerField without bounds those of an `integer` column.
    """

    multiline_fields: ClassVar[Collection[str]] = ()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields: dict[str, serializers.Field[Any, Any, Any, Any]] = super().get_fields()  # type: ignore[misc]
        for name, field in fields.items():
            if field.read_only:
                continue
            if isinstance(field, serializers.CharField):
                _bound_text(field, multiline=name in self.multiline_fields)
            elif isinstance(field, serializers.IntegerField):
                _bound_integer(field)
        return fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            fields: Mapping[str, serializers.Field[Any, Any, Any, Any]] = self.fields  # type: ignore[attr-defined]
            writable = {name for name, field in fields.items() if not field.read_only}
            problems: dict[str, list[str]] = {}
            for name, value in data.items():
                shown = name_shown(name)
                if name not in writable:
                    problems[shown] = [_("Unknown field.")]
                    continue
                problem = control_characters_problem(value, multiline=name in self.multiline_fields)
                if problem:
                    problems[shown] = [problem]
            if problems:
                raise serializers.ValidationError(problems)
        return super().to_internal_value(data)  # type: ignore[misc]


def body_fields_refuse(data: Any) -> None:
    """For writes that take no body: any field sent is unknown (400 naming it), never ignored."""
    if isinstance(data, Mapping) and data:
        raise serializers.ValidationError(
            {name_shown(name): [_("Unknown field.")] for name in data}
        )
