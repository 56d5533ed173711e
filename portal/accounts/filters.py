"""The filters of the users list (the identity page and `users/`)."""

from django import forms
from django.db.models import Q, QuerySet
from django.utils.translation import gettext_lazy as _
from django_filters import CharFilter, FilterSet

from portal.accounts.models import User


class UserFilter(FilterSet):
    q = CharFilter(
        method="search",
        label=_("Find"),
        help_text=_("part of a username or email"),
        widget=forms.TextInput(attrs={"placeholder": _("username or email")}),
    )

    class Meta:
        model = User
        fields: tuple[str, ...] = ()

    def search(self, users: QuerySet[User], name: str, value: str) -> QuerySet[User]:
        return users.filter(Q(username__icontains=value) | Q(email__icontains=value))
