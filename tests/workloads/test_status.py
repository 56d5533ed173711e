"""A notebook's state read back from the cluster: its pod (scheduled, pulling, crashing, ready)
and, while it waits, the warnings of its pod and StatefulSet.

Against the Kubernetes API emulator, whose components the tests move on by hand; then the pure
`notebook_observed` with hand-written pods, for the branches the emulator has no verb for.
"""

import threading
from typing import Any

import pytest
from django.db import connections

from portal.accounts.models import User
from portal.allocations.services import gpu_request_submit
from portal.catalog.models import Offering
from portal.core.models import AuditEvent
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.services import notebook_stop, notebooks_observe
from portal.workloads.status import MAX_EVENTS, notebook_observed
from tenants.models import Tenant
from tenants.services import quota_set, tenant_update
from tests.cluster.fixtures import run_queued
from tests.conftest import wait_until
from tests.kubeapi.server import KubeApiEmulator
from tests.workloads.conftest import allocation_of, launch

NAMESPACE = "t-vision"
SCHEDULER_MESSAGE = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def refreshed(notebook: Notebook) -> Notebook:
    return Notebook.objects.get(pk=notebook.pk)


def pod_of(notebook: Notebook) -> str:
    return f"{notebook.kubernetes_name}-0"


def launched(
    kube_api: KubeApiEmulator, owner: User, tenant: Tenant, offering: Offering
) -> Notebook:
    """A notebook whose objects are applied and whose pod the statefulset controller made."""
    notebook = launch(owner, allocation_of(owner, tenant, offering))
    run_queued(tenant)
    kube_api.reconcile_statefulsets()
    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.PENDING, notebook.reason
    assert kube_api.get_object("v1", "Pod", pod_of(notebook), NAMESPACE) is not None
    return notebook


def observe_events(notebook: Notebook) -> list[tuple[int | None, Any]]:
    """(actor, changes) of the notebook's `notebook.observe` audit events, oldest first."""
    events = AuditEvent.objects.filter(
        action="notebook.observe", target_type="workloads.notebook", target_id=str(notebook.pk)
    ).order_by("pk")
    return [(event.actor_id, event.changes) for event in events]


def api_calls(kube_api: KubeApiEmulator) -> list[tuple[str, str, str]]:
    """The requests to resources (method, path, field selector), discovery left out: the
    client caches discovery, so whether it calls depends on what ran before."""
    discovery = {"/api", "/apis", "/version"}
    calls = []
    for record in kube_api.requests:
        parts = record.path.strip("/").split("/")
        if record.path in discovery or record.path.startswith("/openapi"):
            continue
        if (parts[0] == "api" and len(parts) == 2) or (parts[0] == "apis" and len(parts) <= 3):
            continue
        calls.append((record.method, record.path, record.query.get("fieldSelector", "")))
    return calls


# Against the emulator.


