"""Refuses input no view should see, before any view or query does: control characters in query
parameters, path parameters and form fields, numbers beyond 64 bits in query parameters, and
path ids beyond a bigint column.

A NUL byte in a filter reached PostgreSQL (which refuses it: a 500), and an id of 30 digits
overflowed the column; this answers 400 naming the parameter (404 for a path id no row can
have). Under `/api/` the answer is the error envelope, on pages the HTML error page. Bodies of
JSON writes are the serializers' (portal.core.serializers.StrictFieldsMixin).
"""

from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.utils.translation import gettext as _

from portal.core.http import envelope_json
from portal.core.pages import error_page
from portal.core.validators import (
    BIGINT_MAX,
    control_characters_problem,
    integer_text_problem,
    name_shown,
)

_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _is_api(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def _refuse(request: HttpRequest, fields: dict[str, list[str]]) -> HttpResponse:
    message = _("Invalid input: %(names)s.") % {"names": ", ".join(sorted(fields))}
    if _is_api(request):
        return envelope_json(status=400, code="invalid", message=message, fields=fields)
    details = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in fields.items())
    return error_page(request, status=400, title=_("Bad request"), message=details)


def _query_problems(request: HttpRequest) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    for name, values in request.GET.lists():
        for value in (name, *values):
            problem = control_characters_problem(value) or integer_text_problem(value)
            if problem:
                problems[name_shown(name)] = [problem]
                break
    return problems


def _form_problems(request: HttpRequest) -> dict[str, list[str]]:
    # Form fields may be several lines (a comment); one-line fields refuse tab and line
    # breaks in their forms (portal.core.forms.BoundedForm), after this.
    if request.method != "POST" or request.content_type not in _FORM_TYPES:
        return {}
    problems: dict[str, list[str]] = {}
    for name, values in request.POST.lists():
        problem = control_characters_problem([name, *values], multiline=True)
        if problem:
            problems[name_shown(name)] = [problem]
    return problems


class InputGuardMiddleware:
    """400 for control characters in query parameters, path parameters and form fields, and for
    numbers beyond 64 bits in query parameters; 404 for path ids beyond a bigint column."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problems = _query_problems(request) or _form_problems(request)
        if problems:
            return _refuse(request, problems)
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        problems: dict[str, list[str]] = {}
        for name, value in view_kwargs.items():
            if isinstance(value, int) and not isinstance(value, bool) and value > BIGINT_MAX:
                # No row has such an id: the same answer as any id that is not there.
                if _is_api(request):
                    return envelope_json(status=404, code="not_found", message=_("Not found."))
                raise Http404
            if isinstance(value, str):
                problem = control_characters_problem(value)
                if problem:
                    problems[name] = [problem]
        return _refuse(request, problems) if problems else None
