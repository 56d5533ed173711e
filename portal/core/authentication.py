"""How API callers authenticate.

Kept apart from views and serializers: DRF imports this while it loads its own settings.
"""

from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request


class PortalSessionAuthentication(SessionAuthentication):
    """The browser session. Declares a challenge so anonymous callers get 401, not 403."""

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
