"""How pages show service errors: the one place that maps ApplicationError for HTML.

Forms get the error's messages on the fields it names; anything a view does not handle is
turned into the error page with the error's status by ApplicationErrorMiddleware.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.template import loader
from django.utils.cache import patch_vary_headers
from django.utils.functional import Promise
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _

from portal.core.errors import ApplicationError, Conflict, NotFound, ValidationFailed
from portal.core.http import PortalHttpRequest


@dataclass(frozen=True)
class PageSection:
    """A part of a page (a tenant's, *Chargeback*) written in it (`inline`) or loaded after it
    from `url` under `title` (templates/core/_lazy_section.html: htmx with
    `hx-trigger="load"`; without JavaScript its link shows the page with it written in);
    `template` writes it, `assets` are what the page writes once for it (scripts). Its URL
    answers through `section_response`."""

    name: str
    template: str
    title: str | Promise | None
    inline: bool
    url: str
    assets: str | None = None


def section_response[R: HttpResponseBase](
    *, alone: bool, fragment: Callable[[], R], page: Callable[[], R]
) -> R:
    """The answer of a `PageSection`'s URL: `fragment()`, the section alone that takes its
    placeholder's place, when `alone` (htmx asks); else `page()`, the page with the section
    written in (without JavaScript, the placeholder's link). The same URL answers either, so a
    cache must tell them apart: `Vary: HX-Request`."""
    response = fragment() if alone else page()
    patch_vary_headers(response, ("HX-Request",))
    return response


def form_add_error(form: forms.Form, error: ApplicationError) -> None:
    """Put a service's error on the form: on each named field it has, the rest on the form."""
    for field, messages in error.fields.items():
        form.add_error(field if field in form.fields else None, messages)
    if not error.fields:
        form.add_error(None, error.message)


def form_page(
    request: HttpRequest,
    *,
    form: forms.Form,
    template: str,
    context: dict[str, Any],
    save: Callable[[dict[str, Any]], Any],
    success: Callable[[Any], HttpResponse],
) -> HttpResponse:
    """Show `form` in `template`; on a valid POST call `save` (one service call) and answer
    `success(saved)`. A refused post shows the form again with each error on the field it names,
    and the error's status: 400 for bad input, 409 for a conflict such as a taken name."""
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                saved = save(form.cleaned_data)
            except (ValidationFailed, Conflict) as error:
                form_add_error(form, error)
                status = error.status
            else:
                return success(saved)
    return render(request, template, {**context, "form": form}, status=status)


def form_initial(instance: Any, form_class: type[forms.Form]) -> dict[str, Any]:
    """A form's initial values from the object it edits, field by field."""
    return {name: getattr(instance, name) for name in form_class.base_fields}


def _back_url(request: HttpRequest) -> str | None:
    """The page the person came from, when it is one of ours and not this one."""
    referer = request.META.get("HTTP_REFERER", "")
    if not referer or referer == request.build_absolute_uri():
        return None
    safe = url_has_allowed_host_and_scheme(
        referer, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return referer if safe else None


def error_page(
    request: HttpRequest, *, status: int, title: Any, message: Any, **context: Any
) -> HttpResponse:
    """The portal's page for an error a person meets: the layout, the status, what went wrong
    and a way back. htmx gets only the message, put into the page's error region (#page-errors)
    instead of the element the request targets."""
    context = {
        "status": status,
        "title": title,
        "message": message,
        "back_url": _back_url(request),
        **context,
    }
    if getattr(request, "htmx", False):
        body = loader.get_template("errors/error.html#error-message").render(context, request)
        response = HttpResponse(body, status=status)
        response["HX-Retarget"] = "#page-errors"
        response["HX-Reswap"] = "innerHTML"
        return response
    body = loader.get_template("errors/error.html").render(context, request)
    return HttpResponse(body, status=status)


POLL_DONE = 286  # htmx stops polling a fragment that answers with this status


def polled_page(
    request: PortalHttpRequest,
    template: str,
    fragment: str,
    context: dict[str, Any],
    *,
    moving: bool,
) -> HttpResponse:
    """The whole page, or for htmx its `fragment` (a named partial), which answers POLL_DONE once
    nothing is `moving` so htmx stops polling it."""
    if not request.htmx:
        return render(request, template, context)
    response = render(request, f"{template}#{fragment}", context)
    if not moving:
        response.status_code = POLL_DONE
    return response


_TITLES = {
    400: _("Bad request"),
    403: _("Not allowed"),
    409: _("Conflict"),
    422: _("Refused by policy"),
    429: _("Too many requests"),
}


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
                title=_TITLES.get(exception.status, _("Error")),
                message=exception.message,
            )
        return None
