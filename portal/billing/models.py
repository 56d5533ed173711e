"""Chargeback: rate cards (prices per GPU-eq-hour, versioned by the day they take effect),
periods (months finance closes) and the statements a close freezes.

An open month's statements are provisional: computed from the usage records whenever they are
read. Closing a month stores each tenant's statement and its lines, which then never change:
not when usage is collected again, metrics age out or prices change. Reopening (an admin, with
a reason) deletes them; closing again stores them anew. Both are audited.
"""

from decimal import Decimal
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.catalog.gpu_eq import gpu_eq_columns, gpu_eq_constraints, gpu_eq_property
from portal.core.loading import LoadedFromRows
from portal.core.visibility import VisibleQuerySet, register_scope
from portal.metering.models import Measures
from tenants.access import sees_everything, tenants_led_by

currency_validator = RegexValidator(r"^[A-Z]{3}$", _("Three capital letters (ISO 4217), e.g. EUR."))


class Basis(models.TextChoices):
    RESERVED = "reserved", _("reserved GPU-eq-hours")
    REQUESTED = "requested", _("requested GPU-eq-hours")
    USED = "used", _("used GPU-hours")


def basis_quantity(measures: Measures, basis: str) -> Fraction:
    """The quantity a charge basis counts in summed usage measures: reserved or requested
    GPU-eq-hours, or used GPU-hours, as an exact fraction."""
    if basis == Basis.RESERVED:
        return measures.reserved
    if basis == Basis.REQUESTED:
        return measures.requested
    return Fraction(measures.used_gpu_hours)


class RateCard(models.Model):
    """The price of one GPU-eq-hour of a GPU model (on one sharing backend, or on every one),
    from `effective_from` on, and optionally of the CPU core-hours and memory GiB-hours its pods
    request (empty: not charged). A new price is a new card; cards are never edited."""

    gpu_model = models.ForeignKey("catalog.GpuModel", on_delete=models.PROTECT, related_name="+")
    backend = models.ForeignKey(
        "catalog.SharingBackend",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Empty: every sharing backend without a card of its own"),
    )
    currency = models.CharField(max_length=3, validators=[currency_validator])
    price_per_gpu_eq_hour = models.DecimalField(
        max_digits=14, decimal_places=4, validators=[MinValueValidator(0)]
    )
    price_per_cpu_core_hour = models.DecimalField(
        max_digits=14,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text=_("Empty: CPU is not charged"),
    )
    price_per_ram_gib_hour = models.DecimalField(
        max_digits=14,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text=_("Empty: memory is not charged"),
    )
    effective_from = models.DateField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["gpu_model__name", "backend__name", "-effective_from", "-id"]

    def __str__(self) -> str:
        return f"{self.gpu_model_id}: {self.price_per_gpu_eq_hour} {self.currency}"


class PeriodState(models.TextChoices):
    OPEN = "open", _("open")
    CLOSED = "closed", _("closed")


