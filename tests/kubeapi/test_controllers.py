"""The emulator's on-demand cluster components, read through the real `kubernetes` client.

A test calls `kube_api.reconcile_statefulsets()` where a real statefulset controller would have
caught up, and the `set_pod_*` helpers where the scheduler and the kubelet would have moved a
pod on; what the portal reads (pods, StatefulSets, events) comes back over HTTP. Typed answers
are read through `.to_dict()` (snake_case keys).
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import fixtures
from tests.kubeapi.server import KubeApiEmulator

# The fixture, imported so that this module runs on its own (see test_emulator.py).
kube_api = fixtures.kube_api

GPU = "nvidia.com/gpu"
TEAM = "team"


@pytest.fixture
def api_client(kube_api: KubeApiEmulator, tmp_path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(kube_api.kubeconfig(tmp_path / "kc")))
    yield api
    api.close()


@pytest.fixture(autouse=True)
def team_namespace(kube_api: KubeApiEmulator) -> None:
    kube_api.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}})


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


def notebook_set(
    name: str,
    *,
    gpus: int = 1,
    replicas: int | None = 1,
    image: str = "quay.io/jupyter/pytorch-notebook:2025-01-06",
    policy: str | None = None,
) -> client.V1StatefulSet:
    """A StatefulSet shaped like the portal's notebooks."""
    resources = {"requests": {"cpu": "2", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    spec: dict[str, Any] = {
        "serviceName": name,
        "selector": {"matchLabels": {"notebook": name}},
        "template": {
            "metadata": {
                "labels": {"notebook": name, "app.kubernetes.io/name": "notebook"},
                "annotations": {"prometheus.io/scrape": "true"},
            },
            "spec": {"containers": [{"name": "notebook", "image": image, "resources": resources}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if policy is not None:
        spec["podManagementPolicy"] = policy
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": TEAM},
        "spec": spec,
    }
    model = client.V1StatefulSet.from_dict(manifest)
    assert model is not None
    return model


def gpu_quota(gpus: int) -> client.V1ResourceQuota:
    model = client.V1ResourceQuota.from_dict(
        {"metadata": {"name": "tenant-quota"}, "spec": {"hard": {f"requests.{GPU}": str(gpus)}}}
    )
    assert model is not None
    return model


def pod_names(core: client.CoreV1Api, namespace: str = TEAM) -> list[str]:
    return [
        pod["metadata"]["name"] for pod in core.list_namespaced_pod(namespace).to_dict()["items"]
    ]


def pod_metadata(core: client.CoreV1Api, name: str) -> dict[str, Any]:
    return dict(core.read_namespaced_pod(name, TEAM).to_dict()["metadata"])


def the_pod(core: client.CoreV1Api, selector: str) -> dict[str, Any]:
    """The one pod a label selector lists, in the namespace and across all namespaces."""
    [listed] = core.list_namespaced_pod(TEAM, label_selector=selector).to_dict()["items"]
    [everywhere] = core.list_pod_for_all_namespaces(label_selector=selector).to_dict()["items"]
    assert everywhere == listed
    return dict(listed)


def events(core: client.CoreV1Api, selector: str, namespace: str = TEAM) -> list[dict[str, Any]]:
    return list(core.list_namespaced_event(namespace, field_selector=selector).to_dict()["items"])


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    [found] = [c for c in pod["status"]["conditions"] if c["type"] == kind]
    return dict(found)


def set_status(apps: client.AppsV1Api, name: str) -> dict[str, Any]:
    return dict(apps.read_namespaced_stateful_set_status(name, TEAM).to_dict()["status"])


# The statefulset controller.


def test_a_stateful_set_gets_its_pod_from_the_template(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    created = apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1")).to_dict()
    assert pod_names(core) == []  # no controller runs by itself

    kube_api.reconcile_statefulsets()

    pod = core.read_namespaced_pod("nb-1-0", TEAM).to_dict()
    assert pod["metadata"]["labels"] == {
        "notebook": "nb-1",
        "app.kubernetes.io/name": "notebook",
        "controller-revision-hash": set_status(apps, "nb-1")["update_revision"],
        "statefulset.kubernetes.io/pod-name": "nb-1-0",
        "apps.kubernetes.io/pod-index": "0",
    }
    assert pod["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    [owner] = pod["metadata"]["owner_references"]
    assert (owner["api_version"], owner["kind"], owner["name"], owner["controller"]) == (
        "apps/v1",
        "StatefulSet",
        "nb-1",
        True,
    )
    assert owner["uid"] == created["metadata"]["uid"]
    [container] = pod["spec"]["containers"]
    assert container["image"] == "quay.io/jupyter/pytorch-notebook:2025-01-06"
    assert container["resources"] == {
        "claims": None,
        "requests": {"cpu": "2", GPU: "1"},
        "limits": {GPU: "1"},
    }
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("nb-1-0", "nb-1")
    assert pod["status"]["phase"] == "Pending"
    status = set_status(apps, "nb-1")
    assert status["replicas"] == 1
    # Zero counts are left out on the wire, as the API server's omitempty fields are.
    assert status["ready_replicas"] is None
    assert status["available_replicas"] == 0
    assert status["observed_generation"] is None  # the emulator keeps no metadata.generation
    [created_event] = events(core, "involvedObject.name=nb-1")
    assert (created_event["reason"], created_event["type"]) == ("SuccessfulCreate", "Normal")
    assert created_event["message"] == "create Pod nb-1-0 in StatefulSet nb-1 successful"


def test_replicas_default_to_one_and_reconciling_again_changes_nothing(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1", replicas=None))
    kube_api.reconcile_statefulsets()
    pod = core.read_namespaced_pod("nb-1-0", TEAM).to_dict()
    kube_api.reconcile_statefulsets()
    assert core.read_namespaced_pod("nb-1-0", TEAM).to_dict() == pod
    assert pod_names(core) == ["nb-1-0"]


def test_scaling_to_zero_deletes_the_pod(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    kube_api.set_pod_running(TEAM, "nb-1-0")

    apps.patch_namespaced_stateful_set("nb-1", TEAM, {"spec": {"replicas": 0}})
    kube_api.reconcile_statefulsets()

    assert pod_names(core) == []
    status = set_status(apps, "nb-1")
    assert (status["replicas"], status["ready_replicas"]) == (0, None)
    reasons = [e["reason"] for e in events(core, "involvedObject.kind=StatefulSet")]
    assert sorted(reasons) == ["SuccessfulCreate", "SuccessfulDelete"]
    [deleted] = events(core, "reason=SuccessfulDelete")
    assert deleted["message"] == "delete Pod nb-1-0 in StatefulSet nb-1 successful"

    apps.patch_namespaced_stateful_set("nb-1", TEAM, {"spec": {"replicas": 1}})
    kube_api.reconcile_statefulsets()
    assert pod_names(core) == ["nb-1-0"]


def test_deleting_the_set_garbage_collects_its_pod(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-2"))
    kube_api.reconcile_statefulsets()
    assert pod_names(core) == ["nb-1-0", "nb-2-0"]

    apps.delete_namespaced_stateful_set("nb-1", TEAM)
    assert pod_names(core) == ["nb-1-0", "nb-2-0"]  # until the garbage collector runs
    kube_api.reconcile_statefulsets()

    assert pod_names(core) == ["nb-2-0"]


def test_a_set_recreated_under_the_same_name_gets_a_new_pod(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    old = pod_metadata(core, "nb-1-0")["uid"]

    apps.delete_namespaced_stateful_set("nb-1", TEAM)
    recreated = apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1")).to_dict()
    kube_api.reconcile_statefulsets()

    pod = core.read_namespaced_pod("nb-1-0", TEAM).to_dict()
    assert pod["metadata"]["uid"] != old
    assert pod["metadata"]["owner_references"][0]["uid"] == recreated["metadata"]["uid"]


def test_ordered_ready_creates_the_next_pod_once_the_previous_one_is_ready(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("ordered", replicas=2))
    apps.create_namespaced_stateful_set(
        TEAM, notebook_set("parallel", replicas=2, policy="Parallel")
    )
    kube_api.reconcile_statefulsets()
    assert pod_names(core) == ["ordered-0", "parallel-0", "parallel-1"]
    kube_api.reconcile_statefulsets()
    assert pod_names(core) == ["ordered-0", "parallel-0", "parallel-1"]

    kube_api.set_pod_running(TEAM, "ordered-0")
    kube_api.reconcile_statefulsets()
    assert pod_names(core) == ["ordered-0", "ordered-1", "parallel-0", "parallel-1"]


def test_a_changed_template_replaces_the_pod(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    kube_api.set_pod_running(TEAM, "nb-1-0")
    before = set_status(apps, "nb-1")["update_revision"]

    apps.replace_namespaced_stateful_set("nb-1", TEAM, notebook_set("nb-1", image="img:2"))
    kube_api.reconcile_statefulsets()

    pod = core.read_namespaced_pod("nb-1-0", TEAM).to_dict()
    assert pod["spec"]["containers"][0]["image"] == "img:2"
    assert pod["status"]["phase"] == "Pending"
    status = set_status(apps, "nb-1")
    assert status["update_revision"] != before
    assert status["current_revision"] == status["update_revision"]
    assert pod["metadata"]["labels"]["controller-revision-hash"] == status["update_revision"]


def test_a_failed_pod_is_recreated(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    failed = pod_metadata(core, "nb-1-0")
    core.patch_namespaced_pod_status("nb-1-0", TEAM, {"status": {"phase": "Failed"}})

    kube_api.reconcile_statefulsets()

    pod = core.read_namespaced_pod("nb-1-0", TEAM).to_dict()
    assert pod["metadata"]["uid"] != failed["uid"]
    assert pod["status"]["phase"] == "Pending"
    [warning] = events(core, "involvedObject.name=nb-1,type=Warning")
    assert warning["reason"] == "RecreatingFailedPod"
    assert warning["message"] == "StatefulSet team/nb-1 is recreating failed Pod nb-1-0"


# ResourceQuota admission of the controller's pods.


def test_a_pod_beyond_the_gpu_quota_is_not_created_and_failed_create_is_recorded(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    core.create_namespaced_resource_quota(TEAM, gpu_quota(1))
    created = apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1", gpus=2)).to_dict()

    kube_api.reconcile_statefulsets()

    assert pod_names(core) == []
    [event] = events(core, "involvedObject.name=nb-1")
    assert event["message"] == (
        'create Pod nb-1-0 in StatefulSet nb-1 failed error: pods "nb-1-0" is forbidden: '
        "exceeded quota: tenant-quota, requested: requests.nvidia.com/gpu=2, "
        "used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=1"
    )
    assert "exceeded quota" in event["message"]
    assert (event["reason"], event["type"], event["count"]) == ("FailedCreate", "Warning", 1)
    assert event["source"] == {"component": "statefulset-controller", "host": None}
    assert event["involved_object"] == {
        "api_version": "apps/v1",
        "field_path": None,
        "kind": "StatefulSet",
        "name": "nb-1",
        "namespace": TEAM,
        "resource_version": created["metadata"]["resource_version"],
        "uid": created["metadata"]["uid"],
    }
    assert event["first_timestamp"] is not None
    assert event["last_timestamp"] is not None
    assert set_status(apps, "nb-1")["replicas"] == 0


def test_reconciling_again_counts_the_failed_create_event_up(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    core.create_namespaced_resource_quota(TEAM, gpu_quota(1))
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1", gpus=2))
    kube_api.reconcile_statefulsets()
    [first] = events(core, "involvedObject.name=nb-1,reason=FailedCreate")

    kube_api.reconcile_statefulsets()
    kube_api.reconcile_statefulsets()

    [again] = events(core, "involvedObject.name=nb-1,reason=FailedCreate")
    assert again["metadata"]["name"] == first["metadata"]["name"]
    assert again["count"] == 3
    assert again["first_timestamp"] == first["first_timestamp"]
    assert again["last_timestamp"] >= first["last_timestamp"]


def test_pods_created_earlier_use_the_quota(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    core.create_namespaced_resource_quota(TEAM, gpu_quota(1))
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-2"))

    kube_api.reconcile_statefulsets()

    assert pod_names(core) == ["nb-1-0"]
    [refused] = events(core, "involvedObject.name=nb-2,reason=FailedCreate")
    assert refused["message"].endswith(
        "requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, "
        "limited: requests.nvidia.com/gpu=1"
    )
    used = core.read_namespaced_resource_quota("tenant-quota", TEAM).to_dict()["status"]["used"]
    assert used == {f"requests.{GPU}": "1"}

    apps.patch_namespaced_stateful_set("nb-1", TEAM, {"spec": {"replicas": 0}})
    kube_api.reconcile_statefulsets()
    assert pod_names(core) == ["nb-2-0"]


# The scheduler and the kubelet, seen through a list of pods by label selector.


def test_a_running_pod_is_listed_with_its_status(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    before = pod_metadata(core, "nb-1-0")["resource_version"]

    stored = kube_api.set_pod_running(TEAM, "nb-1-0", node="gpu-a100-1")

    pod = the_pod(core, "notebook=nb-1")
    assert int(pod["metadata"]["resource_version"]) > int(before)
    assert pod["metadata"]["resource_version"] == stored["metadata"]["resourceVersion"]
    assert pod["spec"]["node_name"] == "gpu-a100-1"
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["pod_ip"]
    assert pod["status"]["host_ip"]
    for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition(pod, kind)["status"] == "True"
    [container] = pod["status"]["container_statuses"]
    assert (container["name"], container["ready"], container["started"]) == (
        "notebook",
        True,
        True,
    )
    assert container["restart_count"] == 0
    assert container["state"]["running"]["started_at"] is not None
    status = set_status(apps, "nb-1")
    assert (status["replicas"], status["ready_replicas"], status["available_replicas"]) == (1, 1, 1)
    assert status["current_replicas"] == 1
    started = events(core, "involvedObject.kind=Pod,involvedObject.name=nb-1-0,reason=Started")
    assert started[0]["source"] == {"component": "kubelet", "host": "gpu-a100-1"}


def test_a_running_pod_that_is_not_ready(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    kube_api.set_pod_running(TEAM, "nb-1-0")
    assert set_status(apps, "nb-1")["ready_replicas"] == 1

    kube_api.set_pod_running(TEAM, "nb-1-0", ready=False)

    pod = the_pod(core, "statefulset.kubernetes.io/pod-name=nb-1-0")
    assert pod["status"]["phase"] == "Running"
    assert condition(pod, "PodScheduled")["status"] == "True"
    ready = condition(pod, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")
    assert ready["message"] == "containers with unready status: [notebook]"
    assert condition(pod, "ContainersReady")["status"] == "False"
    [container] = pod["status"]["container_statuses"]
    assert (container["ready"], container["started"]) == (False, True)
    assert set_status(apps, "nb-1")["ready_replicas"] is None


def test_an_unschedulable_pod_and_the_schedulers_event(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()

    kube_api.set_pod_unschedulable(TEAM, "nb-1-0")

    pod = the_pod(core, "notebook=nb-1")
    assert pod["status"]["phase"] == "Pending"
    assert pod["spec"]["node_name"] is None
    [scheduled] = pod["status"]["conditions"]
    assert (scheduled["type"], scheduled["status"], scheduled["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert scheduled["message"] == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    [event] = events(core, "involvedObject.kind=Pod,involvedObject.name=nb-1-0")
    assert (event["reason"], event["type"]) == ("FailedScheduling", "Warning")
    assert event["message"] == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert event["involved_object"]["uid"] == pod["metadata"]["uid"]
    # The scheduler records through events.k8s.io: read through core/v1, such an event has
    # eventTime and reportingComponent, but an empty source and no timestamps or count.
    assert event["reporting_component"] == "default-scheduler"
    assert event["action"] == "Scheduling"
    assert event["event_time"] is not None
    assert event["source"] == {"component": None, "host": None}
    assert (event["first_timestamp"], event["last_timestamp"], event["count"]) == (None,) * 3

    kube_api.set_pod_unschedulable(TEAM, "nb-1-0")
    [again] = events(core, "involvedObject.kind=Pod,involvedObject.name=nb-1-0")
    assert again["series"]["count"] == 2


def test_a_bound_pod_cannot_become_unschedulable(
    kube_api: KubeApiEmulator, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    kube_api.set_pod_running(TEAM, "nb-1-0")
    with pytest.raises(ValueError, match="already bound"):
        kube_api.set_pod_unschedulable(TEAM, "nb-1-0")
    with pytest.raises(ValueError, match="never moves"):
        kube_api.set_pod_running(TEAM, "nb-1-0", node="another-node")
    with pytest.raises(LookupError):
        kube_api.set_pod_running(TEAM, "missing")


@pytest.mark.parametrize("reason", ["ErrImagePull", "ImagePullBackOff"])
def test_an_image_that_cannot_be_pulled(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api, reason: str
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1", image="x"))
    kube_api.reconcile_statefulsets()

    kube_api.set_pod_waiting(TEAM, "nb-1-0", reason=reason, message='Back-off pulling image "x"')

    pod = the_pod(core, "notebook=nb-1")
    assert pod["status"]["phase"] == "Pending"
    assert pod["spec"]["node_name"] == "gpu-node-1"
    assert condition(pod, "PodScheduled")["status"] == "True"
    assert condition(pod, "Ready")["status"] == "False"
    [container] = pod["status"]["container_statuses"]
    assert container["state"]["waiting"] == {
        "reason": reason,
        "message": 'Back-off pulling image "x"',
    }
    assert (container["ready"], container["started"], container["restart_count"]) == (
        False,
        False,
        0,
    )
    [failed] = events(core, "involvedObject.kind=Pod,involvedObject.name=nb-1-0,type=Warning")
    assert (failed["reason"], failed["message"]) == ("Failed", 'Back-off pulling image "x"')
    assert failed["involved_object"]["field_path"] == "spec.containers{notebook}"
    assert failed["source"] == {"component": "kubelet", "host": "gpu-node-1"}


def test_a_container_in_crash_loop_back_off(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    message = "back-off 40s restarting failed container=notebook pod=nb-1-0_team"

    kube_api.set_pod_waiting(
        TEAM, "nb-1-0", reason="CrashLoopBackOff", message=message, phase="Running", restart_count=3
    )

    pod = the_pod(core, "notebook=nb-1")
    assert pod["status"]["phase"] == "Running"
    [container] = pod["status"]["container_statuses"]
    assert container["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert container["restart_count"] == 3
    terminated = container["last_state"]["terminated"]
    assert (terminated["exit_code"], terminated["reason"]) == (1, "Error")
    [back_off] = events(core, "involvedObject.name=nb-1-0,type=Warning")
    assert (back_off["reason"], back_off["message"]) == ("BackOff", message)
    assert set_status(apps, "nb-1")["ready_replicas"] is None


def test_a_container_being_created_records_no_event(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    kube_api.set_pod_waiting(TEAM, "nb-1-0", reason="ContainerCreating", message="")
    [container] = the_pod(core, "notebook=nb-1")["status"]["container_statuses"]
    assert container["state"]["waiting"] == {"reason": "ContainerCreating", "message": None}
    reasons = [e["reason"] for e in events(core, "involvedObject.name=nb-1-0")]
    assert reasons == ["Scheduled"]


# Events, read by field selector.


def test_add_event_refers_to_the_object_and_counts_repeats(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    uid = pod_metadata(core, "nb-1-0")["uid"]
    for _ in range(2):
        kube_api.add_event(
            TEAM,
            kind="Pod",
            name="nb-1-0",
            reason="FailedMount",
            message='MountVolume.SetUp failed for volume "workspace"',
        )
    kube_api.add_event(
        "default",
        kind="Node",
        name="gpu-node-1",
        reason="NodeNotReady",
        message="Node gpu-node-1 status is now: NodeNotReady",
        type="Normal",
        component="node-controller",
    )

    [mount] = events(core, f"involvedObject.uid={uid}")
    assert (mount["reason"], mount["type"], mount["count"]) == ("FailedMount", "Warning", 2)
    assert mount["source"]["component"] == "kubelet"
    everywhere = core.list_event_for_all_namespaces(field_selector="source=node-controller")
    [node] = everywhere.to_dict()["items"]
    assert node["metadata"]["namespace"] == "default"
    assert node["involved_object"]["kind"] == "Node"
    assert node["involved_object"]["namespace"] is None


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("involvedObject.kind=Pod,involvedObject.name=nb-1-0", ["FailedScheduling", "Unhealthy"]),
        ("involvedObject.kind=StatefulSet", ["SuccessfulCreate"]),
        ("involvedObject.name=nb-1", ["SuccessfulCreate"]),
        ("involvedObject.namespace=team,reason=Unhealthy", ["Unhealthy"]),
        ("type=Warning", ["FailedScheduling", "Unhealthy"]),
        ("type!=Warning", ["SuccessfulCreate"]),
        ("reason=FailedScheduling,type=Warning", ["FailedScheduling"]),
        ("source=statefulset-controller", ["SuccessfulCreate"]),
        ("reportingComponent=default-scheduler", ["FailedScheduling"]),
        ("involvedObject.kind=Pod,reason!=Unhealthy", ["FailedScheduling"]),
    ],
)
def test_event_field_selectors(
    kube_api: KubeApiEmulator,
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    selector: str,
    expected: list[str],
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    kube_api.set_pod_unschedulable(TEAM, "nb-1-0")
    kube_api.add_event(
        TEAM, kind="Pod", name="nb-1-0", reason="Unhealthy", message="Readiness probe failed"
    )
    assert sorted(e["reason"] for e in events(core, selector)) == expected
    everywhere = core.list_event_for_all_namespaces(field_selector=selector).to_dict()["items"]
    assert sorted(e["reason"] for e in everywhere) == expected


def test_event_uid_selector_tells_a_recreated_pod_from_its_predecessor(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.reconcile_statefulsets()
    old = pod_metadata(core, "nb-1-0")["uid"]
    kube_api.set_pod_unschedulable(TEAM, "nb-1-0")
    core.delete_namespaced_pod("nb-1-0", TEAM)
    kube_api.reconcile_statefulsets()
    new = pod_metadata(core, "nb-1-0")["uid"]

    assert len(events(core, f"involvedObject.name=nb-1-0,involvedObject.uid={old}")) == 1
    assert events(core, f"involvedObject.name=nb-1-0,involvedObject.uid={new}") == []


def test_an_unsupported_event_field_selector_answers_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.list_namespaced_event(TEAM, field_selector="message=x")
    assert raised.value.status == 400
    body = raised.value.body
    status = json.loads(body.decode() if isinstance(body, bytes) else str(body))
    assert status["message"] == "field label not supported: message"


def test_the_components_leave_the_request_log_alone(
    kube_api: KubeApiEmulator, apps: client.AppsV1Api
) -> None:
    apps.create_namespaced_stateful_set(TEAM, notebook_set("nb-1"))
    kube_api.clear_log()
    kube_api.faults.error_rate(1.0, statuses=(500,))
    kube_api.reconcile_statefulsets()
    kube_api.set_pod_running(TEAM, "nb-1-0")
    kube_api.faults.clear()
    assert kube_api.requests == []
    assert kube_api.get_object("v1", "Pod", "nb-1-0", TEAM) is not None
