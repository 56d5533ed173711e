import re
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from django.utils.deconstruct import deconstructible
from django.utils.translation import gettext_lazy as _

# Slugs become parts of Kubernetes names (`t-<slug>`), so they are DNS-1123 labels.
slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,59}[a-z0-9])?$",
    _("Use 1 to 61 lowercase letters, digits and hyphens; start and end with a letter or digit."),
)


def model_problems(instance: models.Model, **full_clean: Any) -> dict[str, list[str]]:
    """What `instance.full_clean(**full_clean)` finds wrong, field by field (empty: nothing)."""
    try:
        instance.full_clean(**full_clean)
    except ValidationError as error:
        return {name: list(messages) for name, messages in error.message_dict.items()}
    return {}


# Bounds of what the portal accepts, before anything is parsed or stored (README: "Limits").
# PostgreSQL's `integer` (Django's IntegerField and PositiveIntegerField) and `bigint` columns.
INTEGER_MIN, INTEGER_MAX = -(2**31), 2**31 - 1
BIGINT_MAX = 2**63 - 1
# Free text: one line (names, cost centres, titles) and several lines (comments, reasons,
# justifications, descriptions). A field with a tighter column keeps the column's length.
LINE_MAX_LENGTH = 200
TEXT_MAX_LENGTH = 2000

# C0 controls and DEL. Several-line text may hold tab, newline and carriage return; one line
# holds none of them. NUL is refused everywhere: PostgreSQL cannot store it in text.
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTROL_IN_LINE = re.compile(r"[\x00-\x1f\x7f]")


def control_characters_problem(value: Any, *, multiline: bool = False) -> str | None:
    """Why `value` (a string, or JSON made of dicts and lists of them) holds a control
    character it may not, or None. Dict keys are text too."""
    pattern = _CONTROL_IN_TEXT if multiline else _CONTROL_IN_LINE
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if pattern.search(item):
                if multiline:
                    return str(_("Control characters are not allowed here."))
                return str(
                    _("Control characters (including tabs and line breaks) are not allowed here.")
                )
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return None


def name_shown(name: Any) -> str:
    """A field's or parameter's name as an answer shows it: its control characters escaped."""
    text = str(name)
    return text if control_characters_problem(text) is None else repr(text)[1:-1]


@deconstructible
class NoControlCharacters:
    """Refuses C0 control characters and DEL; `multiline` text may hold tab, LF and CR."""

    def __init__(self, *, multiline: bool = False) -> None:
        self.multiline = multiline

    def __call__(self, value: Any) -> None:
        problem = control_characters_problem(value, multiline=self.multiline)
        if problem:
            raise ValidationError(problem, code="control_characters")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NoControlCharacters) and other.multiline == self.multiline

    def __hash__(self) -> int:
        return hash(("NoControlCharacters", self.multiline))
