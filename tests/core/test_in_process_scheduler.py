"""The in-process scheduler: beat's schedule run by a thread of the web process (the demo's)."""

import logging
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import pytest

from portal import celery_app
from portal.core.models import WorkerHeartbeat
from portal.core.scheduler import InProcessScheduler, in_process_scheduler_start
from tests.conftest import wait_until

HEARTBEAT = "portal.core.tasks.worker_heartbeat"


@pytest.fixture
def run_schedule(transactional_db: None) -> Iterator[Any]:
    """Start a scheduler on the given schedule; it is stopped when the test ends."""
    started: list[InProcessScheduler] = []

    def start(schedule: Mapping[str, Mapping[str, Any]]) -> InProcessScheduler:
        scheduler = InProcessScheduler(app=celery_app, schedule=schedule)
        scheduler.start()
        started.append(scheduler)
        return scheduler

    yield start
    for scheduler in started:
        scheduler.stop()


def beats() -> list[datetime]:
    return list(WorkerHeartbeat.objects.values_list("beat_at", flat=True))


def test_each_entry_runs_again_at_its_interval(run_schedule) -> None:
    run_schedule({"worker-heartbeat": {"task": HEARTBEAT, "schedule": 0.3}})

    first = wait_until(beats, timeout=10, what="the first heartbeat")[0]
    wait_until(lambda: beats()[0] > first, timeout=10, what="the next heartbeat")


def test_a_failing_task_is_logged_and_the_schedule_goes_on(
    run_schedule, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="portal.core.scheduler")

    run_schedule({
        "unknown": {"task": "portal.core.tasks.no_such_task", "schedule": 0.2},
        "wrong-arguments": {"task": HEARTBEAT, "schedule": 0.2, "args": ["surplus"]},
        "worker-heartbeat": {"task": HEARTBEAT, "schedule": 0.2},
    })  # fmt: skip

    first = wait_until(beats, timeout=10, what="a heartbeat despite the failures")[0]
    wait_until(lambda: beats()[0] > first, timeout=10, what="the schedule to go on")
    failed = {record.args[0] for record in caplog.records if record.args}  # type: ignore[index]
    assert {"unknown", "wrong-arguments"} <= failed


def test_it_stops_when_asked(run_schedule) -> None:
    scheduler = run_schedule({"worker-heartbeat": {"task": HEARTBEAT, "schedule": 0.2}})
    wait_until(beats, timeout=10, what="a heartbeat")

    assert scheduler.running
    scheduler.stop()
    stopped_at = beats()

    assert not scheduler.running
    time.sleep(0.5)  # more than one interval
    assert beats() == stopped_at


def test_it_is_off_unless_configured(settings) -> None:
    assert settings.PORTAL_IN_PROCESS_SCHEDULER is False
    assert in_process_scheduler_start(celery_app) is None