class Period(LoadedFromRows, models.Model):
    """A month of chargeback; `month` is its first day."""

    month = models.DateField(unique=True)
    state = models.CharField(max_length=8, choices=PeriodState.choices, default=PeriodState.OPEN)
    basis = models.CharField(max_length=16, choices=Basis.choices, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-month"]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m}"


class Statement(LoadedFromRows, models.Model):
    """A tenant's frozen charges for a closed month."""

    period = models.ForeignKey(Period, on_delete=models.CASCADE, related_name="statements")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.PROTECT, related_name="+")
    cost_centre = models.CharField(max_length=64, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    basis = models.CharField(max_length=16, choices=Basis.choices)
    total = models.DecimalField(max_digits=18, decimal_places=2)
    # How many lines it has, stored with them by the close: its lines are at positions 1 to
    # line_count, so a page of them is a range of positions and they are never counted. Its
    # default is the database's too, for rows written in SQL.
    line_count = models.PositiveIntegerField(default=0, db_default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["period", "tenant__slug"]
        constraints = [
            models.UniqueConstraint(fields=["period", "tenant"], name="statement_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.period} {self.tenant_id}"


class OpenMonthTotal(models.Model):
    """A tenant's provisional statement total for an open month on one charge basis, as last
    priced from the usage records, kept so that a month's list of every tenant's statements
    is not priced anew at each reading (portal/billing/provisional.py). `inputs` names what it
    was priced from; a row whose inputs have changed since, or older than
    `provisional.REPRICE_AFTER`, is priced again before it is shown."""

    month = models.DateField()
    basis = models.CharField(max_length=16, choices=Basis.choices)
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    # Every currency its rate cards are in, comma-separated: more than one is a statement
    # that cannot be priced (`pricing.currency_problem` says why, in the reader's language).
    currencies = models.TextField(blank=True)
    total = models.DecimalField(max_digits=18, decimal_places=2)
    inputs = models.CharField(max_length=200)
    priced_at = models.DateTimeField()

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["month", "tenant__slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["month", "basis", "tenant"], name="open_month_total_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.tenant_id} {self.basis}"


class StatementLine(LoadedFromRows, models.Model):
    """GPU model x offering x user x workload x rate: a quantity of the basis, priced."""

    # No index of its own: the (statement, position) index begins with it.
    statement = models.ForeignKey(
        Statement, on_delete=models.CASCADE, related_name="lines", db_index=False
    )
    position = models.PositiveIntegerField()  # 1 to the statement's line_count
    gpu_model = models.CharField(max_length=100, blank=True)
    offering = models.CharField(max_length=100, blank=True)
    user = models.CharField(max_length=150, blank=True)
    workload = models.CharField(max_length=253, blank=True)
    quantity_num, quantity_den = gpu_eq_columns("quantity")
    quantity = gpu_eq_property("quantity")
    unit = models.CharField(max_length=32)
    rate_card = models.ForeignKey(
        RateCard, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    rate = models.DecimalField(max_digits=14, decimal_places=4, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    amount = models.DecimalField(max_digits=18, decimal_places=2)
    used_gpu_hours = models.DecimalField(max_digits=20, decimal_places=6, default=0)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["statement", "position"]
        constraints = gpu_eq_constraints("quantity", model="statementline")
        # A statement's lines in order, a page at a time: 100,000 lines are not sorted for each.
        indexes = [models.Index(fields=["statement", "position"], name="statementline_order")]

    def __str__(self) -> str:
        return f"{self.statement_id}/{self.position}"


class BudgetUnit(models.TextChoices):
    MONEY = "money", _("money")
    GPU_EQ_HOURS = "gpu_eq_hours", _("GPU-eq-hours")


class Budget(models.Model):
    """A tenant's monthly budget, in money (in `currency`) or in GPU-eq-hours of the charge
    basis. With `approval_above`, once a month's spending reaches it every new request of the
    tenant waits for a lead."""

    tenant = models.OneToOneField("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    unit = models.CharField(max_length=16, choices=BudgetUnit.choices)
    amount = models.DecimalField(
        max_digits=18, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))]
    )
    currency = models.CharField(
        max_length=3, blank=True, validators=[currency_validator], help_text=_("Money only")
    )
    approval_above = models.BooleanField(
        default=False, help_text=_("Above the budget, every new request waits for a lead")
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["tenant__slug"]

    def __str__(self) -> str:
        unit = self.currency if self.unit == BudgetUnit.MONEY else "GPU-eq-hours"
        return f"{self.tenant_id}: {self.amount} {unit} a month"


class BudgetAlert(models.Model):
    """A threshold of a tenant's budget reached in a month: its row is made once, so the leads
    and finance hear about each threshold once a month, however often the check runs."""

    THRESHOLDS = (80, 100)

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    month = models.DateField()
    threshold = models.PositiveSmallIntegerField(choices=[(t, f"{t}%") for t in THRESHOLDS])
    percent = models.DecimalField(max_digits=12, decimal_places=1)
    sent_at = models.DateTimeField(auto_now_add=True)  # when the threshold was found reached
    # When its email went out; empty until then, so the next check sends it again if the task
    # was lost (the broker down) or gave up (the mail server down).
    notified_at = models.DateTimeField(null=True, blank=True)

    objects = VisibleQuerySet.as_manager()

    class Meta:
        ordering = ["-month", "tenant__slug", "threshold"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "month", "threshold"], name="budget_alert_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.month:%Y-%m} {self.threshold}%"


def _visible_rate_cards(cards: models.QuerySet[RateCard], _user: User) -> models.QuerySet[RateCard]:
    """Everyone sees the prices that apply."""
    return cards


def _led_tenants_scope(tenant_path: str) -> Any:
    """Finance and admins see all; leads their tenants' (reached through `tenant_path`);
    developers none: who sees statements, their lines, budgets and budget alerts."""

    def scope(rows: models.QuerySet[Any], user: User) -> models.QuerySet[Any]:
        if sees_everything(user):
            return rows
        return rows.filter(**{f"{tenant_path}__in": tenants_led_by(user)})

    return scope


register_scope(RateCard, _visible_rate_cards)
register_scope(StatementLine, _led_tenants_scope("statement__tenant"))
register_scope(Statement, _led_tenants_scope("tenant"))
register_scope(OpenMonthTotal, _led_tenants_scope("tenant"))


register_scope(Budget, _led_tenants_scope("tenant"))
register_scope(BudgetAlert, _led_tenants_scope("tenant"))
