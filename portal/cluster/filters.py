"""The filters of provisioning runs (`provisioning-runs/`) and capacity (the page and
`capacity/`)."""

from django.utils.translation import gettext_lazy as _
from django_filters import CharFilter, ChoiceFilter, FilterSet

from portal.cluster.models import OfferingCapacity, ProvisioningRun, RunState


class ProvisioningRunFilter(FilterSet):
    tenant = CharFilter(field_name="tenant__slug", label=_("Tenant"), help_text=_("tenant slug"))
    cluster = CharFilter(
        field_name="cluster__name", label=_("Cluster"), help_text=_("cluster name")
    )
    state = ChoiceFilter(
        choices=RunState.choices,
        label=_("State"),
        empty_label=_("any"),
        error_messages={"invalid_choice": _("Unknown state.")},
    )

    class Meta:
        model = ProvisioningRun
        fields: tuple[str, ...] = ()


class CapacityFilter(FilterSet):
    cluster = CharFilter(
        field_name="cluster__name", label=_("Cluster"), help_text=_("cluster name")
    )
    gpu_model = CharFilter(
        field_name="offering__gpu_model__slug",
        label=_("GPU model"),
        help_text=_("GPU model slug"),
    )
    offering = CharFilter(
        field_name="offering__slug", label=_("Offering"), help_text=_("offering slug")
    )

    class Meta:
        model = OfferingCapacity
        fields: tuple[str, ...] = ()
