"""A notebook's state read from its pod and events, as pure functions (no database, no network).

The pod says most of it: scheduled or not (and why), pulling its image, crashing, ready. When
there is no pod while one is wanted, the StatefulSet's events say why the controller could
not create it (a namespace quota refusal, most often).
"""

from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_noop

from portal.workloads.models import Desired, NotebookState

IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CRASH_REASONS = ("CrashLoopBackOff", "CreateContainerConfigError", "RunContainerError")
MAX_EVENTS = 10


@dataclass(frozen=True)
class Observed:
    state: NotebookState
    reason: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)


def event_summary(event: dict[str, Any]) -> dict[str, Any]:
    """The part of a core/v1 Event worth keeping and showing.

    Events recorded through events.k8s.io (the scheduler's) count their repeats in `series`
    and have no `count` or `lastTimestamp`; the others the other way round.
    """
    involved = event.get("involvedObject") or {}
    series = event.get("series") or {}
    return {
        "type": event.get("type", ""),
        "reason": event.get("reason", ""),
        "object": f"{involved.get('kind', '')}/{involved.get('name', '')}",
        "message": event.get("message", ""),
        "count": event.get("count") or series.get("count") or 1,
        "at": (
            series.get("lastObservedTime")
            or event.get("lastTimestamp")
            or event.get("eventTime")
            or ""
        ),
    }


def _conditions(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    status = pod.get("status") or {}
    return {item.get("type", ""): item for item in status.get("conditions") or []}


def _waiting(pod: dict[str, Any]) -> tuple[str, str] | None:
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in (None, "ContainerCreating"):
            return str(waiting.get("reason")), str(waiting.get("message") or "")
    return None


def _pod_state(pod: dict[str, Any]) -> tuple[NotebookState, str]:  # noqa: PLR0911 - a ladder
    """The first of these that holds, in order: ended, crashing, pulling, unschedulable,
    ready, starting."""
    status = pod.get("status") or {}
    phase = status.get("phase", "Pending")
    conditions = _conditions(pod)
    if phase in ("Failed", "Succeeded"):
        message = status.get("message") or status.get("reason") or "the container exited"
        return NotebookState.FAILED, f"The pod {phase.lower()}: {message}"
    waiting = _waiting(pod)
    if waiting and waiting[0] in CRASH_REASONS:
        return NotebookState.FAILED, f"{waiting[0]}: {waiting[1]}".rstrip(": ")
    if waiting and waiting[0] in IMAGE_PULL_REASONS:
        return NotebookState.PENDING, f"Image pull: {waiting[0]}: {waiting[1]}".rstrip(": ")
    scheduled = conditions.get("PodScheduled") or {}
    if scheduled.get("status") == "False":
        message = scheduled.get("message") or scheduled.get("reason") or "no node fits"
        return NotebookState.PENDING, f"Unschedulable: {message}"
    if phase == "Running" and (conditions.get("Ready") or {}).get("status") == "True":
        return NotebookState.RUNNING, ""
    if phase == "Running":
        return NotebookState.PENDING, gettext_noop("Starting: Jupyter is not ready yet.")
    if waiting:
        return NotebookState.PENDING, f"{waiting[0]}: {waiting[1]}".rstrip(": ")
    return NotebookState.PENDING, gettext_noop("Starting: the container is being created.")


def _no_pod_reason(events: list[dict[str, Any]]) -> str:
    refusals = [event for event in events if event.get("reason") == "FailedCreate"]
    if not refusals:
        return gettext_noop("Waiting for the pod to be created.")
    message = str(refusals[-1].get("message", ""))
    if "exceeded quota" in message:
        return f"Quota exceeded: {message}"
    return f"The pod could not be created: {message}"


def notebook_observed(
    *, desired: str, pod: dict[str, Any] | None, events: list[dict[str, Any]]
) -> Observed:
    """The state a notebook is in, given what its owner wants, its pod (None when there is
    none) and the warning events of its pod and StatefulSet (oldest first)."""
    kept = [event_summary(event) for event in events[-MAX_EVENTS:]]
    if desired == Desired.STOPPED:
        if pod is None:
            return Observed(NotebookState.STOPPED, events=kept)
        return Observed(NotebookState.STOPPING, gettext_noop("Waiting for the pod to end."), kept)
    if pod is None:
        return Observed(NotebookState.PENDING, _no_pod_reason(events), kept)
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return Observed(
            NotebookState.PENDING, gettext_noop("The previous pod is still ending."), kept
        )
    state, reason = _pod_state(pod)
    return Observed(state, reason, kept)
