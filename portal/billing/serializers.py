"""The chargeback API's input and output: rate cards, statements with their history, lines,
and periods (months finance closes)."""

import re
from datetime import date
from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.billing.models import Basis, Period, PeriodState, RateCard
from portal.billing.selectors import HistoryEntry, LineView, StatementView
from portal.catalog.models import GpuModel, SharingBackend
from portal.core.rows import RowsListSerializer
from portal.core.serializers import StrictFieldsMixin
from portal.core.validators import TEXT_MAX_LENGTH

# The columns of a statement's lines, in the order the CSV writes them (README: "Chargeback").
SLUG = re.compile(r"[-a-zA-Z0-9_]{1,61}")
# A price: what RateCard stores (up to 10 whole digits and 4 decimals).
PRICE_DIGITS, PRICE_DECIMALS = 14, 4


@extend_schema_field({"type": "string", "example": "2.5000", "pattern": r"^\d{1,10}(\.\d{1,4})?$"})
class PriceField(serializers.DecimalField):
    """A price per GPU-eq-hour written as a string ("2.50"), never a JSON number (a float
    would already have lost digits): at least 0, up to 4 decimals."""

    context_free = True  # its value alone makes its output (portal/core/rows.py)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            max_digits=PRICE_DIGITS, decimal_places=PRICE_DECIMALS, min_value=Decimal(0), **kwargs
        )

    def to_internal_value(self, data: Any) -> Decimal:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field({"type": "string", "example": "2026-05", "pattern": r"^\d{4}-\d{2}$"})
class MonthField(serializers.Field):  # type: ignore[type-arg]
    """A month (its first day) as YYYY-MM, read-only."""

    context_free = True  # its value alone makes its output (portal/core/rows.py)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: date) -> str:
        return f"{value:%Y-%m}"


class RateCardSerializer(serializers.ModelSerializer[RateCard]):
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)  # type: ignore[var-annotated]
    backend = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)  # type: ignore[var-annotated]
    created_by = serializers.SlugRelatedField(  # type: ignore[var-annotated]
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = RateCard
        fields = (
            "id", "gpu_model", "backend", "currency", "price_per_gpu_eq_hour",
            "price_per_cpu_core_hour", "price_per_ram_gib_hour", "effective_from", "created_by",
            "created_at",
        )  # fmt: skip
        read_only_fields = fields
        extra_kwargs = {
            "backend": {"help_text": "sharing backend slug; null: every backend without its own"},
            "price_per_cpu_core_hour": {"help_text": "null: CPU is not charged"},
            "price_per_ram_gib_hour": {"help_text": "null: memory is not charged"},
        }


class CatalogSlugField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """A catalog object by slug; anything that is not a slug is refused before the database
    sees it (PostgreSQL refuses NUL bytes outright)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str) or not SLUG.fullmatch(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class RateCardInputSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """A new price from `effective_from` on (cards are never edited: a new price is a new card)."""

    gpu_model = CatalogSlugField(
        slug_field="slug", queryset=GpuModel.objects.all(), help_text="GPU model slug"
    )
    backend = CatalogSlugField(
        slug_field="slug",
        queryset=SharingBackend.objects.all(),
        allow_null=True,
        required=False,
        default=None,
        help_text="sharing backend slug; null or absent: every backend without a card of its own",
    )
    currency = serializers.RegexField(
        r"^[A-Z]{3}\Z",
        max_length=3,
        error_messages={"invalid": "Three capital letters (ISO 4217), e.g. EUR."},
        help_text="ISO 4217, e.g. EUR",
    )
    price_per_gpu_eq_hour = PriceField(help_text='a string, e.g. "2.50"; up to 4 decimals')
    price_per_cpu_core_hour = PriceField(
        required=False,
        allow_null=True,
        default=None,
        help_text='per CPU core-hour the pods request, e.g. "0.05"; null or absent: not charged',
    )
    price_per_ram_gib_hour = PriceField(
        required=False,
        allow_null=True,
        default=None,
        help_text='per memory GiB-hour the pods request, e.g. "0.01"; null or absent: not charged',
    )
    effective_from = serializers.DateField(help_text="the first day the price applies")


class StatementQuerySerializer(serializers.Serializer[Any]):
    """`statements/`'s query parameters (`period` is read by the selectors' `month_of`)."""

    period = serializers.CharField(required=False, max_length=7)
    tenant = serializers.SlugField(required=False, max_length=63)
    cost_centre = serializers.CharField(required=False, max_length=64)


class StatementSerializer(serializers.Serializer[StatementView]):
    """A tenant's charges for a month: final (frozen when the month was closed) or provisional
    (priced from the usage collected so far)."""

    class Meta:
        list_serializer_class = RowsListSerializer

    id = serializers.CharField(help_text="<YYYY-MM>-<tenant slug>")
    period = MonthField(source="month")
    tenant = serializers.SlugField(source="tenant.slug")
    tenant_name = serializers.CharField(source="tenant.name")
    cost_centre = serializers.CharField()
    currency = serializers.CharField(help_text="empty: nothing priced")
    basis = serializers.ChoiceField(choices=Basis.choices)
    unit = serializers.CharField(
        help_text="of the GPU lines' quantities (the basis's); CPU and memory lines have their own"
    )
    total = serializers.DecimalField(
        max_digits=18, decimal_places=2, help_text="the sum of the lines' rounded amounts"
    )
    final = serializers.BooleanField(help_text="the month is closed: stored, never recomputed")
    provisional = serializers.BooleanField(
        read_only=True, help_text="the month is open: may change"
    )
    problem = serializers.CharField(
        help_text="why it cannot be priced now (e.g. rate cards in two currencies); empty: none"
    )


class CostCentreTotalSerializer(serializers.Serializer[Any]):
    cost_centre = serializers.CharField()
    currency = serializers.CharField()
    total = serializers.DecimalField(max_digits=18, decimal_places=2)


class StatementPageSerializer(serializers.Serializer[Any]):
    """A page of a month's statements, with the per-cost-centre totals of all of them."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    period = serializers.CharField(help_text="YYYY-MM")
    cost_centres = CostCentreTotalSerializer(
        many=True, help_text="every statement of the answer (all pages) by cost centre, currency"
    )
    results = StatementSerializer(many=True)


