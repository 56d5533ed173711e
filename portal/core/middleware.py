import re
import uuid
from collections.abc import Callable

from django.conf import settings
from django.contrib.messages.middleware import MessageMiddleware as DjangoMessageMiddleware
from django.contrib.messages.storage import default_storage
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.middleware.locale import LocaleMiddleware as DjangoLocaleMiddleware
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.utils.functional import SimpleLazyObject, empty

from portal.core.audit import origin_of, request_origin
from portal.core.http import envelope_json
from portal.core.parsers import RequestTooLarge, too_large_message

_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
API_PREFIX = "/api/"


def is_api_request(request: HttpRequest) -> bool:
    """Under `/api/`: errors answer the JSON envelope there, HTML pages everywhere else."""
    return request.path_info.startswith(API_PREFIX) or request.path_info == API_PREFIX[:-1]


class RequestIdMiddleware:
    """Gives every request an id (the caller's X-Request-ID when it is sane), echoed in the
    response, and records the request's origin for the audit events its services write."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        incoming = request.headers.get("X-Request-ID", "")
        request_id = incoming if _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id  # type: ignore[attr-defined]
        with request_origin(origin_of(request, request_id)):
            response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response


class ApiBodyLimitMiddleware:
    """Refuses an API request whose Content-Length is over PORTAL_API_MAX_BODY_BYTES with 413
    `too_large` in the error envelope, before sessions, CSRF or a parser read a byte of it.
    A body sent without a length is bounded by the parser (portal/core/parsers.py)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_request(request):
            limit: int = settings.PORTAL_API_MAX_BODY_BYTES
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0  # Django reads an unreadable length as no body at all
            if length > limit:
                return envelope_json(
                    status=RequestTooLarge.status_code,
                    code=RequestTooLarge.default_code,
                    message=too_large_message(limit),
                )
        return self.get_response(request)


class LocaleMiddleware(DjangoLocaleMiddleware):
    """Django's, for a site whose URLs carry no language (no `i18n_patterns`): the language of
    the language cookie or Accept-Language, as Django's chooses it, without its two looks for
    a language in the path and for the URL patterns that would hold one on every request (a
    tenth of `/healthz`'s time in-process)."""

    def process_request(self, request: HttpRequest) -> None:
        translation.activate(translation.get_language_from_request(request))
        request.LANGUAGE_CODE = translation.get_language()

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        patch_vary_headers(response, ("Accept-Language",))
        response.headers.setdefault("Content-Language", translation.get_language())
        return response


class MessageMiddleware(DjangoMessageMiddleware):
    """Django's, with a request's message storage made when something first adds or reads a
    message, not for every request: `/healthz`, `/metrics` and the API never do, and making
    it (a cookie storage and a session storage behind it) was a twentieth of `/healthz`'s
    time in-process. One never made has nothing to store."""

    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        messages = getattr(request, "_messages", None)
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:
            return response
        return super().process_response(request, response)
