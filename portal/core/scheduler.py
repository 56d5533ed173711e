"""The periodic tasks of Celery beat's schedule, run by one thread of the web process.

For the embedded default (no broker, so no worker and no beat): `make demo`'s server starts it
when `PORTAL_IN_PROCESS_SCHEDULER` is on. Each entry of `CELERY_BEAT_SCHEDULE` runs at its
interval, judged by Celery's own schedule classes as beat would (the first run one interval after
start), by calling the task in this thread (`Task.apply`), as an eager call does. A failing task
is logged and runs again at its next interval; nothing a task does stops the thread or the server.
With a broker, run Celery beat instead.
"""

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from celery import Celery
from celery.schedules import BaseSchedule, maybe_schedule
from django.conf import settings
from django.db import close_old_connections

logger = logging.getLogger(__name__)

# The longest the thread sleeps between looks at the schedule (beat's default too).
MAX_SLEEP_SECONDS = 300.0


@dataclass
class _Entry:
    name: str
    task: str
    schedule: BaseSchedule
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    last_run_at: datetime


@dataclass
class InProcessScheduler:
    """Runs `schedule` (entries shaped as in `CELERY_BEAT_SCHEDULE`) in one daemon thread."""

    app: Celery
    schedule: Mapping[str, Mapping[str, Any]]
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        # Tasks are registered as their modules are imported: import every app's tasks now, as a
        # worker does at start (but without its second django.setup() and system checks).
        self.app.autodiscover_tasks(force=True)
        now = self.app.now()
        entries = [
            _Entry(
                name=name,
                task=entry["task"],
                schedule=maybe_schedule(entry["schedule"], app=self.app),  # type: ignore[arg-type]
                args=tuple(entry.get("args", ())),
                kwargs=dict(entry.get("kwargs", {})),
                last_run_at=now,
            )
            for name, entry in self.schedule.items()
        ]
        unknown = [entry.task for entry in entries if entry.task not in self.app.tasks]
        if unknown:
            logger.error("periodic tasks not registered (they will fail): %s", ", ".join(unknown))
        self._thread = threading.Thread(
            target=self._run, args=(entries,), name="in-process-scheduler", daemon=True
        )
        self._thread.start()
        logger.info("in-process scheduler started: %s", ", ".join(self.schedule))

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to stop and wait up to `timeout` for the task it runs to end."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, entries: list[_Entry]) -> None:
        while not self._stopping.is_set():
            sleep = MAX_SLEEP_SECONDS
            for entry in entries:
                if self._stopping.is_set():
                    return
                due, next_seconds = entry.schedule.is_due(entry.last_run_at)
                if due:
                    entry.last_run_at = self.app.now()
                    self._run_task(entry)
                sleep = min(sleep, next_seconds)
            self._stopping.wait(max(sleep, 0.01))

    def _run_task(self, entry: _Entry) -> None:
        close_old_connections()
        try:
            task = self.app.tasks[entry.task]
            task.apply(args=entry.args, kwargs=entry.kwargs, throw=True)
        except Exception:
            logger.exception("periodic task %s (%s) failed", entry.name, entry.task)
        finally:
            close_old_connections()


def in_process_scheduler_start(app: Celery) -> InProcessScheduler | None:
    """Start the in-process scheduler with the beat schedule if the settings turn it on."""
    if not settings.PORTAL_IN_PROCESS_SCHEDULER:
        return None
    scheduler = InProcessScheduler(app=app, schedule=settings.CELERY_BEAT_SCHEDULE)
    scheduler.start()
    return scheduler
