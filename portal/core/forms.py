"""What every page form shares: bounded input.

`BoundedForm` gives each text field a maximum length (its own, or LINE_MAX_LENGTH for one line
and TEXT_MAX_LENGTH for a textarea), refuses control characters (tab and line breaks too, in
one-line fields) and bounds whole numbers to an `integer` column unless the field says more.
NUL and other control characters in any posted field are already refused by the input guard.
"""

import functools
import html
from typing import Any

from django import forms
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.forms.renderers import DjangoTemplates
from django.forms.utils import flatatt
from django.utils.safestring import SafeData, SafeString, mark_safe

from portal.core.validators import (
    INTEGER_MAX,
    INTEGER_MIN,
    LINE_MAX_LENGTH,
    TEXT_MAX_LENGTH,
    NoControlCharacters,
)


def form_field_bound(field: forms.Field) -> None:
    """Bound one form field in place (see BoundedForm)."""
    if isinstance(field, forms.CharField):
        multiline = isinstance(field.widget, forms.Textarea)
        if field.max_length is None:
            field.max_length = TEXT_MAX_LENGTH if multiline else LINE_MAX_LENGTH
            field.validators.append(MaxLengthValidator(field.max_length))
            field.widget.attrs.update(field.widget_attrs(field.widget))
        field.validators.append(NoControlCharacters(multiline=multiline))
    elif isinstance(field, forms.IntegerField):
        if field.max_value is None:
            field.max_value = INTEGER_MAX
            field.validators.append(MaxValueValidator(INTEGER_MAX))
        if field.min_value is None:
            field.min_value = INTEGER_MIN
            field.validators.append(MinValueValidator(INTEGER_MIN))
        field.widget.attrs.update(field.widget_attrs(field.widget))


class BoundedForm(forms.Form):
    """A form whose text and whole-number fields are bounded (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            form_field_bound(field)


def _html(value: Any) -> str:
    """`value` as HTML text: as it is when it is already HTML, else escaped. What Django's
    `conditional_escape` does, without its lazy-text wrapper (which inspects every argument of
    every call: a tenth of a page's escaping time over a thousand options)."""
    if hasattr(value, "__html__"):
        return str(value.__html__())
    return html.escape(str(value), quote=True)


def filter_field_html(field: forms.BoundField) -> SafeString:
    """`{% include "core/_filter_field.html" %}` of a list's filter field, as the include writes
    it (its label, its widget, its help text and its errors, line by line; a test compares the
    two): a page with a few filters spent a tenth of its template's time in the includes."""
    label = _html(field.label)
    written = f'<label for="{_html(field.id_for_label)}">{label}</label>\n{_html(field)}\n'
    if field.help_text:
        written += (
            f'<small class="help" id="{_html(field.auto_id)}_helptext">'
            f"{_html(field.help_text)}</small>"
        )
    written += "\n"
    if field.errors:
        errors = "".join(
            f'<p class="field-error" role="alert">{label}: {_html(error)}</p>'
            for error in field.errors
        )
        written += f'<div id="{_html(field.auto_id)}_error">{errors}</div>'
    return mark_safe(written + "\n")  # noqa: S308 - every value above is escaped


class LongSelect(forms.Select):
    """A select of as many options as an organisation has (cost centres, tenants), written in
    one pass. Django's `Select` renders a template per option, about a quarter of a millisecond
    each: a thousand cost centres took the chargeback page 250 ms; `format_html` per option
    still cost some 35 microseconds each (18 ms for 500 cost centres), escaping here some 2.
    The options of the same choices are written once per process (`_options_html`, a few
    recent sets of choices), the chosen one marked in the text. Flat choices only (no groups),
    kept as given: Django's widget normalises them on every assignment, a millisecond for 500.
    """

    @property  # type: ignore[override]
    def choices(self) -> list[tuple[Any, Any]]:
        return self._flat_choices

    @choices.setter
    def choices(self, value: Any) -> None:
        self._flat_choices = list(value)

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: Any = None,
    ) -> SafeString:
        final_attrs = self.build_attrs(self.attrs, {**(attrs or {}), "name": name})
        # Labels may be lazy translations: written in the reader's language, keyed by the text.
        choices = tuple((str(key), str(label)) for key, label in self.choices)
        options = _options_html(choices)
        for chosen in self.format_value(value):
            option = f'<option value="{_html(chosen)}">'
            options = options.replace(option, option[:-1] + " selected>", 1)
        return mark_safe(f"<select{flatatt(final_attrs)}>{options}</select>")  # noqa: S308  (every part escaped; flatatt escapes the attributes)


