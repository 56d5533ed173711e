"""GPU-equivalents: the one unit of quota and billing, an exact fraction, never a float.

A GPU-eq value is a `fractions.Fraction`. A model stores it in two integer columns,
`<name>_num` and `<name>_den`, kept in lowest terms, and exposes it as a property made by
`gpu_eq_property`. Sums over many rows run in SQL: rows are grouped by denominator (there are
few distinct ones) and the per-denominator sums are added exactly in Python.
"""

from collections import defaultdict
from collections.abc import Hashable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

from django.db import models
from django.db.models import QuerySet, Sum

GpuEqInput = Fraction | int | str | Decimal


class GpuEqError(ValueError):
    """The text or number is not a GPU-eq amount."""


def gpu_eq_parse(value: GpuEqInput) -> Fraction:
    """A GPU-eq from `3`, `"1/7"`, `"0.25"` or a Decimal; never from a float."""
    if isinstance(value, bool):
        raise GpuEqError("a GPU-eq amount is a number, not true or false")
    if isinstance(value, float):
        raise GpuEqError("GPU-eq amounts are exact: give a fraction like 1/7 or a decimal string")
    try:
        amount = Fraction(value.strip() if isinstance(value, str) else value)
    except (ValueError, ZeroDivisionError, TypeError):
        raise GpuEqError(f"{value!r} is not a number or a fraction like 1/7") from None
    if amount < 0:
        raise GpuEqError("a GPU-eq amount cannot be negative")
    return amount


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
    numerator, denominator = f"{name}_num", f"{name}_den"
    rows = (
        queryset.order_by()
        .values(*group_by, denominator)
        .annotate(total=Sum(numerator))
        .values_list(*group_by, denominator, "total")
    )
    sums: dict[tuple[Hashable, ...], Fraction] = defaultdict(Fraction)
    for row in rows:
        *key, den, total = row
        sums[tuple(key)] += Fraction(total, den)
    return dict(sums)


def gpu_eq_sum(queryset: QuerySet[Any], *, name: str) -> Fraction:
    """The exact total of GPU-eq attribute `name` over `queryset`, in one query."""
    return gpu_eq_sum_by(queryset, name=name).get((), Fraction(0))
