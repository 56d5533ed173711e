"""GPU-equivalents: the one unit of quota and billing, an exact fraction, never a float.

A GPU-eq value is a `fractions.Fraction`. A model stores it in two integer columns,
`<name>_num` and `<name>_den`, kept in lowest terms, and exposes it as a property made by
`gpu_eq_property`. Sums over many rows run in SQL: rows are grouped by denominator (there are
few distinct ones) and the per-denominator sums are added exactly in Python.
"""

import math
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

from django.db import models
from django.db.models import QuerySet, Sum
from django.utils.translation import gettext as _

from portal.core.validators import BIGINT_MAX

GpuEqInput = Fraction | int | str | Decimal


class GpuEqError(ValueError):
    """The text or number is not a GPU-eq amount."""


# What a person may write as a GPU-eq amount, judged on the text before any arithmetic: an
# exponent such as 1e999999999 would otherwise make Fraction build a number of a billion digits.
GPU_EQ_MAX = 10**6  # GPU-eq in one amount: beyond any cluster
GPU_EQ_MAX_DENOMINATOR = 10**6  # 1/1000000, or six decimals
_GPU_EQ_TEXT = re.compile(r"\+?(\d{1,7}(\.\d{1,6})?|\.\d{1,6})", re.ASCII)
_GPU_EQ_FRACTION = re.compile(r"\+?(?P<num>\d{1,13})\s*/\s*(?P<den>\d{1,7})", re.ASCII)


def _beyond_limits() -> GpuEqError:
    return GpuEqError(
        _(
            "a GPU-eq amount is at most %(max)s GPU-eq, with at most 6 decimals or a "
            "denominator of at most %(denominator)s"
        )
        % {"max": GPU_EQ_MAX, "denominator": GPU_EQ_MAX_DENOMINATOR}
    )


def _not_a_number(value: object) -> GpuEqError:
    return GpuEqError(
        _("%(value)s is not a number or a fraction like 1/7") % {"value": repr(value)}
    )


def _bounded(amount: Fraction) -> Fraction:
    if amount < 0:
        raise GpuEqError(_("a GPU-eq amount cannot be negative"))
    if amount > GPU_EQ_MAX or amount.denominator > GPU_EQ_MAX_DENOMINATOR:
        raise _beyond_limits()
    return amount


def _text_parse(text: str) -> Fraction:
    text = text.strip()
    if len(text) > 40:
        raise _beyond_limits()
    if text.startswith("-") and len(text) > 1 and (text[1].isdigit() or text[1] == "."):
        raise GpuEqError(_("a GPU-eq amount cannot be negative"))
    if _GPU_EQ_TEXT.fullmatch(text):
        return Fraction(text.lstrip("+"))
    match = _GPU_EQ_FRACTION.fullmatch(text)
    if match is None:
        raise _not_a_number(text)
    if int(match["den"]) == 0:
        raise GpuEqError(_("a fraction cannot have 0 below the line"))
    return Fraction(int(match["num"]), int(match["den"]))


