"""The chargeback pages' forms: which month and how to list it, reopening a month, a new price,
a budget."""

from datetime import date
from decimal import Decimal
from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _

from portal.billing.models import BudgetUnit
from portal.billing.selectors import month_of
from portal.catalog.models import GpuModel, SharingBackend
from portal.core.errors import ValidationFailed
from portal.core.forms import BoundedForm, LongSelect
from portal.core.validators import TEXT_MAX_LENGTH

SORTS = {
    "tenant": _("Tenant"),
    "-tenant": _("Tenant, Z to A"),
    "cost_centre": _("Cost centre"),
    "-cost_centre": _("Cost centre, Z to A"),
    "total": _("Total, smallest first"),
    "-total": _("Total, largest first"),
}


class MonthInput(forms.TextInput):
    """`<input type="month">`: browsers offer a month picker and send YYYY-MM."""

    input_type = "month"


class ChargebackFilterForm(BoundedForm):
    """`period` (YYYY-MM), `cost_centre` (one of the tenants' the user sees, or all) and
    `sort` (a column, `-` for descending)."""

    period = forms.CharField(label=_("Month"), widget=MonthInput)
    # One of `cost_centres`, checked in `clean_cost_centre`: a ChoiceField would normalise
    # its hundreds of choices on every page.
    cost_centre = forms.CharField(label=_("Cost centre"), required=False, widget=LongSelect)
    sort = forms.ChoiceField(label=_("Sort by"), choices=list(SORTS.items()))

    def __init__(self, data: dict[str, Any], *, cost_centres: list[str]) -> None:
        super().__init__(data)
        self._cost_centres = frozenset(cost_centres)
        widget = cast("LongSelect", self.fields["cost_centre"].widget)
        widget.choices = [("", _("Every cost centre"))] + [
            (centre, centre or _("(none)")) for centre in cost_centres
        ]

    def clean_cost_centre(self) -> str:
        centre: str = self.cleaned_data["cost_centre"]
        if centre and centre not in self._cost_centres:
            raise forms.ValidationError(
                forms.ChoiceField.default_error_messages["invalid_choice"],
                code="invalid_choice",
                params={"value": centre},
            )
        return centre

    def clean_period(self) -> date:
        try:
            return month_of(self.cleaned_data["period"], field="period")
        except ValidationFailed as error:
            raise forms.ValidationError(error.fields["period"]) from error


class PeriodReopenForm(BoundedForm):
    reason = forms.CharField(
        label=_("Reason"),
        max_length=TEXT_MAX_LENGTH,
        help_text=_("Why the month is reopened: it stays in the statements' history."),
    )


class RateCardForm(BoundedForm):
    gpu_model = forms.ModelChoiceField(
        label=_("GPU model"), queryset=GpuModel.objects.order_by("name"), to_field_name="slug"
    )
    backend = forms.ModelChoiceField(
        label=_("Sharing backend"),
        queryset=SharingBackend.objects.order_by("name"),
        to_field_name="slug",
        required=False,
        empty_label=_("Every backend"),
    )
    currency = forms.CharField(
        label=_("Currency"), max_length=3, min_length=3, help_text=_("ISO 4217, e.g. EUR")
    )
    price_per_gpu_eq_hour = forms.DecimalField(
        label=_("Price per GPU-eq-hour"), max_digits=14, decimal_places=4, min_value=0
    )
    price_per_cpu_core_hour = forms.DecimalField(
        label=_("Price per CPU core-hour"),
        max_digits=14,
        decimal_places=4,
        min_value=0,
        required=False,
        help_text=_("Of the CPU cores the pods request; empty: CPU is not charged"),
    )
    price_per_ram_gib_hour = forms.DecimalField(
        label=_("Price per memory GiB-hour"),
        max_digits=14,
        decimal_places=4,
        min_value=0,
        required=False,
        help_text=_("Of the memory the pods request; empty: memory is not charged"),
    )
    effective_from = forms.DateField(
        label=_("Effective from"), widget=forms.DateInput(attrs={"type": "date"})
    )


class BudgetForm(BoundedForm):
    unit = forms.ChoiceField(label=_("Budget in"), choices=BudgetUnit.choices)
    amount = forms.DecimalField(
        label=_("Amount a month"), max_digits=18, decimal_places=2, min_value=Decimal("0.01")
    )
    currency = forms.CharField(
        label=_("Currency"),
        max_length=3,
        required=False,
        help_text=_("ISO 4217, for money, e.g. EUR"),
    )
    approval_above = forms.BooleanField(
        label=_("Above the budget, every new request needs a lead's approval"), required=False
    )
