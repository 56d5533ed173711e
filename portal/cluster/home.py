"""The cluster app's panels on the admin's home (portal.core.home): capacity per GPU model, and
provisioning runs that failed or repaired drift lately."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.accounts.models import User
from portal.cluster.models import RunKind, RunState
from portal.cluster.selectors import capacity_rows, provisioning_runs_for
from portal.core.home import HOME_ROWS, home_register

# How far back "lately" looks for failed runs and drift repairs.
RECENT_DAYS = 7


@dataclass
class ModelCapacity:
    """One GPU model over every enabled cluster and pool, in GPU-eq, as the last read saw it."""

    gpu_model: str
    total: Fraction
    free: Fraction
    pools: int

    @property
    def allocated(self) -> Fraction:
        return self.total - self.free

    @property
    def percent_allocated(self) -> int:
        return round(self.allocated * 100 / self.total) if self.total else 0


def capacity_context(user: User) -> dict[str, Any]:
    """Total and free GPU-eq per model. The capacity rows give one row per offering a pool
    offers, each the pool's whole capacity in that offering's units: a pool counts once, with
    the most any of its offerings can still get. One query."""
    pools: dict[tuple[str, str], tuple[str, Fraction, Fraction]] = {}
    for row in capacity_rows():
        key = (row.cluster, row.pool)
        _, total, free = pools.get(key, (row.gpu_model, Fraction(0), Fraction(0)))
        pools[key] = (row.gpu_model, max(total, row.total_gpu_eq), max(free, row.free_gpu_eq))
    models: dict[str, ModelCapacity] = defaultdict(
        lambda: ModelCapacity("", Fraction(0), Fraction(0), 0)
    )
    for gpu_model, total, free in pools.values():
        line = models[gpu_model]
        line.gpu_model = gpu_model
        line.total += total
        line.free += free
        line.pools += 1
    return {"capacity": [models[name] for name in sorted(models)]}


def runs_context(user: User) -> dict[str, Any]:
    """The latest failed runs and drift repairs of the last RECENT_DAYS days, with how many
    there were. Four queries."""
    since = timezone.now() - timedelta(days=RECENT_DAYS)
    recent = provisioning_runs_for(user).filter(created_at__gte=since)
    failed = recent.filter(state=RunState.FAILED)
    drift = recent.filter(kind=RunKind.REPAIR)
    return {
        "failed_runs": list(failed.order_by("-created_at", "-id")[:HOME_ROWS]),
        "failed_count": failed.count(),
        "drift_runs": list(drift.order_by("-created_at", "-id")[:HOME_ROWS]),
        "drift_count": drift.count(),
        "recent_days": RECENT_DAYS,
    }


def cluster_home_register() -> None:
    home_register(
        "capacity",
        {"admin"},
        position=20,
        title=_("Capacity per GPU model"),
        template="cluster/_home_capacity.html",
        context=capacity_context,
    )
    home_register(
        "runs",
        {"admin"},
        position=15,
        title=_("Provisioning"),
        template="cluster/_home_runs.html",
        context=runs_context,
    )
