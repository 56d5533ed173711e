from django import forms
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from portal.accounts.tokens import NAME_MAX_LENGTH
from portal.core.forms import BoundedForm


class ApiTokenForm(BoundedForm):
    """A new personal API token: a name to recognise it by, and how long it lives."""

    name = forms.CharField(
        max_length=NAME_MAX_LENGTH,
        label=_("Name"),
        help_text=_("What will use it, e.g. “CI pipeline” or “laptop CLI”."),
    )
    expires_in_days = forms.TypedChoiceField(label=_("Expires in"), coerce=int)

    def __init__(self, *args: object, choices: list[int], default: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["expires_in_days"]
        field.choices = [  # type: ignore[attr-defined]
            (days, ngettext("%(days)s day", "%(days)s days", days) % {"days": days})
            for days in choices
        ]
        field.initial = default if default in choices else choices[-1]
