from django import forms
from django.utils.translation import gettext_lazy as _

from portal.allocations.models import Purpose
from portal.catalog.models import Offering
from portal.core.forms import BoundedForm
from portal.core.validators import INTEGER_MAX, TEXT_MAX_LENGTH
from tenants.models import Tenant


class OfferingChoiceField(forms.ModelChoiceField):  # type: ignore[type-arg]
    def label_from_instance(self, obj: Offering) -> str:
        return f"{obj.size} · {obj.backend.name} ({obj.gpu_eq} GPU-eq)"


class GpuRequestForm(BoundedForm):
    tenant = forms.ModelChoiceField(
        queryset=Tenant.objects.none(), to_field_name="slug", label=_("Tenant")
    )
    offering = OfferingChoiceField(
        queryset=Offering.objects.none(), to_field_name="slug", label="GPU and size"
    )
    # The lower bounds are the service's to say (it names the field); the upper, the column's.
    count = forms.IntegerField(
        label=_("Count"),
        initial=1,
        max_value=INTEGER_MAX,
        help_text=_("How many units of the offering"),
    )
    duration_hours = forms.IntegerField(
        label=_("Duration (hours)"),
        required=False,
        max_value=INTEGER_MAX,
        help_text=_(
            "Empty: the tenant's default. Longer than its auto-approve hours needs a lead."
        ),
    )
    purpose = forms.ChoiceField(
        label=_("Purpose"), choices=Purpose.choices, initial=Purpose.NOTEBOOK
    )
    justification = forms.CharField(
        label=_("Justification"),
        required=False,
        max_length=TEXT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def __init__(self, *args: object, tenants: object, offerings: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants  # type: ignore[attr-defined]
        self.fields["offering"].queryset = offerings  # type: ignore[attr-defined]

    def offering_groups(self) -> list[tuple[str, list[Offering]]]:
        """Offerings grouped by GPU model, for the select's optgroups."""
        groups: dict[str, list[Offering]] = {}
        for offering in self.fields["offering"].queryset:  # type: ignore[attr-defined]
            groups.setdefault(offering.gpu_model.name, []).append(offering)
        return list(groups.items())


class DecisionForm(BoundedForm):
    comment = forms.CharField(label=_("Comment"), required=False, max_length=TEXT_MAX_LENGTH)


class ExtendForm(BoundedForm):
    """More time on an allocation; the reason is needed when a lead decides."""

    hours = forms.IntegerField(
        label=_("Extend by (hours)"),
        min_value=1,
        max_value=INTEGER_MAX,
        initial=1,
        error_messages={"min_value": _("Extend by at least 1 hour.")},
    )
    reason = forms.CharField(
        label=_("Reason"),
        required=False,
        max_length=TEXT_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Needed when the extension goes beyond what the tenant grants at once."),
    )
