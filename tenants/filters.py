"""The filters of tenant lists: the admins' Tenants page and `tenants/` in the API."""

from django import forms
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _
from django_filters import CharFilter, ChoiceFilter, FilterSet

from tenants.models import Tenant, TenantState


class TenantFilter(FilterSet):
    """`search` (the API's name) and `q` (the page's) find a part of a tenant's slug, name or
    cost centre; an unknown `state` is bad input, not "no filter"."""

    q = CharFilter(
        method="search_in",
        label=_("Search"),
        help_text=_("the same as search"),
        widget=forms.TextInput(
            attrs={"type": "search", "placeholder": _("slug, name or cost centre")}
        ),
    )
    search = CharFilter(
        method="search_in", label=_("Search"), help_text=_("in slug, name or cost centre")
    )
    state = ChoiceFilter(
        choices=TenantState.choices,
        label=_("State"),
        empty_label=_("any"),
        error_messages={"invalid_choice": _("Unknown state.")},
    )

    class Meta:
        model = Tenant
        fields: tuple[str, ...] = ()

    def search_in(self, tenants: QuerySet[Tenant], name: str, value: str) -> QuerySet[Tenant]:
        return tenants.filter(
            Q(slug__icontains=value) | Q(name__icontains=value) | Q(cost_centre__icontains=value)
        )
