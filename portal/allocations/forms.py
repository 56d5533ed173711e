from django import forms

from portal.allocations.models import Purpose
from portal.catalog.models import Offering
from portal.core.forms import BoundedForm
from portal.core.validators import INTEGER_MAX, TEXT_MAX_LENGTH
from tenants.models import Tenant


class OfferingChoiceField(forms.ModelChoiceField):  # type: ignore[type-arg]
    def label_from_instance(self, obj: Offering) -> str:
        return f"{obj.size} · {obj.backend.name} ({obj.gpu_eq} GPU-eq)"


class GpuRequestForm(BoundedForm):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), to_field_name="slug")
    offering = OfferingChoiceField(
        queryset=Offering.objects.none(), to_field_name="slug", label="GPU and size"
    )
    # The lower bounds are the service's to say (it names the field); the upper, the column's.
    count = forms.IntegerField(
        initial=1, max_value=INTEGER_MAX, help_text="How many units of the offering"
    )
    duration_hours = forms.IntegerField(
        label="Duration (hours)",
        required=False,
        max_value=INTEGER_MAX,
        help_text="Empty: the tenant's default. Longer than its auto-approve hours needs a lead.",
    )
    purpose = forms.ChoiceField(choices=Purpose.choices, initial=Purpose.NOTEBOOK)
    justification = forms.CharField(
        required=False, max_length=TEXT_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 2})
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
    comment = forms.CharField(required=False, max_length=TEXT_MAX_LENGTH)


class ExtendForm(BoundedForm):
    hours = forms.IntegerField(min_value=1, max_value=INTEGER_MAX)
