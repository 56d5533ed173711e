"""The portal's own Prometheus metrics beyond django-prometheus's request metrics.

Task outcomes are counted where the task runs (a worker, or the web process in the embedded
mode) but must be read from the web process's /metrics. With Redis configured they are kept in
one Redis hash that every process increments and /metrics reads at scrape time; without Redis
the tasks run in-process and the counts stay in memory.
"""

import functools
import ipaddress
import logging
import secrets
from collections import Counter
from collections.abc import Iterator
from typing import Any

import redis
from celery.signals import task_failure, task_retry, task_success
from django.conf import settings
from django.http import HttpRequest
from prometheus_client.core import REGISTRY, CounterMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

TASK_OUTCOMES_KEY = "portal:metrics:task-outcomes"
_in_process_outcomes: Counter[str] = Counter()


@functools.cache
def _client_for(url: str) -> redis.Redis:
    # One client (and connection pool) per URL for the process: counting runs after every task.
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _redis() -> redis.Redis | None:
    return _client_for(settings.REDIS_URL) if settings.REDIS_URL else None


def task_outcome_count(*, task: str, outcome: str) -> None:
    field = f"{task}\t{outcome}"
    client = _redis()
    if client is None:
        _in_process_outcomes[field] += 1
        return
    try:
        client.hincrby(TASK_OUTCOMES_KEY, field, 1)
    except redis.RedisError:
        logger.warning("could not count task outcome %s in Redis", field, exc_info=True)


def task_outcomes() -> dict[tuple[str, str], int]:
    client = _redis()
    if client is None:
        raw = dict(_in_process_outcomes)
    else:
        stored: dict[bytes, bytes] = client.hgetall(TASK_OUTCOMES_KEY)  # type: ignore[assignment]
        raw = {key.decode(): int(value) for key, value in stored.items()}
    return {tuple(field.split("\t", 1)): count for field, count in raw.items()}  # type: ignore[misc]


class TaskOutcomeCollector(Collector):
    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "portal_celery_tasks", "Celery task outcomes", labels=["task", "outcome"]
        )
        try:
            outcomes = task_outcomes()
        except redis.RedisError:
            logger.warning("could not read task outcomes from Redis", exc_info=True)
            outcomes = {}
        for (task, outcome), count in sorted(outcomes.items()):
            family.add_metric([task, outcome], count)
        yield family


def _on_success(sender: Any = None, **_: Any) -> None:
    task_outcome_count(task=getattr(sender, "name", str(sender)), outcome="success")


def _on_failure(sender: Any = None, **_: Any) -> None:
    task_outcome_count(task=getattr(sender, "name", str(sender)), outcome="failure")


def _on_retry(sender: Any = None, **_: Any) -> None:
    task_outcome_count(task=getattr(sender, "name", str(sender)), outcome="retry")


_collector = TaskOutcomeCollector()


def connect() -> None:
    """Count task outcomes and expose them; called once from CoreConfig.ready()."""
    task_success.connect(_on_success, weak=False, dispatch_uid="portal-task-success")
    task_failure.connect(_on_failure, weak=False, dispatch_uid="portal-task-failure")
    task_retry.connect(_on_retry, weak=False, dispatch_uid="portal-task-retry")
    if _collector not in REGISTRY._collector_to_names:
        REGISTRY.register(_collector)


def metrics_allowed(request: HttpRequest) -> bool:
    """From a configured network, or with `Authorization: Bearer <METRICS_TOKEN>`."""
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and secrets.compare_digest(header[7:], token):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in settings.METRICS_ALLOWED_NETWORKS)
