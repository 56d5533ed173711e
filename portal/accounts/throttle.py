"""The password sign-in throttle, built on django-axes (settings: AXES_* and PORTAL_SIGN_IN_*).

axes counts failed password checks per username and per client address in the database and,
once either count reaches the limit, refuses every further check (the right password too)
until the lockout has passed. This module adds what the portal needs on top: the client's
address behind the reverse proxies we trust, and an audit event for every refused attempt.
"""

import ipaddress
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from django.conf import settings
from django.http import HttpRequest

from portal.accounts.services import sign_in_failure_record


def _address(text: str) -> str | None:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def client_address(request: HttpRequest) -> str | None:
    """The address sign-in attempts are counted against (axes' AXES_CLIENT_IP_CALLABLE).

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


class AuditedAxesHandler(AxesDatabaseHandler):  # type: ignore[misc]
    """axes' database handler (AXES_HANDLER), which also audits every refused sign-in."""

    def user_login_failed(
        self, sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
    ) -> None:
        super().user_login_failed(sender, credentials, request, **kwargs)
        if request is None:
            return  # axes counted nothing either: there is no one to attribute it to
        sign_in_failure_record(
            username=get_client_username(request, credentials) or "",
            address=request.axes_ip_address,
            failures=request.axes_failures_since_start or 0,
            locked_out=bool(request.axes_locked_out),
        )
