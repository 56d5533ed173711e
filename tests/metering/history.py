"""Known metric history in a real Prometheus: written as OpenMetrics, turned into TSDB blocks by
`promtool tsdb create-blocks-from openmetrics`, served by a Prometheus started on those blocks.

Series are written the way kube-state-metrics and the DCGM exporter expose them, one sample per
scrape interval from a start (inclusive) to an end (exclusive).
"""

import subprocess
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import requests

from tests.harness.services import _ProcessServer

INTERVAL = 30
GPU_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "namespace", "pod", "container")


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{name}="{value}"' for name, value in sorted(labels.items()))


@dataclass
class History:
    interval: int = INTERVAL
    families: dict[str, list[tuple[str, float, float]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def series(
        self,
        metric: str,
        labels: dict[str, str],
        start: datetime,
        end: datetime,
        value: float | Callable[[float], float],
    ) -> None:
        """Samples every interval in [start, end): `value`, or `value(t)` for unix time t."""
        t = start.timestamp()
        while t < end.timestamp():
            sample = value(t) if callable(value) else value
            self.families[metric].append((_labels(labels), t, sample))
            t += self.interval

    def pod(
        self,
        *,
        namespace: str,
        pod: str,
        start: datetime,
        end: datetime,
        requests: dict[str, float],
    ) -> None:
        """kube-state-metrics for a running pod: its phase and its extended resource requests."""
        self.series(
            "kube_pod_status_phase",
            {"namespace": namespace, "pod": pod, "phase": "Running"},
            start,
            end,
            1,
        )
        for resource, amount in requests.items():
            self.series(
                "kube_pod_container_resource_requests",
                {
                    "namespace": namespace,
                    "pod": pod,
                    "container": "main",
                    "resource": resource,
                    "unit": "integer",
                    "node": "gpu-node-1",
                },
                start,
                end,
                amount,
            )

    def gpu(
        self,
        *,
        namespace: str,
        pod: str,
        uuid: str,
        start: datetime,
        end: datetime,
        util_percent: float | None = None,
        engine_active: float | None = None,
        fb_used_mib: float = 0,
        mig_instance: str = "",
        mig_profile: str = "",
        node: str = "gpu-node-1",
        model_name: str = "NVIDIA A100-SXM4-80GB",
    ) -> None:
        """The DCGM exporter's series for one pod on one GPU (or MIG instance)."""
        labels = {
            "gpu": "0",
            "UUID": uuid,
            "device": "nvidia0",
            "modelName": model_name,
            "Hostname": node,
            "namespace": namespace,
            "pod": pod,
            "container": "main" if pod else "",
        }
        if mig_instance:
            labels |= {"GPU_I_ID": mig_instance, "GPU_I_PROFILE": mig_profile}
        if util_percent is not None:
            self.series("DCGM_FI_DEV_GPU_UTIL", labels, start, end, util_percent)
        if engine_active is not None:
            self.series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, start, end, engine_active)
        self.series("DCGM_FI_DEV_FB_USED", labels, start, end, fb_used_mib)

    def openmetrics(self) -> str:
        lines = []
        for metric, samples in sorted(self.families.items()):
            lines.append(f"# TYPE {metric} gauge")
            by_series: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for labels, t, value in samples:
                by_series[labels].append((t, value))
            for labels, points in sorted(by_series.items()):
                for t, value in sorted(points):
                    lines.append(f"{metric}{{{labels}}} {value} {t:.3f}")
        lines.append("# EOF")
        return "\n".join(lines) + "\n"


class HistoryPrometheus(_ProcessServer):
    """A Prometheus serving `history` and nothing else (it scrapes nothing).

    pause() stops it keeping its data; start() serves the same data again.
    """

    name = "prometheus-history"

    def __init__(self, history: History) -> None:
        super().__init__()
        source = self.directory / "history.om"
        source.write_text(history.openmetrics())
        self.data = self.directory / "data"
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source), str(self.data)],
            check=True,
            capture_output=True,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        config = self.directory / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
        return [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data}",
            "--storage.tsdb.retention.time=3650d",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]

    def ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/-/ready", timeout=0.5).status_code == 200
        except requests.RequestException:
            return False

    def pause(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)

    def queries_answered(self) -> int:
        """How many instant queries this Prometheus has answered (its own counter)."""
        text = requests.get(f"{self.url}/metrics", timeout=5).text
        total = 0
        for line in text.splitlines():
            if line.startswith("prometheus_http_requests_total{") and (
                'handler="/api/v1/query"' in line
            ):
                total += int(float(line.rsplit(" ", 1)[1]))
        return total
