"""Typed request classes for views: what the middleware stack adds to a request."""

from typing import TYPE_CHECKING

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

if TYPE_CHECKING:
    from portal.accounts.models import User


class PortalHttpRequest(HttpRequest):
    htmx: HtmxDetails
    request_id: str


class AuthenticatedHttpRequest(PortalHttpRequest):
    user: "User"
