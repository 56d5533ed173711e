import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from portal.core.audit import origin_of, request_origin

_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


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
