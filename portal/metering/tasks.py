"""Celery tasks for metering: the periodic collection of usage windows."""

from celery import shared_task

from portal.metering.services import usage_collect


@shared_task(ignore_result=True)
def collect_usage() -> dict[str, str]:
    """Every PORTAL_METERING_SECONDS: close each cluster's due hourly windows, in order.

    A window Prometheus could not answer is marked failed and is the first one tried next time.
    """
    return {
        name: (
            f"{len(result.collected)} windows"
            + (f"; {result.failed.isoformat()} failed: {result.error}" if result.failed else "")
        )
        for name, result in usage_collect().items()
    }


@shared_task(ignore_result=True)
def collect_cluster_usage(cluster_id: int) -> int:
    """Collect one cluster's due windows now (an admin asked)."""
    return sum(len(result.collected) for result in usage_collect(cluster_id=cluster_id).values())
