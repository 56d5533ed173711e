from django.db import models


class WorkerHeartbeat(models.Model):
    """When a Celery worker last ran the periodic heartbeat: shows that beat and workers live."""

    worker = models.CharField(max_length=200, unique=True)
    beat_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.worker} at {self.beat_at:%Y-%m-%d %H:%M:%S}"
