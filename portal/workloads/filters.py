"""The filters of notebook lists: the Notebooks page and `notebooks/` in the API."""

from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from django_filters import BooleanFilter, CharFilter, ChoiceFilter, FilterSet

from portal.workloads.models import Notebook, NotebookState


class NotebookFilter(FilterSet):
    state = ChoiceFilter(
        choices=NotebookState.choices,
        label=_("State"),
        empty_label=_("any"),
        error_messages={"invalid_choice": _("Unknown state.")},
    )
    tenant = CharFilter(field_name="tenant__slug", label=_("Tenant"), help_text=_("tenant slug"))
    mine = BooleanFilter(
        method="filter_mine", label=_("Mine"), help_text=_("only the caller's own notebooks")
    )

    class Meta:
        model = Notebook
        fields: tuple[str, ...] = ()

    def filter_mine(
        self, notebooks: QuerySet[Notebook], name: str, value: bool
    ) -> QuerySet[Notebook]:
        user = getattr(self.request, "user", None)
        return notebooks.filter(owner=user) if value and user is not None else notebooks
