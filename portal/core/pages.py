"""How pages show service errors: the one place that maps ApplicationError for HTML.

Forms get the error's messages on the fields it names; anything a view does not handle is
turned into the error page with the error's status by ApplicationErrorMiddleware.
"""

from collections.abc import Callable
from typing import Any

from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from django.template import loader

from portal.core.errors import ApplicationError, NotFound


def form_add_error(form: forms.Form, error: ApplicationError) -> None:
    """Put a service's error on the form: on each named field it has, the rest on the form."""
    for field, messages in error.fields.items():
        form.add_error(field if field in form.fields else None, messages)
    if not error.fields:
        form.add_error(None, error.message)


def error_page(request: HttpRequest, *, status: int, title: str, message: str) -> HttpResponse:
    body = loader.get_template("errors/error.html").render(
        {"status": status, "title": title, "message": message}, request
    )
    return HttpResponse(body, status=status)


_TITLES = {400: "Bad request", 403: "Not allowed", 409: "Conflict", 422: "Refused by policy"}


class ApplicationErrorMiddleware:
    """Renders an ApplicationError a page view let through: NotFound is a plain 404."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if isinstance(exception, NotFound):
            raise Http404(exception.message)
        if isinstance(exception, ApplicationError):
            return error_page(
                request,
                status=exception.status,
                title=_TITLES.get(exception.status, "Error"),
                message=exception.message,
            )
        return None
