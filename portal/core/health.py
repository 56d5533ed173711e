"""Readiness checks: can this process reach what it needs to serve requests?

Each check answers None when healthy, otherwise a short reason. Checks are cheap (one round
trip each) and bounded by short timeouts so a probe never hangs.
"""

import redis
from django.conf import settings
from django.db import DatabaseError, connection

REDIS_TIMEOUT_SECONDS = 2.0


def database_problem() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        # Drop the broken connection so the next request opens a fresh one.
        connection.close_if_unusable_or_obsolete()
        connection.close()
        return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
    return None


def redis_problem() -> str | None:
    url = settings.REDIS_URL
    if not url:
        return None
    client = redis.Redis.from_url(
        url,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
    )
    try:
        client.ping()
    except redis.RedisError as error:
        return f"{type(error).__name__}: {error}"
    finally:
        client.close()
    return None


def readiness_problems() -> dict[str, str]:
    """The failing dependencies by name ("database", "redis"), with their reasons."""
    checks = {"database": database_problem, "redis": redis_problem}
    problems = {}
    for name, check in checks.items():
        problem = check()
        if problem is not None:
            problems[name] = problem
    return problems
