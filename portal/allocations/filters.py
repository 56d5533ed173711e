"""The filters of GPU request lists: My requests, the approvals queue, all requests and
`requests/` in the API; and of extensions (the approvals queue and `extensions/`)."""

from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from django_filters import BooleanFilter, CharFilter, ChoiceFilter, FilterSet

from portal.allocations.models import ExtensionState, GpuRequest, GpuRequestExtension, RequestState

SORTS = {"oldest": ("created_at", "id"), "newest": ("-created_at", "-id")}


def _state_filter(choices: Any) -> ChoiceFilter:
    return ChoiceFilter(
        choices=choices,
        label=_("State"),
        empty_label=_("any"),
        error_messages={"invalid_choice": _("Unknown state.")},
    )


def _tenant_filter(field_name: str) -> CharFilter:
    return CharFilter(
        field_name=field_name,
        label=_("Tenant"),
        help_text=_("tenant slug"),
        widget=forms.TextInput(attrs={"placeholder": "slug"}),
    )


class _Sorted(FilterSet):
    """`sort`: oldest or newest first."""

    sort = ChoiceFilter(
        choices=[("oldest", _("oldest first")), ("newest", _("newest first"))],
        method="sort_by",
        label=_("Sort"),
        empty_label=None,
        help_text=_("oldest or newest first"),
        error_messages={"invalid_choice": _("Sort by oldest or newest.")},
    )

    def sort_by(self, rows: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return rows.order_by(*SORTS[value])


class GpuRequestFilter(_Sorted):
    state = _state_filter(RequestState.choices)
    tenant = _tenant_filter("tenant__slug")
    mine = BooleanFilter(
        method="filter_mine", label=_("Mine"), help_text=_("only the caller's own requests")
    )

    class Meta:
        model = GpuRequest
        fields: tuple[str, ...] = ()

    def filter_mine(
        self, requests: QuerySet[GpuRequest], name: str, value: bool
    ) -> QuerySet[GpuRequest]:
        user = getattr(self.request, "user", None)
        return requests.filter(requester=user) if value and user is not None else requests


class GpuRequestExtensionFilter(_Sorted):
    """Extensions: the Approvals page's and `extensions/` in the API."""

    state = _state_filter(ExtensionState.choices)
    tenant = _tenant_filter("request__tenant__slug")
    mine = BooleanFilter(
        method="filter_mine", label=_("Mine"), help_text=_("only the caller's own extensions")
    )

    class Meta:
        model = GpuRequestExtension
        fields: tuple[str, ...] = ()

    def filter_mine(
        self, extensions: QuerySet[GpuRequestExtension], name: str, value: bool
    ) -> QuerySet[GpuRequestExtension]:
        user = getattr(self.request, "user", None)
        return extensions.filter(requested_by=user) if value and user is not None else extensions
