"""`portal.core.cells` writes what the template engine would: each function against the
template expression it stands for."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

import pytest
from django.template import engines
from django.urls import NoReverseMatch
from django.utils import timezone, translation
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


def test_time_until_is_what_its_filter_writes() -> None:
    future = timezone.now() + timedelta(days=2, hours=1, seconds=30)
    with translation.override("zh-hans"):
        assert cells.until(future) == rendered("{{ value|timeuntil }}", future)
        assert cells.until(None) == rendered("{{ value|timeuntil }}", None) == ""


def test_truncated_is_truncatechars() -> None:
    value = "<request> " * 5
    assert cells.truncated(value, 12) == rendered("{{ value|truncatechars:12 }}", value)


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
