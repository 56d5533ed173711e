"""Notebook activity from Prometheus, for idle culling (workloads.culling decides).

A notebook's GPU utilisation (DCGM exporter, `DCGM_FI_DEV_GPU_UTIL` of its pod) and its Jupyter
server's last activity (`jupyter_server_last_activity_timestamp_seconds`, scraped from the
notebook's /metrics): two queries per period, whatever the number of notebooks.
"""

from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings

from portal.metering.prometheus import PrometheusError, Sample, prometheus_gateway
from portal.workloads.culling import Activity, ActivityUnavailable
from portal.workloads.models import Notebook

POD_PATTERN = "nb-[0-9]+-0"
KERNEL_QUERY = (
    "max by (namespace, pod) "
    f'(jupyter_server_last_activity_timestamp_seconds{{pod=~"{POD_PATTERN}"}})'
)


def gpu_query(window_seconds: int) -> str:
    """Each notebook pod's highest GPU utilisation over the last `window_seconds`."""
    return (
        "max by (namespace, pod) (max_over_time("
        f'DCGM_FI_DEV_GPU_UTIL{{pod=~"{POD_PATTERN}"}}[{window_seconds}s]))'
    )


def _by_pod(samples: list[Sample], *, at_time: bool = False) -> dict[tuple[str, str], object]:
    found: dict[tuple[str, str], object] = {}
    for sample in samples:
        if not sample.value.is_finite():
            continue  # NaN or Inf: no evidence either way
        key = (sample.labels.get("namespace", ""), sample.labels.get("pod", ""))
        found[key] = (
            datetime.fromtimestamp(float(sample.value), tz=UTC) if at_time else sample.value
        )
    return found


def notebook_activity(notebooks: list[Notebook]) -> dict[int, Activity]:
    """Each notebook's GPU and kernel activity: two queries. Raises ActivityUnavailable."""
    gateway = prometheus_gateway()
    window = settings.PORTAL_CULL_SECONDS + 60
    try:
        gpu = _by_pod(gateway.query(gpu_query(window)))
        kernel = _by_pod(gateway.query(KERNEL_QUERY), at_time=True)
    except PrometheusError as error:
        raise ActivityUnavailable(str(error)) from error
    activity = {}
    for notebook in notebooks:
        key = (
            notebook.cluster.namespace_for(notebook.tenant.slug),
            f"{notebook.kubernetes_name}-0",
        )
        util = gpu.get(key)
        last = kernel.get(key)
        activity[notebook.pk] = Activity(
            gpu_util_max=util if isinstance(util, Decimal) else None,
            last_kernel_activity=last if isinstance(last, datetime) else None,
        )
    return activity
