"""API rate limits: per personal API token, per user, and per address for anonymous callers.

Each limit counts the caller's requests of the last period (a sliding log of their times, as
DRF's own throttles keep it) in the default cache: Redis when REDIS_URL is set, so every web
process shares one count; otherwise each process counts alone. Past a rate the API answers 429
`throttled` in the error envelope, with `Retry-After`: the seconds until the oldest request
counted leaves the period. The rates (PORTAL_API_RATE_TOKEN, _USER, _ANON) are read from
REST_FRAMEWORK at each request, not once at import as DRF's throttles do, so a changed setting
takes effect at once.

One throttle checks every limit that applies to a call (a token's and its user's, or an
address's): all are read in one cache round trip and, when the call is let through, written in
one, instead of a read and a write per limit. A call refused by one limit is counted by none.
"""

import logging
import time
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from django.core.cache import cache as default_cache
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from portal.core.http import client_address

if TYPE_CHECKING:
    # Only for annotations: DRF imports this module while rest_framework.views is loading.
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@cache
def rate_parse(rate: str) -> tuple[int, int]:
    """`600/min` → (600 requests, 60 seconds). Settings checked the shape at start."""
    count, period = rate.split("/")
    return int(count), PERIODS[period[0]]


@dataclass(frozen=True)
class Limit:
    key: str
    requests: int
    seconds: int


class ApiRateThrottle(BaseThrottle):
    """The API's rate limits, all the ones that apply to the caller at once:

    - `token`: each personal API token alone (`request.auth` is the token; None for the
      session and for an identity provider's tokens, which the user's own rate covers);
    - `user`: each signed-in user, whatever the way in: the session and all of their tokens;
    - `anon`: callers with no credentials, by address (REMOTE_ADDR, or behind trusted proxies
      the address the outermost one saw: `client_address`, as sign-in throttling counts them).

    Only the cache's own failure is let through: an unavailable Redis costs the limits, not
    every API call."""

    timer = staticmethod(time.time)

    def __init__(self) -> None:
        self.wait_seconds: float | None = None

    @staticmethod
    def limits_of(request: Request) -> list[Limit]:
        rates = api_settings.DEFAULT_THROTTLE_RATES
        if request.user.is_authenticated:
            token_id = getattr(request.auth, "pk", None)
            callers: list[tuple[str, object]] = [("user", request.user.pk)]
            if token_id is not None:
                callers.append(("token", token_id))
        else:
            callers = [("anon", client_address(request) or "unknown")]
        limits = []
        for scope, ident in callers:
            rate = rates.get(scope)
            if rate is not None:
                requests, seconds = rate_parse(str(rate))
                limits.append(Limit(f"throttle_{scope}_{ident}", requests, seconds))
        return limits

    def allow_request(self, request: Request, view: "APIView") -> bool:
        limits = self.limits_of(request)
        if not limits:
            return True
        try:
            logs = default_cache.get_many([limit.key for limit in limits])
        except RedisError:
            logger.warning("API rate limits not applied: the cache failed", exc_info=True)
            return True
        now = self.timer()
        counted: dict[str, list[float]] = {}
        waits = []
        for limit in limits:
            # Newest first; what left the period is dropped.
            log = [at for at in logs.get(limit.key, []) if at > now - limit.seconds]
            if len(log) >= limit.requests:
                waits.append(limit.seconds - (now - log[-1]) if log else limit.seconds)
            counted[limit.key] = [now, *log]
        if waits:
            self.wait_seconds = max(waits)
            return False
        try:
            # Kept for the longest period; each limit drops what left its own when read.
            default_cache.set_many(counted, timeout=max(limit.seconds for limit in limits))
        except RedisError:
            logger.warning("API rate limits not counted: the cache failed", exc_info=True)
        return True

    def wait(self) -> float | None:
        return self.wait_seconds
