from django import template
from django.forms import BoundField
from django.http import HttpRequest
from django.utils.safestring import SafeString

from portal.core.forms import filter_field_html

register = template.Library()


@register.simple_tag(takes_context=True)
def page_url(context: template.Context, number: int, param: str = "") -> str:
    """The current URL's query string with `page` (or `param`, for a page's second list) set
    to `number`: filters, sorting and the other list's page stay."""
    request: HttpRequest = context["request"]
    query = request.GET.copy()
    query[param or "page"] = str(number)
    return f"?{query.urlencode()}"


@register.filter
def filter_field(field: BoundField) -> SafeString:
    """A list's filter field: its label, widget, help text and errors
    (`portal.core.forms.filter_field_html`)."""
    return filter_field_html(field)
