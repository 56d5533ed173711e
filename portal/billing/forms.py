"""The chargeback pages' forms: which month and how to list it, reopening a month, a new price,
a budget."""

from datetime import date
from decimal import Decimal
from typing import Any, cast

from django import forms

from portal.billing.models import BudgetUnit
from portal.billing.selectors import month_of
from portal.catalog.models import GpuModel, SharingBackend
from portal.core.errors import ValidationFailed
from portal.core.forms import BoundedForm
from portal.core.validators import TEXT_MAX_LENGTH

SORTS = {
    "tenant": "Tenant",
    "-tenant": "Tenant, Z to A",
    "cost_centre": "Cost centre",
    "-cost_centre": "Cost centre, Z to A",
    "total": "Total, smallest first",
    "-total": "Total, largest first",
}


class MonthInput(forms.TextInput):
    """`<input type="month">`: browsers offer a month picker and send YYYY-MM."""

    input_type = "month"


class ChargebackFilterForm(BoundedForm):
    """`period` (YYYY-MM), `cost_centre` (one of the tenants' the user sees, or all) and
    `sort` (a column, `-` for descending)."""

    period = forms.CharField(label="Month", widget=MonthInput)
    cost_centre = forms.ChoiceField(label="Cost centre", required=False)
    sort = forms.ChoiceField(label="Sort by", choices=list(SORTS.items()))

    def __init__(self, data: dict[str, Any], *, cost_centres: list[str]) -> None:
        super().__init__(data)
        field = cast("forms.ChoiceField", self.fields["cost_centre"])
        field.choices = [("", "Every cost centre")] + [
            (centre, centre or "(none)") for centre in cost_centres
        ]

    def clean_period(self) -> date:
        try:
            return month_of(self.cleaned_data["period"], field="period")
        except ValidationFailed as error:
            raise forms.ValidationError(error.fields["period"]) from error


class PeriodReopenForm(BoundedForm):
    reason = forms.CharField(
        label="Reason",
        max_length=TEXT_MAX_LENGTH,
        help_text="Why the month is reopened: it stays in the statements' history.",
    )


class RateCardForm(BoundedForm):
    gpu_model = forms.ModelChoiceField(
        label="GPU model", queryset=GpuModel.objects.order_by("name"), to_field_name="slug"
    )
    backend = forms.ModelChoiceField(
        label="Sharing backend",
        queryset=SharingBackend.objects.order_by("name"),
        to_field_name="slug",
        required=False,
        empty_label="Every backend",
    )
    currency = forms.CharField(
        label="Currency", max_length=3, min_length=3, help_text="ISO 4217, e.g. EUR"
    )
    price_per_gpu_eq_hour = forms.DecimalField(
        label="Price per GPU-eq-hour", max_digits=14, decimal_places=4, min_value=0
    )
    price_per_cpu_core_hour = forms.DecimalField(
        label="Price per CPU core-hour",
        max_digits=14,
        decimal_places=4,
        min_value=0,
        required=False,
        help_text="Of the CPU cores the pods request; empty: CPU is not charged",
    )
    price_per_ram_gib_hour = forms.DecimalField(
        label="Price per memory GiB-hour",
        max_digits=14,
        decimal_places=4,
        min_value=0,
        required=False,
        help_text="Of the memory the pods request; empty: memory is not charged",
    )
    effective_from = forms.DateField(
        label="Effective from", widget=forms.DateInput(attrs={"type": "date"})
    )


class BudgetForm(BoundedForm):
    unit = forms.ChoiceField(label="Budget in", choices=BudgetUnit.choices)
    amount = forms.DecimalField(
        label="Amount a month", max_digits=18, decimal_places=2, min_value=Decimal("0.01")
    )
    currency = forms.CharField(
        label="Currency", max_length=3, required=False, help_text="ISO 4217, for money, e.g. EUR"
    )
    approval_above = forms.BooleanField(
        label="Above the budget, every new request needs a lead's approval", required=False
    )
