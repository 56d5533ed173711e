"""How API callers authenticate.

Kept apart from views and serializers: DRF imports this while it loads its own settings.
"""

from django.utils.translation import gettext as _
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    get_authorization_header,
)
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from portal.accounts.models import ApiToken, User
from portal.accounts.sso import sso_token_user
from portal.accounts.tokens import api_token_authenticate, is_api_token

CHALLENGE = 'Bearer realm="api"'


def _bearer_parts(request: Request) -> list[bytes] | None:
    """The Authorization header's words when its scheme is Bearer, else None."""
    parts = get_authorization_header(request).split()
    return parts if parts and parts[0].lower() == b"bearer" else None


class PortalSessionAuthentication(SessionAuthentication):
    """The browser session. Declares a challenge so anonymous callers get 401, not 403.

    A request that carries a Bearer token is judged by that token alone: the session steps
    aside even when it is valid, so a revoked token never falls back to the browser's user."""

    def authenticate(self, request: Request) -> tuple[User, None] | None:
        if _bearer_parts(request) is not None:
            return None
        return super().authenticate(request)

    def authenticate_header(self, request: Request) -> str:
        return CHALLENGE


class PortalBearerAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>`: a personal API token (`gpp_...`) or an identity
    provider's access token. Without the header it answers None and leaves the call to the
    session; with it, the token decides: a malformed, unknown, revoked or expired token is 401
    whatever session comes with it. No CSRF check: the token is sent deliberately, never by
    the browser on its own."""

    def authenticate(self, request: Request) -> tuple[User, ApiToken | None] | None:
        parts = _bearer_parts(request)
        if parts is None:
            return None  # no header, or another scheme: not ours to judge
        if len(parts) != 2:
            raise AuthenticationFailed(_("Malformed Authorization header: send `Bearer <token>`."))
        try:
            text = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed(_("Unknown or invalid token.")) from None
        if is_api_token(text):
            token = api_token_authenticate(text)
            return token.user, token
        user = sso_token_user(token=text)
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        return user, None

    def authenticate_header(self, request: Request) -> str:
        return CHALLENGE
