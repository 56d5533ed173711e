"""API rate limits: per personal API token, per user, and per address for anonymous callers.

DRF counts each caller's recent requests in the default cache (Redis when REDIS_URL is set, so
every web process shares one count; otherwise each process counts alone). Past a rate the API
answers 429 `throttled` in the error envelope, with `Retry-After`. The rates
(PORTAL_API_RATE_TOKEN, _USER, _ANON) are read from REST_FRAMEWORK at each request, not once
at import as DRF's own throttles do, so a changed setting takes effect at once.
"""

import logging
from typing import TYPE_CHECKING

from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from portal.core.http import client_address

if TYPE_CHECKING:
    # Only for annotations: DRF imports this module while rest_framework.views is loading.
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)


class PortalRateThrottle(SimpleRateThrottle):
    """A rate from REST_FRAMEWORK's DEFAULT_THROTTLE_RATES for `scope`, read when the request
    comes. Only the cache's own failure is let through: an unavailable Redis costs the limit,
    not every API call."""

    def __init__(self) -> None:
        # DRF's __init__ would fix the rate from THROTTLE_RATES, captured when DRF was imported.
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)

    def get_rate(self) -> str | None:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope or "")
        return None if rate is None else str(rate)

    def allow_request(self, request: Request, view: "APIView") -> bool:
        try:
            return super().allow_request(request, view)
        except RedisError:
            logger.warning(
                "API rate limit %s not applied: the cache failed", self.scope, exc_info=True
            )
            return True

    def key_for(self, ident: object) -> str:
        return self.cache_format % {"scope": self.scope, "ident": ident}


class ApiTokenRateThrottle(PortalRateThrottle):
    """Each personal API token alone: `request.auth` is the token (None for the session and
    for an identity provider's tokens, which the user's own rate covers)."""

    scope = "token"

    def get_cache_key(self, request: Request, view: "APIView") -> str | None:
        token_id = getattr(request.auth, "pk", None)
        return None if token_id is None else self.key_for(token_id)


class ApiUserRateThrottle(PortalRateThrottle):
    """Each signed-in user, whatever the way in: the session and all of their tokens together."""

    scope = "user"

    def get_cache_key(self, request: Request, view: "APIView") -> str | None:
        if not request.user.is_authenticated:
            return None
        return self.key_for(request.user.pk)


class ApiAnonRateThrottle(PortalRateThrottle):
    """Callers with no credentials, by address (REMOTE_ADDR, or behind trusted proxies the
    address the outermost one saw: `client_address`, as sign-in throttling counts them)."""

    scope = "anon"

    def get_cache_key(self, request: Request, view: "APIView") -> str | None:
        if request.user.is_authenticated:
            return None
        return self.key_for(client_address(request) or "unknown")
