from celery import Task, shared_task

from portal.core.services import worker_heartbeat_record


@shared_task(bind=True, max_retries=3, default_retry_delay=5)
def worker_heartbeat(self: Task) -> None:  # type: ignore[type-arg]
    worker_heartbeat_record(worker=self.request.hostname or "in-process")