class HistoryEntrySerializer(serializers.Serializer[HistoryEntry]):
    action = serializers.ChoiceField(choices=["period.close", "period.reopen"])
    actor = serializers.CharField(help_text="username")
    at = serializers.DateTimeField()
    comment = serializers.CharField(help_text="the reason given for a reopening")
    total = serializers.SerializerMethodField(
        help_text="this tenant's total the close froze or the reopening discarded; "
        "null: the tenant had no statement then"
    )
    currency = serializers.SerializerMethodField()

    @extend_schema_field({"type": "string", "nullable": True, "example": "20.00"})
    def get_total(self, entry: HistoryEntry) -> str | None:
        return entry.total.partition(" ")[0] if entry.total is not None else None

    def get_currency(self, entry: HistoryEntry) -> str:
        return (entry.total or "").partition(" ")[2]


class StatementDetailSerializer(StatementSerializer):
    history = HistoryEntrySerializer(
        many=True, help_text="the closes and reopenings of the month, oldest first (the audit)"
    )


@extend_schema_field({"type": "string", "example": "10/7"})
class FractionField(serializers.Field):  # type: ignore[type-arg]
    """An exact quantity as a string: "3", "10/7"."""

    context_free = True  # its value alone makes its output (portal/core/rows.py)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: Any) -> str:
        return str(value)


class LineSerializer(serializers.Serializer[LineView]):
    class Meta:
        list_serializer_class = RowsListSerializer

    gpu_model = serializers.CharField()
    offering = serializers.CharField()
    user = serializers.CharField(help_text="username")
    workload = serializers.CharField()
    quantity = FractionField(help_text="exact, of `unit`, e.g. 10/7")
    unit = serializers.CharField(
        help_text="GPU-eq-hour or GPU-hour (the basis), CPU core-hour or memory GiB-hour"
    )
    rate = serializers.DecimalField(
        max_digits=14, decimal_places=4, allow_null=True, help_text="null: no rate card, no charge"
    )
    currency = serializers.CharField()
    amount = serializers.DecimalField(
        max_digits=18, decimal_places=2, help_text="quantity x rate, rounded once, half up"
    )
    used_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    utilisation = serializers.DecimalField(
        max_digits=12,
        decimal_places=3,
        allow_null=True,
        help_text="used GPU-hours over the quantity (1 = all used); null: a CPU, memory or "
        "unreserved-capacity line",
    )
    idle_cost = serializers.DecimalField(
        max_digits=18,
        decimal_places=2,
        allow_null=True,
        help_text="paid for and not used: the quantity beyond the used GPU-hours at the rate, "
        "rounded once; null: no rate, or a CPU, memory or unreserved-capacity line",
    )


class LinePageSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = LineSerializer(many=True)


class PeriodSerializer(serializers.ModelSerializer[Period]):
    month = MonthField()
    state = serializers.ChoiceField(choices=PeriodState.choices)
    basis = serializers.CharField(help_text="the charge basis the close used; empty while open")
    closed_by = serializers.SlugRelatedField(  # type: ignore[var-annotated]
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = Period
        fields = ("month", "state", "basis", "closed_at", "closed_by")
        read_only_fields = fields


class PeriodStatementSerializer(serializers.Serializer[StatementView]):
    id = serializers.CharField()
    tenant = serializers.SlugField(source="tenant.slug")
    cost_centre = serializers.CharField()
    currency = serializers.CharField()
    total = serializers.DecimalField(max_digits=18, decimal_places=2)
    final = serializers.BooleanField()


class PeriodDetailSerializer(serializers.Serializer[Any]):
    """A period after a close or reopening, with its statements' totals (final after a close,
    provisional after a reopening)."""

    period = PeriodSerializer()
    statements = PeriodStatementSerializer(many=True)


class ReopenSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    multiline_fields = ("reason",)

    reason = serializers.CharField(
        max_length=TEXT_MAX_LENGTH, help_text="why the month is reopened (kept in the audit)"
    )
