"""The periodic task, run by a real Celery worker, closes every metered cluster's due windows."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, metering_begin
from portal.metering.models import MeteringState, UsageRecord, UsageWindow, WindowState
from portal.metering.tasks import collect_usage
from tenants.models import Tenant
from tests.conftest import wait_until
from tests.metering.history import History, HistoryPrometheus


def test_a_real_worker_collects_the_due_windows_in_order(
    celery_worker, tenant_a: Tenant, history_prometheus: Callable[[History], HistoryPrometheus]
) -> None:
    start = hour_floor(datetime.now(UTC)) - timedelta(hours=3)
    history = History(interval=60)
    history.pod(namespace="t-vision", pod="job-1", start=start, end=start + timedelta(hours=3),
                requests={"nvidia_com_gpu": 1})  # fmt: skip
    prometheus = history_prometheus(history)
    cluster = cluster_create(
        actor=None, name="east", prometheus_url=prometheus.url, metrics_interval_seconds=60
    )
    metering_begin(cluster=cluster, at=start)

    collect_usage.delay()

    state = wait_until(
        lambda: (
            not UsageWindow.objects.filter(state=WindowState.STARTED).exists()
            and MeteringState.objects.filter(
                cluster=cluster, complete_until__gte=start + timedelta(hours=2)
            ).first()
        ),
        timeout=30,
        what="the worker to collect the windows",
    )
    windows = list(UsageWindow.objects.filter(cluster=cluster).order_by("finished_at"))
    assert [window.start for window in windows][:2] == [start, start + timedelta(hours=1)]
    assert {window.state for window in windows} == {WindowState.DONE}
    assert state.last_error == ""
    hours = UsageRecord.objects.filter(cluster=cluster, workload="job-1").order_by("hour")
    assert [row.requested for row in hours][:2] == [Fraction(1), Fraction(1)]
