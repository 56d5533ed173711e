"""The portal's own Prometheus metrics beyond django-prometheus's request metrics.

Task outcomes are counted where the task runs (a worker, or the web process in the embedded
mode) but must be read from the web process's /metrics. With Redis configured they are kept in
one Redis hash that every process increments and /metrics reads at scrape time; without Redis
the tasks run in-process and the counts stay in memory.

Everything else is read at scrape time, so every web process answers the same numbers: the
readiness checks, the Celery queue's length in the broker, the latest worker heartbeat, and
what the domain apps register (`DatabaseCollector` subclasses, one bounded query or a few
each: unfinished and failed provisioning runs, metering watermarks, the directory sync's
queue). The alerting rules in deploy/prometheus/rules/alerts.yml read them.
"""

import functools
import ipaddress
import logging
import secrets
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import redis
from celery import current_app
from celery.signals import task_failure, task_retry, task_success
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from portal.core.health import readiness_problems
from portal.core.models import WorkerHeartbeat

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


class DatabaseCollector(Collector):
    """A collector that reads the database at scrape time. A database error yields nothing
    (logged), so /metrics still answers and `portal_ready{dependency="database"}` says why."""

    def describe(self) -> list[Metric]:
        # Without it, registering would collect once: a query while the apps load.
        return []

    def families(self) -> Iterator[Metric]:
        raise NotImplementedError

    def collect(self) -> Iterator[Metric]:
        try:
            # Built in full before yielding: a failure halfway must not leave half a family.
            families = list(self.families())
        except DatabaseError:
            logger.warning("could not read %s", type(self).__name__, exc_info=True)
            return
        yield from families


def unix_seconds(moment: datetime) -> float:
    """A datetime as a Prometheus timestamp metric's value."""
    return float(moment.timestamp())


# kombu's Redis transport keeps a queue's prioritised messages in lists beside the queue's own.
_PRIORITY_SEPARATOR = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)


def celery_queue_lengths() -> dict[str, int]:
    """Messages waiting in the broker per queue (Redis brokers only; empty otherwise)."""
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return {}
    queue = current_app.conf.task_default_queue
    names = [queue, *(f"{queue}{_PRIORITY_SEPARATOR}{step}" for step in _PRIORITY_STEPS)]
    pipeline = _client_for(url).pipeline(transaction=False)
    for name in names:
        pipeline.llen(name)
    return {queue: sum(pipeline.execute())}


class ServiceCollector(DatabaseCollector):
    """Readiness, the broker's queue and the workers' heartbeat, read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        ready = GaugeMetricFamily(
            "portal_ready",
            "1 when the dependency answers the readiness check (/readyz), else 0",
            labels=["dependency"],
        )
        problems = readiness_problems()
        for dependency in ("database", "redis"):
            if dependency == "redis" and not settings.REDIS_URL:
                continue
            ready.add_metric([dependency], 0 if dependency in problems else 1)
        yield ready
        try:
            lengths = celery_queue_lengths()
        except redis.RedisError:
            logger.warning("could not read the Celery queue's length", exc_info=True)
            lengths = {}
        if lengths:
            queued = GaugeMetricFamily(
                "portal_celery_queue_length", "Tasks waiting in the broker", labels=["queue"]
            )
            for queue, length in sorted(lengths.items()):
                queued.add_metric([queue], length)
            yield queued
        if "database" not in problems:
            yield from super().collect()

    def families(self) -> Iterator[Metric]:
        latest = WorkerHeartbeat.objects.order_by("-beat_at").values_list("beat_at", flat=True)
        beat_at = latest.first()
        if beat_at is not None:
            yield GaugeMetricFamily(
                "portal_worker_heartbeat_timestamp_seconds",
                "When a Celery worker last ran its heartbeat task (every minute)",
                value=unix_seconds(beat_at),
            )


def collector_register(collector: Collector) -> None:
    """Expose `collector` on /metrics, once; apps call it from their AppConfig.ready()."""
    if collector not in REGISTRY._collector_to_names:
        REGISTRY.register(collector)


_collector = TaskOutcomeCollector()
_service_collector = ServiceCollector()


def connect() -> None:
    """Count task outcomes and expose them; called once from CoreConfig.ready()."""
    task_success.connect(_on_success, weak=False, dispatch_uid="portal-task-success")
    task_failure.connect(_on_failure, weak=False, dispatch_uid="portal-task-failure")
    task_retry.connect(_on_retry, weak=False, dispatch_uid="portal-task-retry")
    collector_register(_collector)
    collector_register(_service_collector)


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
