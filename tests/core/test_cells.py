"""`portal.core.cells` writes what the template engine would: each function against the
template expression it stands for."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.template import engines
from django.urls import NoReverseMatch
from django.utils import timezone, translation
from django.utils.formats import reset_format_cache
from django.utils.safestring import mark_safe

from portal.core import cells

AT = datetime(2026, 3, 4, 17, 5, 6, tzinfo=UTC)


def rendered(expression: str, value: object) -> str:
    return engines["django"].from_string(expression).render({"value": value})


@pytest.mark.parametrize(
    "value",
    ["<b>&'\"", mark_safe("<i>kept</i>"), None, 7, 1234567, Decimal("1234.50"), 2.5, True,
     Fraction(7, 2), [1, "<x>"], {"a": None}, ""],
)  # fmt: skip
def test_text_is_what_a_variable_writes(value: object) -> None:
    with translation.override("zh-hans"), timezone.override("Asia/Shanghai"):
        assert cells.text(value) == rendered("{{ value }}", value)


@pytest.mark.parametrize("value", [AT, None])
def test_dates_are_what_their_filters_write(value: datetime | None) -> None:
    with translation.override("zh-hans"), timezone.override("Asia/Shanghai"):
        assert cells.when(value) == rendered('{{ value|date:"DATETIME_FORMAT" }}', value)
        assert cells.iso(value) == rendered("{{ value|date:'c' }}", value)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_a_date_of_every_month_and_hour_is_what_the_filter_writes(language: str) -> None:
    """`when` writes the format's pieces itself: each month's name, one- and two-digit days
    and hours, a year before 1000, in each language and in zones either side of UTC."""
    values = [
        datetime(year, month, day, hour, minute, 9, tzinfo=UTC)
        for year, month, day, hour, minute in [
            *((2026, month, month * 2, month * 2 - 1, month * 4) for month in range(1, 13)),
            (999, 1, 1, 0, 0),
            (2024, 2, 29, 23, 59),
        ]
    ]
    for zone in ("UTC", "Asia/Shanghai", "America/Los_Angeles"):
        with translation.override(language), timezone.override(zone):
            for value in values:
                expected = rendered('{{ value|date:"DATETIME_FORMAT" }}', value)
                assert cells.when(value) == expected, (zone, value)


@pytest.fixture
def django_formats(settings: Any) -> Iterator[None]:
    """Django's own formats, not the portal's: Django resets its cache of formats for the
    format settings, not for their modules, so this fixture does, before and after."""
    settings.FORMAT_MODULE_PATH = []
    reset_format_cache()
    yield
    settings.FORMAT_MODULE_PATH = ["portal.formats"]
    reset_format_cache()


@pytest.mark.usefixtures("django_formats")
def test_a_format_with_characters_it_does_not_write_is_left_to_django() -> None:
    """Without the portal's formats, English writes dates as Django's "N j, Y, P" ("a.m.",
    "noon"): `P` is not one of `when`'s own, so Django's `DateFormat` writes the whole date."""
    noon = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)
    with translation.override("en"), timezone.override("UTC"):
        for value in (AT, noon):
            assert cells.when(value) == rendered('{{ value|date:"DATETIME_FORMAT" }}', value)
        assert cells.when(noon) == "March 4, 2026, noon"


def test_time_until_is_what_its_filter_writes() -> None:
    future = timezone.now() + timedelta(days=2, hours=1, seconds=30)
    with translation.override("zh-hans"):
        assert cells.until(future) == rendered("{{ value|timeuntil }}", future)
        assert cells.until(None) == rendered("{{ value|timeuntil }}", None) == ""


@pytest.mark.parametrize("language", ["en", "zh-hans"])
@pytest.mark.parametrize(
    "value",
    ["<request> " * 5, "0123456789ab", "0123456789abc", "short", "", "café crème brûlée",
     "e\u0301" * 20, 12345678901234, None],
)  # fmt: skip
@pytest.mark.parametrize("length", [12, 1, 0])
def test_truncated_is_truncatechars(language: str, value: object, length: int) -> None:
    with translation.override(language):
        expected = rendered(f"{{{{ value|truncatechars:{length} }}}}", value)
        assert cells.truncated(value, length) == expected


def test_a_url_reversed_once_takes_each_rows_id_or_slug() -> None:
    detail = cells.url_of_each("allocations:detail")
    transition = cells.url_of_each("allocations:transition", "revoke")
    tenant = cells.url_of_each("tenants:detail")

    assert detail(42) == rendered("{% url 'allocations:detail' value %}", 42)
    assert transition(7) == rendered("{% url 'allocations:transition' value 'revoke' %}", 7)
    assert tenant("vision-2") == rendered("{% url 'tenants:detail' value %}", "vision-2")
    with pytest.raises(NoReverseMatch):
        cells.url_of_each("allocations:all")  # takes no id


def test_rows_are_joined_as_html() -> None:
    written = cells.rows([1, 2], lambda number: f"<tr><td>{cells.text(number)}</td></tr>")

    assert written == "<tr><td>1</td></tr><tr><td>2</td></tr>"
    assert rendered("{{ value }}", written) == written  # marked safe: not escaped again
