"""API rate limits: per personal API token, per user, and per address for anonymous callers.

Each limit counts the caller's requests of the last period (a sliding log of their times, as
DRF's own throttles keep it) in the default cache: Redis when REDIS_URL is set, so every web
process shares one count; otherwise each process counts alone. Past a rate the API answers 429
`throttled` in the error envelope, with `Retry-After`: the seconds until the oldest request
counted leaves the period. The rates (PORTAL_API_RATE_TOKEN, _USER, _ANON) are read from
REST_FRAMEWORK at each request, not once at import as DRF's throttles do, so a changed setting
takes effect at once.

One throttle checks every limit that applies to a call (a token's and its user's, or an
address's). A call refused by one limit is counted by none.

In Redis the whole check is one script (`LIMITS_SCRIPT`), run in one round trip and atomically:
each limit's log is a sorted set of the calls' times; the script drops what left each period,
and either answers the wait or adds the call to every log. Concurrent calls of one caller in
other processes cannot overwrite each other's counts, and nothing is unpickled or pickled. In
another cache (a single process's, as the demo's) the logs are lists read and written with
`get_many` and `set_many`.
"""

import hashlib
import itertools
import logging
import os
import time
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import NoScriptError, RedisError
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

from portal.core.http import client_address

if TYPE_CHECKING:
    # Only for annotations: DRF imports this module while rest_framework.views is loading.
    from rest_framework.views import APIView

logger = logging.getLogger(__name__)

PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

# KEYS: one sorted set per limit. ARGV: now, the call's member (unique), then each limit's
# requests and seconds. Answers 0 when the call is let through (and counted in every log), else
# the seconds until the oldest call of the fullest log leaves its period.
LIMITS_SCRIPT = """
local now = tonumber(ARGV[1])
local wait = 0
for i, key in ipairs(KEYS) do
  local requests = tonumber(ARGV[1 + 2 * i])
  local seconds = tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - seconds)
  if redis.call('ZCARD', key) >= requests then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local left = seconds
    if oldest[2] then left = seconds - (now - tonumber(oldest[2])) end
    if left > wait then wait = left end
  end
end
if wait > 0 then return tostring(wait) end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[2])
  redis.call('EXPIRE', key, tonumber(ARGV[2 + 2 * i]))
end
return '0'
"""
# What makes each call's member in the logs unique: the process and a counter.
_calls = itertools.count()


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
        now = self.timer()
        backend = caches["default"]
        try:
            if isinstance(backend, RedisCache):
                wait = _redis_wait(backend, limits, now)
            else:
                wait = _cache_wait(backend, limits, now)
        except RedisError:
            logger.warning("API rate limits not applied: the cache failed", exc_info=True)
            return True
        if wait is not None:
            self.wait_seconds = wait
            return False
        return True

    def wait(self) -> float | None:
        return self.wait_seconds


_SCRIPT_DIGEST = hashlib.sha1(LIMITS_SCRIPT.encode(), usedforsecurity=False).hexdigest()


def _redis_wait(backend: RedisCache, limits: list[Limit], now: float) -> float | None:
    """The wait when a limit refuses the call, else None with the call counted: one round
    trip, in Redis, by LIMITS_SCRIPT (sent whole only when Redis does not hold it yet)."""
    client = backend._cache.get_client(write=True)
    # Sorted sets under names of their own (a list's pickle would not be one).
    keys = [backend.make_key(f"{limit.key}_log") for limit in limits]
    args: list[Any] = [repr(now), f"{now!r}:{os.getpid()}:{next(_calls)}"]
    for limit in limits:
        args += [limit.requests, limit.seconds]
    try:
        answer = client.evalsha(_SCRIPT_DIGEST, len(keys), *keys, *args)
    except NoScriptError:
        answer = client.eval(LIMITS_SCRIPT, len(keys), *keys, *args)
    wait = float(answer)
    return wait if wait > 0 else None


def _cache_wait(backend: BaseCache, limits: list[Limit], now: float) -> float | None:
    """As `_redis_wait`, in any other cache: the logs read in one call and written in one."""
    logs = backend.get_many([limit.key for limit in limits])
    counted: dict[str, list[float]] = {}
    waits = []
    for limit in limits:
        # Newest first; what left the period is dropped.
        log = [at for at in logs.get(limit.key, []) if at > now - limit.seconds]
        if len(log) >= limit.requests:
            waits.append(limit.seconds - (now - log[-1]) if log else limit.seconds)
        counted[limit.key] = [now, *log]
    if waits:
        return max(waits)
    # Kept for the longest period; each limit drops what left its own when read.
    backend.set_many(counted, timeout=max(limit.seconds for limit in limits))
    return None
