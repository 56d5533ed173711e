import random
import time
from collections import defaultdict
from decimal import Decimal
from fractions import Fraction

import pytest

from portal.allocations.models import HOLDING_STATES, GpuRequest, RequestState
from portal.catalog.gpu_eq import (
    GPU_EQ_MAX,
    GPU_EQ_MAX_DENOMINATOR,
    GpuEqError,
    gpu_eq_display,
    gpu_eq_parse,
    gpu_eq_sum,
    gpu_eq_sum_by,
    gpu_eq_text,
)
from portal.catalog.models import Offering
from portal.catalog.presets import catalog_presets_load


@pytest.fixture
def presets(db) -> None:
    catalog_presets_load(actor=None)


def test_seven_a100_1g_10gb_slices_are_exactly_one_a100(presets) -> None:
    slice_ = Offering.objects.get(slug="a100-80gb-mig-1g-10gb")

    assert slice_.gpu_eq == Fraction(1, 7)
    assert sum([slice_.gpu_eq] * 7, Fraction(0)) == Fraction(1)


def test_seven_1g_10gb_allocations_hold_exactly_one_a100_in_sql(
    presets, tenant_a, developer
) -> None:
    slice_ = Offering.objects.get(slug="a100-80gb-mig-1g-10gb")
    rows = []
    for _ in range(7):
        request = GpuRequest(
            tenant=tenant_a,
            requester=developer,
            offering=slice_,
            gpu_model=slice_.gpu_model,
            count=1,
            state=RequestState.ACTIVE,
        )
        request.gpu_eq = slice_.gpu_eq
        rows.append(request)
    GpuRequest.objects.bulk_create(rows)

    assert gpu_eq_sum(GpuRequest.objects.all(), name="gpu_eq") == Fraction(1)


def test_ten_thousand_random_allocations_add_up_exactly_in_sql(
    presets, tenant_a, developer
) -> None:
    offerings = list(Offering.objects.all())
    states = list(RequestState)
    rng = random.Random(20261123)
    rows = []
    expected_total = Fraction(0)
    expected_per_model: dict[int, Fraction] = defaultdict(Fraction)
    expected_holding = Fraction(0)
    for _ in range(10_000):
        offering = rng.choice(offerings)
        count = rng.randint(1, 7)
        state = rng.choice(states)
        request = GpuRequest(
            tenant=tenant_a,
            requester=developer,
            offering=offering,
            gpu_model=offering.gpu_model,
            count=count,
            state=state,
        )
        request.gpu_eq = offering.gpu_eq * count
        rows.append(request)
        # Computed independently of the stored columns: from the numerator and denominator.
        amount = Fraction(offering.gpu_eq_num, offering.gpu_eq_den) * count
        expected_total += amount
        expected_per_model[offering.gpu_model_id] += amount
        if state in HOLDING_STATES:
            expected_holding += amount
    GpuRequest.objects.bulk_create(rows, batch_size=2000)

    everything = GpuRequest.objects.all()
    total = gpu_eq_sum(everything, name="gpu_eq")
    per_model = gpu_eq_sum_by(everything, name="gpu_eq", group_by=("gpu_model_id",))
    holding = gpu_eq_sum(everything.filter(state__in=HOLDING_STATES), name="gpu_eq")

    assert isinstance(total, Fraction)
    assert total == expected_total
    assert per_model == {(model,): amount for model, amount in expected_per_model.items()}
    assert holding == expected_holding


def test_the_sum_of_nothing_is_exactly_zero(db) -> None:
    assert gpu_eq_sum(GpuRequest.objects.none(), name="gpu_eq") == Fraction(0)


@pytest.mark.parametrize(
    ("text", "value"),
    [("3", Fraction(3)), ("1/7", Fraction(1, 7)), (" 0.25 ", Fraction(1, 4)), (2, Fraction(2)),
     (Decimal("0.5"), Fraction(1, 2)), ("0", Fraction(0)), ("7/2", Fraction(7, 2)),
     (Fraction(2, 14), Fraction(1, 7))],
)  # fmt: skip
def test_gpu_eq_parses_exact_amounts(text, value) -> None:
    assert gpu_eq_parse(text) == value


@pytest.mark.parametrize(
    "text",
    [0.5, 1.0, "-1", "-1/7", Decimal("-0.5"), "two", "1/0", "", "1/2/3", "nan", "inf",
     Decimal("NaN"), None, True, False],
)  # fmt: skip
def test_gpu_eq_refuses_floats_negatives_and_junk(text) -> None:
    with pytest.raises(GpuEqError):
        gpu_eq_parse(text)


@pytest.mark.parametrize(
    "text",
    ["1e999999999", "1/1e99999", "1e-999999999", Decimal("1e999999999"), Decimal("1e-999999999"),
     "9" * 5000, 10**30, "1000001", "0.0000001", "1/10000001", "Infinity", "0x10", "1_0", "\u0661"],
)  # fmt: skip
def test_gpu_eq_refuses_amounts_beyond_its_bounds_before_computing_them(text) -> None:
    started = time.monotonic()
    with pytest.raises(GpuEqError):
        gpu_eq_parse(text)
    assert time.monotonic() - started < 0.1


def test_gpu_eq_bounds_hold_a_million_gpus_and_six_decimals() -> None:
    assert gpu_eq_parse("1000000") == GPU_EQ_MAX
    assert gpu_eq_parse("0.000001") == Fraction(1, GPU_EQ_MAX_DENOMINATOR)
    assert gpu_eq_parse("22/7") == Fraction(22, 7)
    # A computed amount (a request of many units) need only fit the columns.
    assert gpu_eq_parse(Fraction(10**12, 7)) == Fraction(10**12, 7)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Fraction(1, 7), "0.14"),
        (Fraction(3), "3"),
        (Fraction(1, 2), "0.5"),
        (Fraction(2, 3), "0.67"),
        (Fraction(1, 8), "0.13"),  # half up, not to even
        (Fraction(7, 2), "3.5"),
        (Fraction(1999, 200), "10"),  # 9.995 rounds up to a whole number, shown without ".00"
        (Fraction(0), "0"),
    ],
)
def test_gpu_eq_is_displayed_rounded(value, shown) -> None:
    assert gpu_eq_display(value) == shown


def test_gpu_eq_display_can_show_more_places_and_the_text_stays_exact() -> None:
    assert gpu_eq_display(Fraction(1, 7), places=4) == "0.1429"
    assert gpu_eq_text(Fraction(1, 7)) == "1/7"
    assert gpu_eq_parse(gpu_eq_text(Fraction(22, 7))) == Fraction(22, 7)
