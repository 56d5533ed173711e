import socket
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.core.models import WorkerHeartbeat
from portal.core.services import worker_heartbeat_record
from portal.core.tasks import worker_heartbeat
from tests.conftest import wait_until
from tests.harness.services import free_port
from tests.scrape import scraped


def test_metrics_are_served_to_the_configured_networks(client: Client, db) -> None:
    client.get("/healthz")

    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")

    assert response.status_code == 200
    assert "django_http_requests_total_by_method_total" in response.text
    assert "django_http_requests_latency_seconds_by_view_method" in response.text


def test_metrics_are_hidden_from_other_networks(client: Client, db) -> None:
    response = client.get("/metrics", REMOTE_ADDR="10.20.30.40")

    assert response.status_code == 404


@pytest.mark.parametrize(("header", "status"), [("Bearer scrape-me", 200), ("Bearer wrong", 404)])
def test_metrics_token_opens_them_from_anywhere(
    client: Client, db, settings, header, status
) -> None:
    settings.METRICS_TOKEN = "scrape-me"

    response = client.get("/metrics", REMOTE_ADDR="10.20.30.40", HTTP_AUTHORIZATION=header)

    assert response.status_code == status


def test_a_real_worker_runs_tasks_from_redis_and_their_outcome_is_a_metric(
    celery_worker, client: Client, redis_client
) -> None:
    worker_heartbeat.delay()

    heartbeat = wait_until(WorkerHeartbeat.objects.first, what="the worker to record its heartbeat")
    assert heartbeat.worker == socket.gethostname()  # the worker's, not "in-process"
    counted = (
        'portal_celery_tasks_total{outcome="success",task="portal.core.tasks.worker_heartbeat"}'
    )
    line = wait_until(
        lambda: next(
            (row for row in client.get("/metrics").text.splitlines() if row.startswith(counted)),
            None,
        ),
        what="the task outcome to be counted",
    )
    assert line == f"{counted} 1.0"


def test_readiness_of_each_dependency_is_a_metric(client: Client, db, settings) -> None:
    assert scraped(client, "portal_ready") == {
        (("dependency", "database"),): 1.0,
        (("dependency", "redis"),): 1.0,
    }

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"

    assert scraped(client, "portal_ready") == {
        (("dependency", "database"),): 1.0,
        (("dependency", "redis"),): 0.0,
    }


def test_tasks_waiting_in_the_broker_are_the_queue_length(
    client: Client, db, redis_client, django_capture_on_commit_callbacks
) -> None:
    assert scraped(client, "portal_celery_queue_length") == {(("queue", "celery"),): 0.0}

    with django_capture_on_commit_callbacks(execute=True):
        worker_heartbeat.delay()  # no worker: they wait in Redis
        worker_heartbeat.delay()

    assert scraped(client, "portal_celery_queue_length") == {(("queue", "celery"),): 2.0}


def test_the_latest_worker_heartbeat_is_a_timestamp(client: Client, db) -> None:
    assert scraped(client, "portal_worker_heartbeat_timestamp_seconds") == {}
    worker_heartbeat_record(worker="old")
    WorkerHeartbeat.objects.filter(worker="old").update(beat_at=timezone.now() - timedelta(hours=1))
    latest = worker_heartbeat_record(worker="new")

    assert scraped(client, "portal_worker_heartbeat_timestamp_seconds") == {
        (): latest.beat_at.timestamp()
    }
