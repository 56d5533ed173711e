"""The metering windows' filters (`usage/windows/`)."""

from django.utils.translation import gettext_lazy as _
from django_filters import ChoiceFilter, FilterSet

from portal.core.filters import SlugFilter
from portal.metering.models import UsageWindow, WindowState


class UsageWindowFilter(FilterSet):
    cluster = SlugFilter(
        field_name="cluster__name", label=_("Cluster"), max_length=63, help_text=_("cluster name")
    )
    state = ChoiceFilter(
        choices=WindowState.choices,
        label=_("State"),
        empty_label=_("any"),
        error_messages={"invalid_choice": _("Unknown state.")},
    )

    class Meta:
        model = UsageWindow
        fields: tuple[str, ...] = ()
