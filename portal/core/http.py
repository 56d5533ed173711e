"""Typed request classes for views: what the middleware stack adds to a request."""

from typing import TYPE_CHECKING, cast

from django.http import HttpRequest, JsonResponse
from django_htmx.middleware import HtmxDetails
from rest_framework.request import Request

if TYPE_CHECKING:
    from portal.accounts.models import User


class PortalHttpRequest(HttpRequest):
    htmx: HtmxDetails
    request_id: str


class AuthenticatedHttpRequest(PortalHttpRequest):
    user: "User"


def api_user(request: Request) -> "User":
    """The signed-in user of an API request (every API view requires authentication)."""
    return cast("User", request.user)


def envelope_json(
    *, status: int, code: str, message: str, fields: dict[str, list[str]] | None = None
) -> JsonResponse:
    """The API's error envelope (`{"error": {"code", "message", "fields"}}`) for answers made
    outside DRF: middleware and Django's error handlers under `/api/`."""
    return JsonResponse(
        {"error": {"code": code, "message": message, "fields": fields or {}}}, status=status
    )