@functools.lru_cache(maxsize=16)
def _options_html(choices: tuple[tuple[str, str], ...]) -> str:
    """The `<option>`s of `choices` (value, label), each escaped."""
    return "".join(
        f'<option value="{_html(key)}">{_html(label)}</option>' for key, label in choices
    )


# The widget templates `PageFormRenderer` writes itself: every one that is only
# django/forms/widgets/input.html, and the select of plain options.
_INPUT_TEMPLATES = frozenset(
    f"django/forms/widgets/{name}.html"
    for name in (
        "input", "text", "number", "email", "url", "password", "hidden", "date", "datetime",
        "time", "search", "tel", "checkbox", "color",
    )
)  # fmt: skip
_SELECT_TEMPLATE = "django/forms/widgets/select.html"
_OPTION_TEMPLATE = "django/forms/widgets/select_option.html"


def _formatted(value: Any) -> str:
    """`{{ value|stringformat:'s' }}`: `"%s" % value`, escaped unless the value is HTML."""
    text = "%s" % (str(value) if isinstance(value, tuple) else value)
    return text if isinstance(value, SafeData) else html.escape(text)


def _attributes(attrs: dict[str, Any]) -> str:
    """django/forms/widgets/attrs.html: ` name="value"`, ` name` for True, nothing for False."""
    written = []
    for name, value in attrs.items():
        if value is False:
            continue
        written.append(
            f" {_html(name)}" if value is True else f' {_html(name)}="{_formatted(value)}"'
        )
    return "".join(written)


class PageFormRenderer(DjangoTemplates):
    """Django's form renderer (`FORM_RENDERER`), writing the common widgets in Python: text and
    number inputs, hidden fields, check boxes and selects of plain options, each exactly as
    its template writes it (a test renders every one both ways). A widget's template costs
    some 0.1 ms of the template engine (includes, a context each): an *Audit log*'s filter
    form of seven fields took 0.85 ms. Any other template, or a select with options of
    another template, is rendered as Django renders it. A project template overriding one of
    the widget templates named above would not be read: take its name out of them first."""

    def render(self, template_name: str, context: dict[str, Any], request: Any = None) -> str:
        widget = context.get("widget") if isinstance(context, dict) else None
        if isinstance(widget, dict):
            if template_name in _INPUT_TEMPLATES:
                return self._input(widget)
            if template_name == _SELECT_TEMPLATE and all(
                option["template_name"] == _OPTION_TEMPLATE
                for _group, options, _index in widget["optgroups"]
                for option in options
            ):
                return self._select(widget)
        return str(super().render(template_name, context, request))

    @staticmethod
    def _input(widget: dict[str, Any]) -> str:
        value = widget["value"]
        shown = "" if value is None else f' value="{_formatted(value)}"'
        return (
            f'<input type="{_html(widget["type"])}" name="{_html(widget["name"])}"{shown}'
            f"{_attributes(widget['attrs'])}>"
        )

    @staticmethod
    def _select(widget: dict[str, Any]) -> str:
        written = [f'<select name="{_html(widget["name"])}"{_attributes(widget["attrs"])}>']
        for group, options, _index in widget["optgroups"]:
            if group:
                written.append(f'\n  <optgroup label="{_html(group)}">')
            written.extend(
                f'\n  <option value="{_formatted(option["value"])}"'
                f"{_attributes(option['attrs'])}>{_html(option['label'])}</option>\n"
                for option in options
            )
            if group:
                written.append("\n  </optgroup>")
        written.append("\n</select>")
        return "".join(written)
