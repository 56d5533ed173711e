"""`PageFormRenderer` (portal/core/forms.py, the portal's FORM_RENDERER) writes each widget it
knows exactly as Django's template renderer does, and leaves the others to it."""

import datetime

import pytest
from django import forms
from django.conf import settings
from django.forms.renderers import BaseRenderer, DjangoTemplates
from django.template import engines
from django.utils import translation
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy

from portal.accounts.models import User
from portal.core.forms import PageFormRenderer, filter_field_html


class EveryWidget(forms.Form):
    text = forms.CharField(max_length=20, help_text="help")
    markup = forms.CharField(required=False, widget=forms.TextInput(attrs={"placeholder": '<"&>'}))
    flags = forms.CharField(
        required=False, widget=forms.TextInput(attrs={"autofocus": True, "hidden": False})
    )
    number = forms.IntegerField(min_value=1, max_value=10)
    decimal = forms.DecimalField(max_digits=6, decimal_places=3)
    email = forms.EmailField()
    day = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}))
    at = forms.DateTimeField()
    secret = forms.CharField(widget=forms.PasswordInput(render_value=True))
    hidden = forms.CharField(widget=forms.HiddenInput)
    search = forms.CharField(widget=forms.TextInput(attrs={"type": "search"}))
    checked = forms.BooleanField(required=False)
    state = forms.ChoiceField(choices=[("", "—"), ("a&b", "A & B"), ("c", gettext_lazy("Tenant"))])
    grouped = forms.ChoiceField(
        choices=[("Group <1>", [("x", "X"), ("y", mark_safe("<i>Y</i>"))]), ("z", "Z")]
    )
    several = forms.MultipleChoiceField(choices=[("1", "one"), ("2", "two"), ("3", "three")])
    maybe = forms.NullBooleanField()
    user = forms.ModelChoiceField(queryset=User.objects.order_by("username"), required=False)
    # Not written by PageFormRenderer: Django's templates render these.
    area = forms.CharField(widget=forms.Textarea)
    radio = forms.ChoiceField(choices=[("r", "R"), ("s", "S")], widget=forms.RadioSelect)
    boxes = forms.MultipleChoiceField(
        choices=[("1", "one")], widget=forms.CheckboxSelectMultiple, required=False
    )


DATA = {
    "text": 'a "quoted" <value>', "markup": "&amp;", "flags": "", "number": "12",
    "decimal": "1.5", "email": "not an email", "day": "2026-11-29", "at": "2026-11-29 10:00",
    "secret": "s3<", "hidden": "h&", "search": "q", "checked": "on", "state": "a&b",
    "grouped": "y", "several": ["1", "3"], "maybe": "true", "area": "line\n<two>",
    "radio": "s", "boxes": ["1"],
}  # fmt: skip


@pytest.mark.parametrize("bound", [True, False])
def test_each_widget_is_written_as_its_template_writes_it(admin_user, bound: bool) -> None:
    def written(renderer: BaseRenderer) -> dict[str, str]:
        form = EveryWidget(
            {**DATA, "user": str(admin_user.pk)} if bound else None,
            initial={"day": datetime.date(2026, 1, 2), "checked": True},
            renderer=renderer,
        )
        return {name: str(form[name]) for name in form.fields}

    with translation.override("zh-hans"):
        ours = written(PageFormRenderer())
        djangos = written(DjangoTemplates())

    assert ours == djangos
    assert 'placeholder="&lt;&quot;&amp;&gt;"' in ours["markup"]
    assert "<i>Y</i>" in ours["grouped"]
    assert "租户" in ours["state"]  # a lazy label, translated


def test_the_portal_renders_its_forms_with_it() -> None:
    assert settings.FORM_RENDERER == "portal.core.forms.PageFormRenderer"
    assert isinstance(EveryWidget().renderer, PageFormRenderer)


class _Filters(forms.Form):
    tenant = forms.SlugField(label="Tenant <slug>", help_text="a tenant's slug & more")
    state = forms.ChoiceField(
        label=gettext_lazy("State"), choices=[("", "any"), ("pending", "pending")]
    )
    since = forms.DateTimeField(label="Since", required=False)


@pytest.mark.parametrize("data", [None, {"tenant": "no spaces allowed", "state": "nope"}])
def test_a_filter_field_is_what_its_include_writes(data: dict[str, str] | None) -> None:
    """With and without help text, errors (bound with bad values) and a lazy label, in
    Chinese, the filter writes what `core/_filter_field.html` writes of each field."""
    form = _Filters(data)
    form.is_valid()
    include = engines["django"].from_string('{% include "core/_filter_field.html" %}')
    with translation.override("zh-hans"):
        for field in form:
            assert filter_field_html(field) == include.render({"field": field})
    assert data is None or form["tenant"].errors  # the errors were written