def gpu_eq_parse(value: GpuEqInput) -> Fraction:
    """A GPU-eq from `3`, `"1/7"`, `"0.25"` or a Decimal; never from a float.

    Input people write (text, int, Decimal) is bounded before any arithmetic: at most
    GPU_EQ_MAX, at most 6 decimals or a denominator of at most GPU_EQ_MAX_DENOMINATOR; a
    Fraction (a computed amount) need only fit the two bigint columns.
    """
    if isinstance(value, bool):
        raise GpuEqError(_("a GPU-eq amount is a number, not true or false"))
    if isinstance(value, float):
        raise GpuEqError(
            _("GPU-eq amounts are exact: give a fraction like 1/7 or a decimal string")
        )
    if isinstance(value, Fraction):
        if value < 0:
            raise GpuEqError(_("a GPU-eq amount cannot be negative"))
        if max(value.numerator, value.denominator) > BIGINT_MAX:
            raise GpuEqError(_("the GPU-eq amount is too large to store"))
        return value
    if isinstance(value, str):
        return _bounded(_text_parse(value))
    if isinstance(value, int):
        return _bounded(Fraction(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise GpuEqError(_("%(value)s is not a number") % {"value": value})
        # The digits and exponent, before Fraction multiplies anything out.
        if value.adjusted() > len(str(GPU_EQ_MAX)) or value.as_tuple().exponent < -6:  # type: ignore[operator]
            raise _beyond_limits()
        return _bounded(Fraction(value))
    raise _not_a_number(value)


def gpu_eq_text(value: Fraction) -> str:
    """The exact value as text: `3`, `1/7`."""
    return str(value)


def gpu_eq_display(value: Fraction, *, places: int = 2) -> str:
    """Rounded for people: `0.14` for 1/7, `3` for 3."""
    if value.denominator == 1:
        return str(value.numerator)
    quantum = Decimal(1).scaleb(-places)
    rounded = (Decimal(value.numerator) / Decimal(value.denominator)).quantize(
        quantum, rounding=ROUND_HALF_UP
    )
    return f"{rounded.normalize():f}"


def gpu_eq_columns(
    name: str, *, default: Fraction = Fraction(0)
) -> "tuple[models.BigIntegerField[int, int], models.BigIntegerField[int, int]]":
    """The two columns for a GPU-eq attribute `name`, defaulting to `default`."""
    return (
        models.BigIntegerField(default=default.numerator),
        models.BigIntegerField(default=default.denominator),
    )


def gpu_eq_property(name: str) -> Any:
    """A property reading and writing the exact value in `<name>_num` / `<name>_den`."""
    numerator, denominator = f"{name}_num", f"{name}_den"

    def get(instance: models.Model) -> Fraction:
        return Fraction(getattr(instance, numerator), getattr(instance, denominator))

    def set_(instance: models.Model, value: GpuEqInput) -> None:
        amount = gpu_eq_parse(value)
        setattr(instance, numerator, amount.numerator)
        setattr(instance, denominator, amount.denominator)

    return property(get, set_, doc=f"{name} in GPU-eq, exact")


def gpu_eq_constraints(name: str, *, model: str) -> list[models.BaseConstraint]:
    """Database guarantees for a GPU-eq attribute: non-negative, positive denominator."""
    return [
        models.CheckConstraint(
            condition=models.Q(**{f"{name}_num__gte": 0}), name=f"{model}_{name}_not_negative"
        ),
        models.CheckConstraint(
            condition=models.Q(**{f"{name}_den__gt": 0}), name=f"{model}_{name}_den_positive"
        ),
    ]


def gpu_eq_sum_by(
    queryset: QuerySet[Any], *, name: str, group_by: Sequence[str] = ()
) -> dict[tuple[Hashable, ...], Fraction]:
    """Exact sums of GPU-eq attribute `name` over `queryset`, per value of `group_by`.

    One query: SUM(numerator) GROUP BY (group_by..., denominator), combined in Python.
    """
    return gpu_eq_sums(gpu_eq_sums_query(queryset, name=name, group_by=group_by))


def gpu_eq_sums_query(
    queryset: QuerySet[Any], *, name: str, group_by: Sequence[str] = ()
) -> QuerySet[Any, tuple[Any, ...]]:
    """`gpu_eq_sum_by`'s query: rows of (*group_by, denominator, sum of numerators)."""
    numerator, denominator = f"{name}_num", f"{name}_den"
    rows: QuerySet[Any, tuple[Any, ...]] = (
        queryset.order_by()
        .values(*group_by, denominator)
        .annotate(total=Sum(numerator))
        .values_list(*group_by, denominator, "total")
    )
    return rows


def gpu_eq_sums(rows: Iterable[tuple[Any, ...]]) -> dict[tuple[Hashable, ...], Fraction]:
    """The exact sums of `gpu_eq_sums_query`'s rows, per group."""
    # Integer sums per denominator first, one Fraction per group at the end: thousands of
    # groups (a quota line per tenant and model) cost no more than their rows.
    by_den: dict[tuple[Hashable, ...], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        *key, den, total = row
        by_den[tuple(key)][den] += total
    return {key: _sum_over(totals) for key, totals in by_den.items()}


def _sum_over(totals: dict[int, int]) -> Fraction:
    """The exact sum of numerator totals by denominator."""
    if len(totals) == 1:
        ((den, total),) = totals.items()
        return Fraction(total, den)
    common = math.lcm(*totals)
    return Fraction(sum(total * (common // den) for den, total in totals.items()), common)


def gpu_eq_sum(queryset: QuerySet[Any], *, name: str) -> Fraction:
    """The exact total of GPU-eq attribute `name` over `queryset`, in one query."""
    return gpu_eq_sum_by(queryset, name=name).get((), Fraction(0))
