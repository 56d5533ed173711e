"""Table rows written in Python, for the pages that list tens of rows or more.

The template engine resolves each `{{ value }}`, filter and `{% if %}` of a row through its
nodes: a page of 50 audit events spent 6 of its 10.7 ms (in-process, on the bench's data
set) in the rows' loop, and 2.5 ms writing them here. The longest tables therefore write
their `<tbody>` rows in Python, as Django's admin writes its change list's cells
(`items_for_result`), and their templates keep the table around them (`{{ rows }}` in place
of the `{% for %}`). Each row function writes the markup its template wrote, but for the
whitespace between tags: a test renders both and compares them.

Everything that is not markup passes through `text` (escaped and localised as `{{ value }}`)
or a function named after the filter it stands for (`when` is `|date:"DATETIME_FORMAT"`).
"""

import functools
import html
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.dateformat import DateFormat, re_escaped, re_formatchars
from django.utils.formats import date_format, get_format, localize
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.utils.timezone import localtime
from django.utils.translation import get_language

# Stands for a row's id or slug while its URL is reversed once (`url_of_each`).
_KEY_MARK = 9_182_736_455


def text(value: Any) -> str:
    """`{{ value }}`: localised, and escaped unless it is HTML already (a `SafeString`)."""
    if type(value) is str:  # the common case, and never HTML already (a SafeString is not `str`)
        return html.escape(value)
    if value is None:
        return "None"
    shown = localize(value)
    return shown.__html__() if hasattr(shown, "__html__") else html.escape(str(shown))


# What `when` writes for each format character of the languages' DATETIME_FORMAT, as Django's
# `DateFormat` writes it; a month's name (`M`, `N`, `F`, `b`) is translated once per language.
_NUMBERS: dict[str, Callable[[datetime], str]] = {
    "d": lambda value: f"{value.day:02d}",
    "j": lambda value: str(value.day),
    "m": lambda value: f"{value.month:02d}",
    "n": lambda value: str(value.month),
    "Y": lambda value: f"{value.year:04d}",
    "y": lambda value: f"{value.year % 100:02d}",
    "H": lambda value: f"{value.hour:02d}",
    "G": lambda value: str(value.hour),
    "i": lambda value: f"{value.minute:02d}",
    "s": lambda value: f"{value.second:02d}",
}
_MONTH_NAMES = frozenset("MNFb")


@functools.lru_cache(maxsize=64)
def _pieces(format_string: str) -> tuple[tuple[str, str], ...] | None:
    """`format_string` as (literal text, "") and ("", format character) pieces, as Django's
    `Formatter` splits it; None when it has a character `when` does not write itself."""
    pieces: list[tuple[str, str]] = []
    for i, piece in enumerate(re_formatchars.split(format_string)):
        if i % 2 == 0:
            if piece:
                pieces.append((re_escaped.sub(r"\1", piece), ""))
        elif piece in _NUMBERS or piece in _MONTH_NAMES:
            pieces.append(("", piece))
        else:
            return None
    return tuple(pieces)


@functools.lru_cache(maxsize=256)
def _month_name(language: str | None, character: str, month: int) -> str:
    """The name `character` writes of `month` in the active language, kept per `language`."""
    return str(getattr(DateFormat(date(2000, month, 1)), character)())


def when(value: datetime | None) -> str:
    """`{{ value|date:"DATETIME_FORMAT" }}`: in the current time zone, as the language writes it.
    Written here from the format's pieces (`_pieces`, split once) rather than by Django's
    `DateFormat`, which splits the format and translates the month's name anew for every
    value: 20 µs a date, on a page that shows 50 of them or more."""
    if value is None:
        return ""
    local = localtime(value)
    pieces = _pieces(str(get_format("DATETIME_FORMAT")))
    if pieces is None:
        return html.escape(date_format(local, "DATETIME_FORMAT"))
    language = get_language()
    written = "".join(
        text
        if not character
        else _NUMBERS[character](local)
        if character in _NUMBERS
        else _month_name(language, character, local.month)
        for text, character in pieces
    )
    return html.escape(written)


def iso(value: datetime | None) -> str:
    """`{{ value|date:"c" }}`: ISO 8601 in the current time zone."""
    return "" if value is None else html.escape(localtime(value).isoformat())


def until(value: datetime | None) -> str:
    """`{{ value|timeuntil }}`."""
    return "" if not value else html.escape(timeuntil(value))


def since(value: datetime | None) -> str:
    """`{{ value|timesince }}`."""
    return "" if not value else html.escape(timesince(value))


def csrf_input(request: HttpRequest) -> str:
    """`{% csrf_token %}`: the page's CSRF token as a form's hidden input (one per page, as
    the template's context holds one)."""
    token = html.escape(get_token(request))
    return f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'


def url_of_each(viewname: str, *after: Any) -> Callable[[int | str], str]:
    """`{% url viewname row.key *after %}` for any row whose key is an id or a slug (no
    character to quote), escaped for an attribute: the URL is reversed once and each row's key
    put in its place (a page of 50 rows had reversed up to three URLs a row)."""
    head, mark, tail = reverse(viewname, args=[_KEY_MARK, *after]).partition(str(_KEY_MARK))
    assert mark, f"{viewname} takes no id or slug first"  # noqa: S101 - a programming error
    head, tail = html.escape(head), html.escape(tail)
    return lambda key: f"{head}{html.escape(str(key))}{tail}"


# Stands for each character of a text in the sample `_truncation` truncates.
_SAMPLE_CHARACTER = "\x01"


@functools.lru_cache(maxsize=64)
def _truncation(language: str | None, length: int) -> tuple[str, int, str]:
    """What `Truncator.chars(length)` makes of a longer text in `language`: the text before
    the kept characters, how many it keeps, and the text after them (the translated ellipsis)."""
    out = Truncator(_SAMPLE_CHARACTER * (length + 1)).chars(length)
    kept = out.count(_SAMPLE_CHARACTER)
    before, _kept, after = out.partition(_SAMPLE_CHARACTER * kept) if kept else (out, "", "")
    return before, kept, after


def truncated(value: Any, length: int) -> str:
    """`{{ value|truncatechars:length }}`. An ASCII text (no combining character, nothing for
    Unicode's normalisation to change), a request id, is cut as `Truncator` would cut it,
    from what it makes of a sample once per language and length: `Truncator` translated its
    ellipsis and normalised the text on every call, the tenth of a page of 50 audit events."""
    if type(value) is str and value.isascii() and length > 0:
        if len(value) <= length:
            return html.escape(value)
        before, kept, after = _truncation(get_language(), length)
        return html.escape(f"{before}{value[:kept]}{after}")
    return html.escape(Truncator(value).chars(length))


def rows(items: Iterable[Any], row: Callable[[Any], str]) -> SafeString:
    """The `<tr>`s of `items`, each written by `row` (which escapes what it writes through
    this module's functions)."""
    return mark_safe("".join([row(item) for item in items]))  # noqa: S308 - `row` escapes each value
