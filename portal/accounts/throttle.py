"""The password sign-in throttle, built on django-axes (settings: AXES_* and PORTAL_SIGN_IN_*).

axes counts failed password checks per username and per client address in the database and,
once either count reaches the limit, refuses every further check (the right password too)
until the lockout has passed. This module adds what the portal needs on top: an audit event
for every refused attempt (the client address is portal.core.http.client_address).
"""

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username

from portal.accounts.services import sign_in_failure_record


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
