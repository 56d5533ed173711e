from typing import Any

from django import forms
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal.allocations.models import Purpose
from portal.allocations.selectors import OfferingChoice, offering_choices, offerings_of_tenant
from portal.catalog.gpu_eq import gpu_eq_display
from portal.catalog.models import Offering
from portal.core.forms import BoundedForm
from portal.core.validators import INTEGER_MAX, TEXT_MAX_LENGTH
from tenants.models import Tenant


class OfferingChoiceField(forms.ModelChoiceField):  # type: ignore[type-arg]
    def label_from_instance(self, obj: Offering) -> str:
        return gettext("%(model)s · %(size)s · %(backend)s · %(gpu_eq)s GPU-eq each") % {
            "model": obj.gpu_model.name,
            "size": obj.size,
            "backend": obj.backend.name,
            "gpu_eq": gpu_eq_display(obj.gpu_eq),
        }


class GpuRequestForm(BoundedForm):
    """Ask for GPUs. The offering select lists the offerings of the GPU models the chosen tenant
    has quota for (the first tenant until one is chosen), and follows the tenant with htmx."""

    tenant = forms.ModelChoiceField(
        queryset=Tenant.objects.none(), to_field_name="slug", label=_("Tenant")
    )
    offering = OfferingChoiceField(
        queryset=Offering.objects.none(), to_field_name="slug", label=_("GPU and size")
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

    def __init__(self, *args: Any, tenants: Any, offerings: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants  # type: ignore[attr-defined]
        self.fields["offering"].queryset = offerings  # type: ignore[attr-defined]
        # The offering select follows the tenant: its options come again for the new tenant,
        # then a change on the select refreshes the form's preview (see `request_offerings`).
        self.fields["tenant"].widget.attrs.update(
            {
                "hx-get": reverse("allocations:offerings"),
                "hx-trigger": "change consume",
                "hx-target": "#id_offering",
                "hx-swap": "innerHTML",
                "hx-include": "closest form",
                "hx-disabled-elt": "#id_offering",
                "aria-controls": "id_offering",
            }
        )
        if not self.initial.get("tenant") and (tenant := self.offering_tenant) is not None:
            self.initial["tenant"] = tenant.slug

    @cached_property
    def offering_tenant(self) -> Tenant | None:
        """The tenant whose offerings the select lists: the chosen one, else the first."""
        tenants = self.fields["tenant"].queryset  # type: ignore[attr-defined]
        chosen = self.data.get(self.add_prefix("tenant")) if self.is_bound else None
        slug = chosen or self.initial.get("tenant")
        found = tenants.filter(slug=slug).first() if isinstance(slug, str) and slug else None
        return found or tenants.first()  # type: ignore[no-any-return]

    def offering_groups(self) -> list[tuple[str, list[OfferingChoice]]]:
        """The tenant's offerings grouped by GPU model, for the select's optgroups."""
        return offering_choices(
            self.fields["offering"].queryset,  # type: ignore[attr-defined]
            self.offering_tenant,
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        tenant, offering = data.get("tenant"), data.get("offering")
        if tenant is not None and offering is not None:
            mine = offerings_of_tenant(Offering.objects.filter(pk=offering.pk), tenant)
            if not mine.exists():
                self.add_error(
                    "offering",
                    gettext(
                        "Tenant %(tenant)s has no quota for %(model)s: choose one of its GPU "
                        "models."
                    )
                    % {"tenant": tenant.slug, "model": offering.gpu_model.name},
                )
        return data


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
