"""The default cache in Redis, with one Redis client per connection pool.

Django's RedisCache makes a new `redis.Redis` for every operation, which builds its table of
some 170 response callbacks each time (about a tenth of a millisecond, on every API call's
rate-limit check). A Redis client holds nothing but its pool and is safe to share between
threads, so one per pool serves every call; the pools are Django's own (redis-py starts a
pool afresh in a forked worker).
"""

from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class _OneClientPerPool(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    # What it reads of Django's client (the pools, their index, the client class) is private to
    # it: the stubs leave it out.
    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)  # type: ignore[attr-defined]
        client = self._clients.get(index)
        if client is None:
            pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
            client = self._clients[index] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class PortalRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _OneClientPerPool
