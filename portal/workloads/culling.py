"""Stopping idle notebooks: the decision as a pure function, and the periodic service.

A notebook is idle when its GPU utilisation (DCGM exporter, `DCGM_FI_DEV_GPU_UTIL` of its
pod) stays below PORTAL_CULL_GPU_UTIL_PERCENT and its Jupyter server saw no activity
(`jupyter_server_last_activity_timestamp_seconds`, scraped from the notebook's /metrics).
Idle for its tenant's `notebook_idle_minutes` less PORTAL_CULL_NOTICE_MINUTES, the owner is
told; still idle at the end of the notice, it is stopped. Snoozing restarts the count after
the snooze ends. Culling stops, never deletes: the workspace stays.

Two Prometheus queries per period, whatever the number of notebooks. A notebook Prometheus
knows nothing about (neither metric) is left alone: no evidence, no stop.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import Enum

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.core.registry import Slot
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.services.cull import notebook_cull, notebook_cull_notice

logger = logging.getLogger(__name__)


class Verdict(Enum):
    NO_DATA = "no data"
    BUSY = "busy"
    IDLE = "idle"
    NOTICE = "notice"
    STOP = "stop"


@dataclass(frozen=True)
class Activity:
    """What Prometheus says about one notebook pod: None where it has no series."""

    gpu_util_max: Decimal | None
    last_kernel_activity: datetime | None


@dataclass(frozen=True)
class CullDecision:
    verdict: Verdict
    idle_since: datetime | None
    cull_at: datetime | None = None


def cull_decision(  # noqa: PLR0911 - one verdict per branch reads best
    *,
    now: datetime,
    notebook: Notebook,
    activity: Activity,
    idle_minutes: int,
    notice_minutes: int,
    threshold_percent: int,
) -> CullDecision:
    """Whether to leave, warn about or stop one running notebook, and since when it is idle."""
    if activity.gpu_util_max is None:
        # Without the GPU's own numbers (no DCGM series for this pod, as with some shared
        # GPUs), a quiet kernel proves nothing: a job may run from a terminal.
        return CullDecision(Verdict.NO_DATA, notebook.idle_since, notebook.cull_at)
    gpu_busy = activity.gpu_util_max is not None and activity.gpu_util_max >= Decimal(
        threshold_percent
    )
    if gpu_busy:
        # Busy within the last period: whatever comes next is idle from now at the earliest,
        # not from when the notebook started.
        return CullDecision(Verdict.BUSY, now)
    starts = [notebook.idle_since or notebook.running_since or now]
    starts += [
        moment for moment in (activity.last_kernel_activity, notebook.snoozed_until) if moment
    ]
    idle_since = max(starts)
    if notebook.cull_notice_at and idle_since > notebook.cull_notice_at:
        return CullDecision(Verdict.BUSY, idle_since)  # active again since the notice
    idle_for = now - idle_since
    limit = timedelta(minutes=idle_minutes)
    notice = timedelta(minutes=notice_minutes)
    if notebook.cull_notice_at is not None and notebook.cull_at is not None:
        if now >= notebook.cull_at:
            return CullDecision(Verdict.STOP, idle_since, notebook.cull_at)
        return CullDecision(Verdict.IDLE, idle_since, notebook.cull_at)
    if idle_for >= max(limit - notice, timedelta(0)):
        return CullDecision(Verdict.NOTICE, idle_since, max(idle_since + limit, now + notice))
    return CullDecision(Verdict.IDLE, idle_since)


class ActivityUnavailable(Exception):
    """The metrics could not be read: nothing is decided this period."""


# How each notebook's activity is read: the metering app fills this slot with its Prometheus
# reader (two queries per period). Raises ActivityUnavailable.
activity_source: Slot[Callable[[list[Notebook]], dict[int, Activity]]] = Slot(
    "notebook activity source", filled_by="the metering app"
)


def notebooks_cull(*, now: datetime | None = None) -> dict[str, int]:
    """One culling period over every running notebook whose tenant culls. Returns counts per
    verdict. Metrics unreadable: nothing is decided (ActivityUnavailable is raised)."""
    moment = now or timezone.now()
    candidates = list(
        Notebook.objects.filter(
            state=NotebookState.RUNNING,
            desired=Desired.RUNNING,
            tenant__notebook_idle_minutes__gt=0,
        ).select_related("tenant", "cluster")
    )
    counts = {verdict.value: 0 for verdict in Verdict}
    if not candidates:
        return counts
    activity = activity_source.get()(candidates)
    for notebook in candidates:
        decision = cull_decision(
            now=moment,
            notebook=notebook,
            activity=activity[notebook.pk],
            idle_minutes=notebook.tenant.notebook_idle_minutes,
            notice_minutes=settings.PORTAL_CULL_NOTICE_MINUTES,
            threshold_percent=settings.PORTAL_CULL_GPU_UTIL_PERCENT,
        )
        counts[decision.verdict.value] += 1
        if decision.verdict == Verdict.STOP:
            idle = int((moment - (decision.idle_since or moment)).total_seconds() // 60)
            notebook_cull(
                notebook=notebook,
                noticed_at=notebook.cull_notice_at,
                reason=f"Stopped after {idle} minutes idle (workspace kept).",
            )
        elif decision.verdict == Verdict.NOTICE:
            notebook_cull_notice(
                notebook=notebook,
                idle_since=decision.idle_since,
                cull_at=decision.cull_at,
                now=moment,
            )
        elif decision.verdict != Verdict.NO_DATA:
            _remember(notebook, decision)
    return counts


def _remember(notebook: Notebook, decision: CullDecision) -> None:
    """Keep the idle time (shown on the pages) and drop a notice that activity overtook."""
    fields = {"idle_since": decision.idle_since}
    if decision.verdict == Verdict.BUSY:
        fields |= {"cull_notice_at": None, "cull_at": None}
    with transaction.atomic():
        Notebook.objects.filter(pk=notebook.pk, state=NotebookState.RUNNING).update(**fields)


def cull_safely(*, now: datetime | None = None) -> dict[str, int] | str:
    """The periodic task's body: Prometheus being down is reported, not raised."""
    try:
        return notebooks_cull(now=now)
    except ActivityUnavailable as error:
        logger.warning("idle notebooks not culled: %s", error)
        return str(error)
