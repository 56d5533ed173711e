"""Adding up usage measures exactly (`MeasuresSum`): numerators per denominator, one fraction
each at the end, equal to adding the rows' fractions one by one."""

from decimal import Decimal
from fractions import Fraction

from portal.metering.models import Measures, MeasuresSum


def test_a_sum_over_several_denominators_is_the_exact_sum_of_the_rows() -> None:
    rows = [
        Measures(Fraction(1, 7), Fraction(3, 8), Decimal("0.100001"), Decimal("1.5")),
        Measures(Fraction(2, 7), Fraction(5, 8), Decimal("0.2"), Decimal("2.25")),
        Measures(Fraction(1, 3), Fraction(0), Decimal("0.000001"), Decimal(0), Decimal("4")),
        Measures(Fraction(10**18, 3 * 7 * 8), Fraction(1, 10**12), Decimal(0), Decimal(0)),
    ]
    one_by_one = Measures()
    summed = MeasuresSum()
    for row in rows:
        one_by_one.add(row)
        summed.add(row)
    summed.add_parts((5, 840), (0, 1), (Decimal(0), Decimal(0), Decimal(0), Decimal("0.5")))
    one_by_one.add(Measures(Fraction(5, 840), ram_gib_hours=Decimal("0.5")))

    total = summed.total()

    assert total == one_by_one
    assert total.reserved == Fraction(1, 7) + Fraction(2, 7) + Fraction(1, 3) + Fraction(
        10**18, 168
    ) + Fraction(1, 168)
    assert isinstance(total.reserved, Fraction)
    assert total.used_gpu_hours == Decimal("0.300002")
    assert MeasuresSum().total() == Measures()
