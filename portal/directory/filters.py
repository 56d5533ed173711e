"""The filters of the directory changes list (`directory/changes/`)."""

from django.utils.translation import gettext_lazy as _
from django_filters import ChoiceFilter, FilterSet

from portal.directory.models import ChangeState, DirectoryChange


class DirectoryChangeFilter(FilterSet):
    state = ChoiceFilter(
        choices=ChangeState.choices,
        label=_("State"),
        empty_label=_("any"),
        error_messages={"invalid_choice": _("Unknown state.")},
    )

    class Meta:
        model = DirectoryChange
        fields: tuple[str, ...] = ()
