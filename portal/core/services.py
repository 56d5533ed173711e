from django.utils import timezone

from portal.core.models import WorkerHeartbeat


def worker_heartbeat_record(*, worker: str) -> WorkerHeartbeat:
    """Record that `worker` ran its periodic heartbeat now. Idempotent per worker."""
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        worker=worker, defaults={"beat_at": timezone.now()}
    )
    return heartbeat
