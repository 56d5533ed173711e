"""Forms for the tenant pages. They only parse input; the services validate and write."""

from django import forms
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.catalog.forms import EnabledGpuModelField
from portal.core.forms import BoundedForm
from portal.core.validators import TEXT_MAX_LENGTH
from tenants.models import MemberRole


class TenantPolicyForm(BoundedForm):
    name = forms.CharField(max_length=200, label=_("Name"))
    cost_centre = forms.CharField(max_length=64, required=False, label=_("Cost centre"))
    auto_approve_gpu_eq = forms.CharField(
        max_length=40,
        label=_("Auto-approve up to (GPU-eq per request)"),
        initial="1",
        help_text=_("A whole number, a decimal or a fraction like 1/2."),
    )
    auto_approve_hours = forms.IntegerField(
        label=_("Auto-approve up to (hours)"), min_value=0, initial=8
    )
    default_duration_hours = forms.IntegerField(
        label=_("Default duration (hours)"), min_value=1, initial=8
    )
    max_duration_hours = forms.IntegerField(
        label=_("Maximum duration (hours)"), min_value=1, initial=168
    )
    cpu_cores_quota = forms.IntegerField(label=_("CPU cores quota"), min_value=0, initial=64)
    memory_gib_quota = forms.IntegerField(label=_("Memory quota (GiB)"), min_value=0, initial=256)
    storage_gib_quota = forms.IntegerField(
        label=_("Storage quota (GiB)"), min_value=0, initial=1024
    )
    notebook_idle_minutes = forms.IntegerField(
        label=_("Stop idle notebooks after (minutes)"),
        min_value=0,
        initial=60,
        required=False,
        help_text=_("Idle: GPU below the utilisation threshold and no Jupyter activity. 0: never."),
    )

    def clean_notebook_idle_minutes(self) -> int:
        value = self.cleaned_data.get("notebook_idle_minutes")
        return 60 if value is None else int(value)


class TenantCreateForm(TenantPolicyForm):
    slug = forms.CharField(
        max_length=61,
        label=_("Slug"),
        help_text=_("Lowercase letters, digits and hyphens; the namespace is t-<slug>."),
    )
    field_order = ["slug", "name", "cost_centre"]


class QuotaForm(BoundedForm):
    gpu_model = EnabledGpuModelField(label=_("GPU model"))
    gpu_eq = forms.CharField(
        max_length=40, label=_("Quota (GPU-eq)"), help_text=_("e.g. 8, 2.5 or 7/2")
    )
    force = forms.BooleanField(
        required=False,
        label=_("Force below what is held"),
        help_text=_(
            "Allocations keep running; nothing new is approved for the model until they fit."
        ),
    )


class MemberForm(BoundedForm):
    username = forms.ModelChoiceField(
        queryset=User.objects.filter(is_active=True),
        to_field_name="username",
        widget=forms.TextInput,
        label=_("Username"),
        error_messages={"invalid_choice": _("There is no active user with this username.")},
    )
    role = forms.ChoiceField(
        choices=MemberRole.choices, initial=MemberRole.DEVELOPER, label=_("Role")
    )


class QuotaRequestForm(BoundedForm):
    gpu_model = EnabledGpuModelField(label=_("GPU model"))
    amount = forms.CharField(
        max_length=40, label=_("Additional GPU-eq"), help_text=_("e.g. 2 or 1/2")
    )
    reason = forms.CharField(
        max_length=TEXT_MAX_LENGTH, label=_("Reason"), widget=forms.Textarea(attrs={"rows": 3})
    )


class DecisionForm(BoundedForm):
    decision = forms.ChoiceField(
        choices=[("approve", _("Approve")), ("reject", _("Reject"))], label=_("Decision")
    )
    comment = forms.CharField(
        required=False,
        max_length=TEXT_MAX_LENGTH,
        label=_("Comment"),
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class StateForm(BoundedForm):
    """Suspend, reactivate or archive; the confirmation (and for archive the typed slug) is
    portal.core.confirm's."""

    action = forms.ChoiceField(
        choices=[
            ("suspend", _("Suspend")),
            ("reactivate", _("Reactivate")),
            ("archive", _("Archive")),
        ],
        label=_("Action"),
    )
    comment = forms.CharField(required=False, max_length=TEXT_MAX_LENGTH, label=_("Comment"))
