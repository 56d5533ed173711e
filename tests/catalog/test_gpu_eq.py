import random
from decimal import Decimal
from fractions import Fraction

import pytest

from portal.allocations.models import GpuRequest, RequestState
from portal.catalog.gpu_eq import (
    GpuEqError,
    gpu_eq_display,
    gpu_eq_parse,
    gpu_eq_sum,
    gpu_eq_sum_by,
)
from portal.catalog.models import Offering
from portal.catalog.presets import catalog_presets_load


@pytest.fixture
def presets(db) -> None:
    catalog_presets_load(actor=None)


def test_seven_a100_1g_10gb_slices_are_exactly_one_a100(presets) -> None:
    slice_ = Offering.objects.get(slug="a100-80gb-mig-1g-10gb")

    assert slice_.gpu_eq == Fraction(1, 7)
    assert sum([slice_.gpu_eq] * 7, Fraction(0)) == 1


def test_ten_thousand_random_allocations_add_up_exactly_in_sql(
    presets, tenant_a, developer
) -> None:
    offerings = list(Offering.objects.all())
    rng = random.Random(20261123)
    rows = []
    expected = Fraction(0)
    for _ in range(10_000):
        offering = rng.choice(offerings)
        count = rng.randint(1, 7)
        request = GpuRequest(
            tenant=tenant_a,
            requester=developer,
            offering=offering,
            gpu_model=offering.gpu_model,
            count=count,
            state=RequestState.ACTIVE,
        )
        request.gpu_eq = offering.gpu_eq * count
        expected += Fraction(offering.gpu_eq_num, offering.gpu_eq_den) * count
        rows.append(request)
    GpuRequest.objects.bulk_create(rows, batch_size=2000)

    total = gpu_eq_sum(GpuRequest.objects.all(), name="gpu_eq")
    per_model = gpu_eq_sum_by(GpuRequest.objects.all(), name="gpu_eq", group_by=("gpu_model_id",))

    assert total == expected
    assert sum(per_model.values(), Fraction(0)) == expected
    assert isinstance(total, Fraction)


@pytest.mark.parametrize(
    ("text", "value"),
    [("3", Fraction(3)), ("1/7", Fraction(1, 7)), (" 0.25 ", Fraction(1, 4)), (2, Fraction(2)),
     (Decimal("0.5"), Fraction(1, 2)), ("0", Fraction(0))],
)  # fmt: skip
def test_gpu_eq_parses_exact_amounts(text, value) -> None:
    assert gpu_eq_parse(text) == value


@pytest.mark.parametrize("text", [0.5, "-1", "two", "1/0", "", "1/2/3"])
def test_gpu_eq_refuses_floats_negatives_and_junk(text) -> None:
    with pytest.raises(GpuEqError):
        gpu_eq_parse(text)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Fraction(1, 7), "0.14"),
        (Fraction(3), "3"),
        (Fraction(1, 2), "0.5"),
        (Fraction(2, 3), "0.67"),
    ],
)
def test_gpu_eq_is_displayed_rounded(value, shown) -> None:
    assert gpu_eq_display(value) == shown