def test_a_running_and_ready_pod_makes_the_notebook_running(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    live_cluster.notebook_host_pattern = "{name}.{tenant}.gpu.example.org"
    live_cluster.save()
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    kube_api.set_pod_running(NAMESPACE, pod_of(notebook))

    assert notebooks_observe(cluster=live_cluster) == 1

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.RUNNING
    assert notebook.reason == ""
    assert notebook.running_since is not None
    assert notebook.observed_at == notebook.running_since
    assert notebook.url == f"https://{notebook.kubernetes_name}.vision.gpu.example.org/lab"
    assert observe_events(notebook) == [(None, {"state": ["pending", "running"]})]


def test_a_pod_that_is_running_but_not_ready_is_still_starting(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    kube_api.set_pod_running(NAMESPACE, pod_of(notebook), ready=False)

    notebooks_observe(cluster=live_cluster)

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.PENDING
    assert notebook.reason == "Starting: Jupyter is not ready yet."
    assert notebook.running_since is None


def test_an_unschedulable_pod_says_what_the_scheduler_said(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    kube_api.set_pod_unschedulable(NAMESPACE, pod_of(notebook), message=SCHEDULER_MESSAGE)

    assert notebooks_observe(cluster=live_cluster) == 1

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.PENDING
    assert notebook.reason.startswith("Unschedulable:")
    assert SCHEDULER_MESSAGE in notebook.reason
    assert notebook.running_since is None
    [scheduling] = [event for event in notebook.events if event["reason"] == "FailedScheduling"]
    assert scheduling["type"] == "Warning"
    assert scheduling["object"] == f"Pod/{pod_of(notebook)}"
    assert scheduling["message"] == SCHEDULER_MESSAGE
    assert scheduling["at"]


def test_a_repeated_scheduling_failure_is_counted_with_its_last_time(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    # The scheduler records through events.k8s.io: a repeat counts up `series`, not `count`.
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    for _ in range(3):
        kube_api.set_pod_unschedulable(NAMESPACE, pod_of(notebook), message=SCHEDULER_MESSAGE)
    [stored] = [
        event
        for event in kube_api.objects("Event", NAMESPACE)
        if event["reason"] == "FailedScheduling"
    ]

    notebooks_observe(cluster=live_cluster)

    [scheduling] = [
        event for event in refreshed(notebook).events if event["reason"] == "FailedScheduling"
    ]
    assert scheduling["count"] == 3
    assert scheduling["at"] == stored["series"]["lastObservedTime"]
    assert scheduling["at"] > stored["eventTime"]


def test_an_image_that_cannot_be_pulled_keeps_the_notebook_pending(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    message = f'Back-off pulling image "{notebook.image_reference}"'
    kube_api.set_pod_waiting(
        NAMESPACE, pod_of(notebook), reason="ImagePullBackOff", message=message
    )

    notebooks_observe(cluster=live_cluster)

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.PENDING
    assert notebook.reason == f"Image pull: ImagePullBackOff: {message}"
    assert [(event["reason"], event["message"]) for event in notebook.events] == [
        ("Failed", message)
    ]


def test_a_crash_looping_notebook_fails_with_the_reason(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    message = f"back-off 40s restarting failed container=notebook pod={pod_of(notebook)}"
    kube_api.set_pod_waiting(
        NAMESPACE,
        pod_of(notebook),
        reason="CrashLoopBackOff",
        message=message,
        phase="Running",
        restart_count=3,
    )

    assert notebooks_observe(cluster=live_cluster) == 1

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.FAILED
    assert notebook.reason == f"CrashLoopBackOff: {message}"
    assert notebook.running_since is None
    assert observe_events(notebook) == [(None, {"state": ["pending", "failed"]})]


def test_a_namespace_quota_refusing_the_pod_says_quota_exceeded(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    quota = kube_api.get_object("v1", "ResourceQuota", "tenant-quota", NAMESPACE)
    assert quota is not None
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "1"
    quota["spec"]["hard"]["requests.nvidia.com/gpu"] = "0"
    kube_api.put_object(quota)

    kube_api.reconcile_statefulsets()

    assert kube_api.get_object("v1", "Pod", pod_of(notebook), NAMESPACE) is None
    notebooks_observe(cluster=live_cluster)
    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.PENDING
    assert notebook.reason.startswith("Quota exceeded:")
    assert "exceeded quota" in notebook.reason
    assert "tenant-quota" in notebook.reason
    [refusal] = notebook.events
    assert refusal["reason"] == "FailedCreate"
    assert refusal["object"] == f"StatefulSet/{notebook.kubernetes_name}"


def test_a_missing_pod_with_no_refusal_is_waited_for(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)  # the StatefulSet exists; its controller has not run yet

    notebooks_observe(cluster=live_cluster)

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.PENDING
    assert notebook.reason == "Waiting for the pod to be created."


def test_a_stopped_notebook_is_stopped_once_its_pod_is_gone(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    kube_api.set_pod_running(NAMESPACE, pod_of(notebook))
    notebooks_observe(cluster=live_cluster)

    notebook_stop(actor=developer, notebook=notebook)
    # Observed before the run scaled the set down: the pod is still there.
    notebooks_observe(cluster=live_cluster)
    notebook = refreshed(notebook)
    assert (notebook.desired, notebook.state) == (Desired.STOPPED, NotebookState.STOPPING)
    assert notebook.reason == "Stopped by dev."  # why it stops stays, whatever the pod says

    run_queued(gpu_tenant)
    kube_api.reconcile_statefulsets()
    assert kube_api.get_object("v1", "Pod", pod_of(notebook), NAMESPACE) is None
    notebooks_observe(cluster=live_cluster)

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.STOPPED
    assert notebook.stopped_at is not None
    assert notebook.running_since is None
    assert kube_api.get_object(
        "v1", "PersistentVolumeClaim", f"{notebook.kubernetes_name}-workspace", NAMESPACE
    )


def test_a_stopping_notebook_whose_pod_is_gone_is_observed_stopped(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    kube_api.set_pod_running(NAMESPACE, pod_of(notebook))
    notebooks_observe(cluster=live_cluster)
    notebook_stop(actor=developer, notebook=notebook)
    # The set scaled to zero (by hand: the portal's run has not reported yet).
    stateful_set = kube_api.get_object(
        "apps/v1", "StatefulSet", notebook.kubernetes_name, NAMESPACE
    )
    assert stateful_set is not None
    stateful_set["spec"]["replicas"] = 0
    kube_api.put_object(stateful_set)
    kube_api.reconcile_statefulsets()

    assert notebooks_observe(cluster=live_cluster) == 1

    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.STOPPED
    assert notebook.stopped_at is not None
    assert observe_events(notebook)[-1] == (None, {"state": ["stopping", "stopped"]})


@pytest.fixture
def nlp_tenant(tenant_b: Tenant, admin_user: User, catalog: dict[str, Offering]) -> Tenant:
    quota_set(
        actor=admin_user, tenant=tenant_b, gpu_model=catalog["a100-80gb-whole"].gpu_model, gpu_eq=4
    )
    return tenant_update(actor=admin_user, tenant=tenant_b, auto_approve_gpu_eq="2")


def test_one_pod_list_and_one_event_list_per_namespace_with_a_waiting_notebook(
    live_cluster, kube_api, gpu_tenant, nlp_tenant, developer, outsider, catalog
):
    offering = catalog["a100-80gb-whole"]
    vision = [
        launch(developer, allocation_of(developer, gpu_tenant, offering)),
        launch(developer, allocation_of(developer, gpu_tenant, offering)),
    ]
    nlp = launch(
        outsider,
        gpu_request_submit(actor=outsider, tenant=nlp_tenant, offering=offering, count=1),
    )
    run_queued()
    kube_api.reconcile_statefulsets()

    kube_api.clear_log()
    notebooks_observe(cluster=live_cluster)
    pods = ("GET", "/api/v1/pods", "")
    events = {
        ("GET", f"/api/v1/namespaces/{namespace}/events", "type=Warning")
        for namespace in ("t-vision", "t-nlp")
    }
    calls = api_calls(kube_api)
    assert calls[0] == pods
    assert len(calls) == 3
    assert set(calls[1:]) == events

    # Once vision's notebooks run, its warnings are not read any more; nlp's still are.
    for notebook in vision:
        kube_api.set_pod_running(NAMESPACE, pod_of(notebook))
    assert notebooks_observe(cluster=live_cluster) == 2
    audited = AuditEvent.objects.count()
    before = {notebook.pk: refreshed(notebook) for notebook in [*vision, nlp]}
    kube_api.clear_log()

    assert notebooks_observe(cluster=live_cluster) == 0

    assert api_calls(kube_api) == [
        pods,
        ("GET", "/api/v1/namespaces/t-nlp/events", "type=Warning"),
    ]
    # Nothing changed: nothing is audited, only the time of the observation moves on.
    assert AuditEvent.objects.count() == audited
    for pk, notebook in before.items():
        again = Notebook.objects.get(pk=pk)
        assert (again.state, again.reason, again.running_since, again.events) == (
            notebook.state,
            notebook.reason,
            notebook.running_since,
            notebook.events,
        )
        assert again.observed_at is not None
        assert notebook.observed_at is not None
        assert again.observed_at > notebook.observed_at


def test_nothing_is_read_when_no_notebook_is_moving_or_running(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    notebook_stop(actor=developer, notebook=notebook)
    run_queued(gpu_tenant)
    assert refreshed(notebook).state == NotebookState.STOPPED
    kube_api.clear_log()

    assert notebooks_observe(cluster=live_cluster) == 0
    assert kube_api.requests == []


def test_a_notebook_stopped_while_its_pod_is_read_is_not_overwritten(
    transactional_db, redis_client, live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launched(kube_api, developer, gpu_tenant, catalog["a100-80gb-whole"])
    kube_api.set_pod_running(NAMESPACE, pod_of(notebook))
    failures: list[BaseException] = []

    def observe() -> None:
        try:
            notebooks_observe(cluster=live_cluster)
        except BaseException as error:  # noqa: BLE001 - reported by the test's thread
            failures.append(error)
        finally:
            connections.close_all()

    # The reads answer slowly; the owner stops the notebook while the warnings are read.
    kube_api.faults.slow(1.0, methods=("GET",))
    kube_api.clear_log()
    reader = threading.Thread(target=observe)
    reader.start()
    wait_until(
        lambda: any(record.path.endswith("/events") for record in kube_api.requests),
        timeout=10,
        what="the observation to read the warnings",
    )
    notebook_stop(actor=developer, notebook=notebook)
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert not failures, failures

    notebook = refreshed(notebook)
    assert (notebook.desired, notebook.state) == (Desired.STOPPED, NotebookState.STOPPING)
    assert notebook.running_since is None
    assert observe_events(notebook) == []


# The pure function, with pods as the API server shows them.


def pod(
    *,
    phase: str = "Pending",
    conditions: dict[str, tuple[str, str]] | None = None,
    waiting: tuple[str, str] | None = None,
    deleting: bool = False,
    message: str = "",
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if message:
        status["message"] = message
    if conditions:
        status["conditions"] = [
            {"type": kind, "status": value, "message": text}
            for kind, (value, text) in conditions.items()
        ]
    if waiting:
        status["containerStatuses"] = [
            {
                "name": "notebook",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}},
            }
        ]
    metadata: dict[str, Any] = {"name": "nb-7-0", "namespace": NAMESPACE}
    if deleting:
        metadata["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "status": status}


def warning(reason: str, message: str, *, kind: str = "Pod", at: str = "") -> dict[str, Any]:
    return {
        "type": "Warning",
        "reason": reason,
        "message": message,
        "involvedObject": {"kind": kind, "name": "nb-7-0" if kind == "Pod" else "nb-7"},
        "count": 1,
        "lastTimestamp": at or "2030-01-01T00:00:00Z",
    }


READY = {"PodScheduled": ("True", ""), "Ready": ("True", "")}
QUOTA_REFUSAL = (
    'create Pod nb-7-0 in StatefulSet nb-7 failed error: pods "nb-7-0" is forbidden: exceeded '
    "quota: tenant-quota, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=0, "
    "limited: requests.nvidia.com/gpu=0"
)


@pytest.mark.parametrize(
    ("desired", "the_pod", "events", "state", "reason"),
    [
        pytest.param(Desired.STOPPED, None, [], "stopped", "", id="stopped-and-gone"),
        pytest.param(
            Desired.STOPPED,
            pod(phase="Running", conditions=READY),
            [],
            "stopping",
            "Waiting for the pod to end.",
            id="stopped-pod-still-there",
        ),
        pytest.param(
            Desired.RUNNING, None, [], "pending", "Waiting for the pod to be created.", id="no-pod"
        ),
        pytest.param(
            Desired.RUNNING,
            None,
            [warning("FailedCreate", QUOTA_REFUSAL, kind="StatefulSet")],
            "pending",
            f"Quota exceeded: {QUOTA_REFUSAL}",
            id="quota-refusal",
        ),
        pytest.param(
            Desired.RUNNING,
            None,
            [warning("FailedCreate", "admission webhook denied the request", kind="StatefulSet")],
            "pending",
            "The pod could not be created: admission webhook denied the request",
            id="other-refusal",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(phase="Running", conditions=READY, deleting=True),
            [],
            "pending",
            "The previous pod is still ending.",
            id="old-pod-ending",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(phase="Failed", message="Pod was evicted: the node ran out of memory"),
            [],
            "failed",
            "The pod failed: Pod was evicted: the node ran out of memory",
            id="pod-failed",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(phase="Running", waiting=("CrashLoopBackOff", "back-off 5m0s")),
            [],
            "failed",
            "CrashLoopBackOff: back-off 5m0s",
            id="crash-loop",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(waiting=("CreateContainerConfigError", 'secret "nb-7-token" not found')),
            [],
            "failed",
            'CreateContainerConfigError: secret "nb-7-token" not found',
            id="config-error",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(waiting=("ErrImagePull", "manifest unknown")),
            [],
            "pending",
            "Image pull: ErrImagePull: manifest unknown",
            id="image-pull",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(conditions={"PodScheduled": ("False", SCHEDULER_MESSAGE)}),
            [],
            "pending",
            f"Unschedulable: {SCHEDULER_MESSAGE}",
            id="unschedulable",
        ),
        pytest.param(
            Desired.RUNNING, pod(phase="Running", conditions=READY), [], "running", "", id="ready"
        ),
        pytest.param(
            Desired.RUNNING,
            pod(phase="Running", conditions={"Ready": ("False", "containers not ready")}),
            [],
            "pending",
            "Starting: Jupyter is not ready yet.",
            id="not-ready",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(waiting=("ContainerCreating", "")),
            [],
            "pending",
            "Starting: the container is being created.",
            id="creating",
        ),
        pytest.param(
            Desired.RUNNING,
            pod(),
            [],
            "pending",
            "Starting: the container is being created.",
            id="no-status-yet",
        ),
    ],
)
def test_notebook_observed_reads_each_kind_of_pod(desired, the_pod, events, state, reason):
    observed = notebook_observed(desired=desired, pod=the_pod, events=events)

    assert (observed.state, observed.reason) == (state, reason)
    assert len(observed.events) == len(events)


def test_a_crash_is_told_before_an_image_pull_and_a_pull_before_scheduling():
    crashing = pod(
        phase="Running",
        conditions={"PodScheduled": ("False", "no node")},
        waiting=("CrashLoopBackOff", "back-off"),
    )
    pulling = pod(conditions={"PodScheduled": ("True", "")}, waiting=("ImagePullBackOff", "x"))

    assert notebook_observed(desired=Desired.RUNNING, pod=crashing, events=[]).state == "failed"
    assert notebook_observed(desired=Desired.RUNNING, pod=pulling, events=[]).reason.startswith(
        "Image pull:"
    )


def test_the_latest_refusal_decides_and_only_the_last_events_are_kept():
    old = warning("FailedCreate", "quota exceeded? no: a webhook said no", kind="StatefulSet")
    events = [
        *(warning("BackOff", f"back-off {n}", at=f"2030-01-01T00:00:{n:02}Z") for n in range(12)),
        old,
        warning("FailedCreate", QUOTA_REFUSAL, kind="StatefulSet", at="2030-01-01T00:01:00Z"),
    ]

    observed = notebook_observed(desired=Desired.RUNNING, pod=None, events=events)

    assert observed.reason == f"Quota exceeded: {QUOTA_REFUSAL}"
    assert len(observed.events) == MAX_EVENTS
    assert observed.events[-1] == {
        "type": "Warning",
        "reason": "FailedCreate",
        "object": "StatefulSet/nb-7",
        "message": QUOTA_REFUSAL,
        "count": 1,
        "at": "2030-01-01T00:01:00Z",
    }
    assert observed.events[0]["message"] == "back-off 4"


def test_a_scheduler_event_is_summarised_with_its_series():
    event = {
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": SCHEDULER_MESSAGE,
        "involvedObject": {"kind": "Pod", "name": "nb-7-0"},
        "eventTime": "2030-01-01T00:00:00.000001Z",
        "series": {"count": 4, "lastObservedTime": "2030-01-01T00:05:00.000001Z"},
        "source": {},
    }

    [summary] = notebook_observed(desired=Desired.RUNNING, pod=pod(), events=[event]).events

    assert summary["count"] == 4
    assert summary["at"] == "2030-01-01T00:05:00.000001Z"


def test_a_notebook_the_owner_wants_stopped_is_never_reported_running_or_failed():
    for the_pod in (
        pod(phase="Running", conditions=READY),
        pod(phase="Running", waiting=("CrashLoopBackOff", "back-off")),
    ):
        observed = notebook_observed(desired=Desired.STOPPED, pod=the_pod, events=[])
        assert observed.state == NotebookState.STOPPING
