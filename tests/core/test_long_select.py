"""`LongSelect` writes the same select as Django's `Select`, without a template per option."""

import pytest
from django import forms
from django.test.html import parse_html

from portal.core.forms import LongSelect

CHOICES = [("", "Every cost centre"), ("CC-1", "CC-1"), ('<b>&"x"', '<b> & "x"'), (7, "seven")]


class Both(forms.Form):
    plain = forms.ChoiceField(choices=CHOICES, required=False)
    long = forms.ChoiceField(choices=CHOICES, required=False, widget=LongSelect)


@pytest.mark.parametrize("chosen", [None, "", "CC-1", '<b>&"x"', "7", "not a choice"])
def test_it_renders_what_djangos_select_renders(chosen: str | None) -> None:
    data = {} if chosen is None else {"plain": chosen, "long": chosen}
    form = Both(data or None)

    plain = str(form["plain"]).replace('name="plain"', 'name="x"').replace("id_plain", "id_x")
    long = str(form["long"]).replace('name="long"', 'name="x"').replace("id_long", "id_x")

    assert parse_html(long) == parse_html(plain)
    assert "<b>" not in long  # labels and values are escaped
    if chosen in ("CC-1", "7"):
        assert f'value="{chosen}" selected' in long
