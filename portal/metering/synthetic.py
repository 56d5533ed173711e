"""The demo's synthetic metrics source (placeholder until the demo source lands)."""

from collections.abc import Iterable
from datetime import datetime

from portal.cluster.models import Cluster
from portal.metering.sources import WindowMetrics


class SyntheticSource:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        return WindowMetrics()
