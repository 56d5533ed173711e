"""Typed request classes for views (what the middleware stack adds to a request), and what a
request says about its caller."""

import ipaddress
from typing import TYPE_CHECKING, cast

from django.conf import settings
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


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def client_address(request: HttpRequest) -> str | None:
    """The caller's address, as sign-in throttling (axes' AXES_CLIENT_IP_CALLABLE), the API's
    anonymous rate limit and the audit trail count it.

    Without trusted proxies that is REMOTE_ADDR. Behind PORTAL_TRUSTED_PROXY_COUNT proxies that
    each append the address they were reached from to X-Forwarded-For, it is the entry that
    many places from the right: the one the outermost proxy saw. Entries further left are the
    client's own to invent, so they are never used; a header with too few entries (a request
    that bypassed the proxies) counts against REMOTE_ADDR.
    """
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.PORTAL_TRUSTED_PROXY_COUNT
    if proxies:
        header = request.META.get("HTTP_X_FORWARDED_FOR", "")
        hops = [hop.strip() for hop in header.split(",") if hop.strip()]
        if len(hops) >= proxies:
            return _address(hops[-proxies]) or _address(remote)
    return _address(remote)
