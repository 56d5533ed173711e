from django import template
from django.http import HttpRequest

register = template.Library()


@register.simple_tag(takes_context=True)
def page_url(context: template.Context, number: int, param: str = "") -> str:
    """The current URL's query string with `page` (or `param`, for a page's second list) set
    to `number`: filters, sorting and the other list's page stay."""
    request: HttpRequest = context["request"]
    query = request.GET.copy()
    query[param or "page"] = str(number)
    return f"?{query.urlencode()}"
