"""The profile page's form: the person's language and time zone."""

from django import forms
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import time_zone_names
from portal.accounts.preferences import language_choices
from portal.core.forms import BoundedForm


class ProfileForm(BoundedForm):
    language = forms.ChoiceField(
        label=_("Language"),
        required=False,
        help_text=_("The language of the portal's pages and emails to you."),
    )
    time_zone = forms.ChoiceField(
        label=_("Time zone"),
        help_text=_("Dates and times on the pages are shown in this zone."),
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["language"].choices = language_choices()  # type: ignore[attr-defined]
        self.fields["time_zone"].choices = [  # type: ignore[attr-defined]
            (name, name) for name in sorted(time_zone_names())
        ]
