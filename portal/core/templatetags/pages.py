from django import template
from django.http import HttpRequest

register = template.Library()


@register.simple_tag(takes_context=True)
def page_url(context: template.Context, number: int) -> str:
    """The current URL's query string with `page` set to `number`: filters and sorting stay."""
    request: HttpRequest = context["request"]
    query = request.GET.copy()
    query["page"] = str(number)
    return f"?{query.urlencode()}"
