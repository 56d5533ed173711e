"""The one base class of the portal's Celery tasks (`Celery(task_cls=...)` in portal/celery.py).

- **Sent after commit.** `.delay()` and `.apply_async()` called inside a transaction send the
  task once it commits, and never when it rolls back, so a worker never looks for a row that is
  not there yet (pretix's `TransactionAwareTask` is the model). Outside a transaction they send
  at once. Call sites write no `transaction.on_commit` of their own.
- **Retries with backoff.** The errors a task declares in `autoretry_for` are retried with
  exponential backoff and jitter (up to `retry_backoff_max` seconds apart, `max_retries` times);
  `throws` lists the expected errors that are not logged as crashes.
- **Late acknowledgement.** A task is acknowledged when it ends, so a worker that dies mid-task
  leaves it to another; every task re-checks state before it acts, so running twice is harmless.

Kept free of models: the Celery app imports it before Django's apps are ready.
"""

from functools import partial
from typing import Any

from celery import Task
from django.db import transaction


class PortalTask(Task):  # type: ignore[type-arg]
    acks_late = True
    retry_backoff = True
    retry_backoff_max = 600
    retry_jitter = True
    max_retries = 5
    # A send that fails after the commit (the broker down) is logged, not raised, when a
    # periodic task picks the work up from the database anyway.
    send_robustly = False

    def apply_async(  # type: ignore[override]
        self, args: Any = None, kwargs: Any = None, **options: Any
    ) -> Any:
        if transaction.get_connection().in_atomic_block:
            send = partial(super().apply_async, args, kwargs, **options)
            transaction.on_commit(send, robust=self.send_robustly)
            return None
        return super().apply_async(args, kwargs, **options)


class RobustlySentTask(PortalTask):
    """For work a periodic task picks up from the database anyway: a send that fails after the
    commit (the broker down) is logged, not raised into the request that committed."""

    send_robustly = True
