"""What a cluster's components do to pods, StatefulSets and events, run on demand by tests.

The emulator runs no controllers by itself: a test calls `reconcile_statefulsets()` where a
real cluster's statefulset controller and garbage collector would have caught up, and the
`set_pod_*` helpers where the scheduler and the kubelet would have moved a pod on.

Every change is a request to the emulator's own API (`api.Api`), as the components make them
to a real API server, without HTTP, faults or the request log: a pod is created by a POST, so
it is validated and admitted against ResourceQuota like any other; statuses go through the
`status` subresource; events are POSTed and, when one repeats, PATCHed.

The statefulset controller, as far as emulated: pods `<set>-<ordinal>` for ordinals below
spec.replicas (default 1), from spec.template plus the labels `controller-revision-hash`,
`statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`, spec.hostname and
spec.subdomain, and a controller ownerReference to the set. With the default OrderedReady
policy, a pass stops at the first pod it creates, fails to create, or finds not Running and
Ready (Parallel creates them all). Pods at or above spec.replicas are deleted, all in one pass;
Failed or Succeeded pods are deleted and recreated; with the RollingUpdate strategy (the
default) pods of an older template are too, all in one pass (not one at a time). Each create
and delete is recorded as the controller does, `SuccessfulCreate`/`FailedCreate`/
`SuccessfulDelete` events on the set, and the set's status is kept current. Pods whose
controlling StatefulSet is gone (by uid) are deleted, as the garbage collector would.

Events come in the two shapes a real cluster shows through core/v1: the statefulset
controller and the kubelet record them with the legacy recorder (source, firstTimestamp,
lastTimestamp, count, counted up when an identical event repeats); the scheduler records them
through events.k8s.io (eventTime, action, reportingComponent, `series` when one repeats, and
an empty source, no timestamps and no count).

Not emulated: volumeClaimTemplates, adoption of orphaned pods, metadata.generation (so no
status.observedGeneration), minReadySeconds beyond counting ready pods as available, graceful
termination, and ownerReferences of kinds other than StatefulSet.
"""

import copy
import hashlib
import json
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tests.kubeapi.api import JSON, MERGE_PATCH, Api, Request
from tests.kubeapi.quota import is_terminal
from tests.kubeapi.resources import (
    BY_PLURAL,
    KUBERNETES_VERSION,
    PODS,
    ResourceType,
    resource_for_kind_name,
)
from tests.kubeapi.store import Store, now

STATEFUL_SETS = BY_PLURAL["statefulsets"]
EVENTS = BY_PLURAL["events"]
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"

CONTROLLER = "statefulset-controller"
SCHEDULER = "default-scheduler"
SCHEDULER_INSTANCE = "default-scheduler-control-plane"
KUBELET = "kubelet"

# Waiting reasons of a failed image pull: the kubelet's event for them is `Failed`.
IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
# Waiting reasons of a pod on its way up: the kubelet records no event for them.
STARTING_REASONS = frozenset({"ContainerCreating", "PodInitializing"})

# apimachinery's rand.SafeEncodeString alphabet, which revision hashes are written in.
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _user_agent(component: str) -> str:
    return f"{component}/v{KUBERNETES_VERSION} (linux/amd64) kubernetes/0000000"


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _revision(stateful_set: dict[str, Any]) -> str:
    """`<set>-<hash of the pod template>`, the shape of the controller's revision names."""
    template = (stateful_set.get("spec") or {}).get("template") or {}
    # FNV-1a, 32 bits, as the controller's ComputeHash (which hashes a Go dump, not JSON).
    digest = 0x811C9DC5
    for byte in json.dumps(template, sort_keys=True).encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    encoded = "".join(_SAFE_ALPHABET[ord(char) % len(_SAFE_ALPHABET)] for char in str(digest))
    return f"{stateful_set['metadata']['name']}-{encoded}"


def _controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    for reference in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("controller"):
            return dict(reference)
    return None


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    for condition in status.get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return {}


def _is_running_and_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and _condition(status, "Ready").get("status") == "True"


def _ordinal(stateful_set: dict[str, Any], pod: dict[str, Any]) -> int | None:
    prefix = f"{stateful_set['metadata']['name']}-"
    name = str(pod["metadata"]["name"])
    suffix = name.removeprefix(prefix)
    if name.startswith(prefix) and re.fullmatch(r"0|[1-9]\d*", suffix):
        return int(suffix)
    return None


class _Component:
    """One cluster component's requests to the API: no HTTP, no faults, no request log."""

    def __init__(self, api: Api, component: str) -> None:
        self.api = api
        self.user_agent = _user_agent(component)

    def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = JSON
    ) -> tuple[int, dict[str, Any]]:
        request = Request(
            method=method,
            path=path,
            query={},
            content_type=content_type if body is not None else "",
            accept=JSON,
            user_agent=self.user_agent,
            body=json.dumps(body).encode() if body is not None else b"",
        )
        response = self.api.handle(request)
        return response.status, dict(json.loads(response.body))

    def ok(
        self, method: str, path: str, body: Any = None, *, content_type: str = JSON
    ) -> dict[str, Any]:
        """The answer of a request that cannot fail unless the emulator is wrong."""
        status, answer = self.call(method, path, body, content_type=content_type)
        if status >= 300:
            raise RuntimeError(f"{method} {path} answered {status}: {answer.get('message')}")
        return answer


def _path(rt: ResourceType, namespace: str, name: str = "", subresource: str = "") -> str:
    prefix = f"/apis/{rt.api_version}" if rt.group else f"/api/{rt.api_version}"
    path = f"{prefix}/namespaces/{namespace}/{rt.plural}"
    for part in (name, subresource):
        if part:
            path += f"/{part}"
    return path


class Cluster:
    """The statefulset controller, garbage collector, scheduler and kubelet of the emulator.

    Callers need not hold the store's lock: every public method takes it for its whole run,
    so requests served meanwhile see its changes all at once.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        api = Api(store, "")
        self._api = api
        self._controller = _Component(api, "kube-controller-manager")
        self._scheduler = _Component(api, "kube-scheduler")
        self._kubelet = _Component(api, KUBELET)
        self._last_event_time = 0
        self._pod_ips: dict[tuple[str, str], str] = {}
        self._host_ips: dict[str, str] = {}

    # The statefulset controller and the garbage collector.

    def reconcile_statefulsets(self) -> None:
        with self.store.lock:
            sets = [copy.deepcopy(obj) for _, obj in self.store.find(STATEFUL_SETS)]
            alive = {
                (s["metadata"]["namespace"], s["metadata"]["name"], s["metadata"]["uid"])
                for s in sets
            }
            for _, pod in self.store.find(PODS):
                owner = _controller_of(pod)
                if owner is None or owner.get("kind") != STATEFUL_SETS.kind:
                    continue
                key = (pod["metadata"]["namespace"], owner.get("name"), owner.get("uid"))
                if key not in alive:
                    self._delete_pod(pod)
            for stateful_set in sets:
                self._sync(stateful_set)

    def _sync(self, stateful_set: dict[str, Any]) -> None:
        spec = stateful_set.get("spec") or {}
        replicas = 1 if spec.get("replicas") is None else int(spec["replicas"])
        ordered = spec.get("podManagementPolicy") != "Parallel"
        strategy = spec.get("updateStrategy") or {}
        rolling = strategy.get("type", "RollingUpdate") == "RollingUpdate"
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
        revision = _revision(stateful_set)
        pods: dict[int, dict[str, Any]] = {}
        for owned in self._owned_pods(stateful_set):
            ordinal = _ordinal(stateful_set, owned)
            if ordinal is not None:
                pods[ordinal] = owned
        for ordinal in sorted((o for o in pods if o >= replicas), reverse=True):
            self._delete_pod(pods.pop(ordinal), stateful_set)
        for ordinal in range(replicas):
            pod = pods.get(ordinal)
            if pod is not None and is_terminal(pod):
                failed = pod["status"]["phase"] == "Failed"
                self._record(
                    stateful_set,
                    component=CONTROLLER,
                    type="Warning" if failed else "Normal",
                    reason="RecreatingFailedPod" if failed else "RecreatingTerminatedPod",
                    message=(
                        f"StatefulSet {stateful_set['metadata']['namespace']}/"
                        f"{stateful_set['metadata']['name']} is recreating "
                        f"{'failed' if failed else 'terminated'} Pod {pod['metadata']['name']}"
                    ),
                )
                self._delete_pod(pod, stateful_set)
                pod = None
            elif (
                pod is not None
                and rolling
                and ordinal >= partition
                and (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision
            ):
                self._delete_pod(pod, stateful_set)
                pod = None
            if pod is None:
                self._create_pod(stateful_set, ordinal, revision)
                if ordered:
                    break
            elif ordered and not _is_running_and_ready(pod):
                break
        self._write_set_status(stateful_set)

    def _owned_pods(self, stateful_set: dict[str, Any]) -> list[dict[str, Any]]:
        metadata = stateful_set["metadata"]
        return [
            copy.deepcopy(pod)
            for _, pod in self.store.find(PODS, metadata["namespace"])
            if (_controller_of(pod) or {}).get("uid") == metadata["uid"]
        ]

    def _create_pod(self, stateful_set: dict[str, Any], ordinal: int, revision: str) -> None:
        metadata, spec = stateful_set["metadata"], stateful_set.get("spec") or {}
        name = f"{metadata['name']}-{ordinal}"
        template = spec.get("template") or {}
        template_metadata = template.get("metadata") or {}
        pod_metadata: dict[str, Any] = {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": {
                **(template_metadata.get("labels") or {}),
                REVISION_LABEL: revision,
                POD_NAME_LABEL: name,
                POD_INDEX_LABEL: str(ordinal),
            },
        }
        if template_metadata.get("annotations"):
            pod_metadata["annotations"] = dict(template_metadata["annotations"])
        pod_metadata["ownerReferences"] = [
            {
                "apiVersion": STATEFUL_SETS.api_version,
                "kind": STATEFUL_SETS.kind,
                "name": metadata["name"],
                "uid": metadata["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        pod_spec = copy.deepcopy(template.get("spec") or {})
        pod_spec["hostname"] = name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_metadata, "spec": pod_spec}
        status, answer = self._controller.call("POST", _path(PODS, metadata["namespace"]), body)
        # The controller's own wording (stateful_pod_control.go, recordPodEvent).
        prefix = f"create Pod {name} in StatefulSet {metadata['name']}"
        if status < 300:
            self._record(
                stateful_set,
                component=CONTROLLER,
                type="Normal",
                reason="SuccessfulCreate",
                message=f"{prefix} successful",
            )
        else:
            self._record(
                stateful_set,
                component=CONTROLLER,
                type="Warning",
                reason="FailedCreate",
                message=f"{prefix} failed error: {answer.get('message')}",
            )

    def _delete_pod(self, pod: dict[str, Any], stateful_set: dict[str, Any] | None = None) -> None:
        metadata = pod["metadata"]
        path = _path(PODS, metadata["namespace"], metadata["name"])
        status, answer = self._controller.call("DELETE", path)
        if status == 404:
            return
        if status >= 300:
            raise RuntimeError(f"DELETE {path} answered {status}: {answer.get('message')}")
        if stateful_set is not None:
            self._record(
                stateful_set,
                component=CONTROLLER,
                type="Normal",
                reason="SuccessfulDelete",
                message=(
                    f"delete Pod {metadata['name']} in StatefulSet "
                    f"{stateful_set['metadata']['name']} successful"
                ),
            )

    def _write_set_status(self, stateful_set: dict[str, Any]) -> None:
        metadata = stateful_set["metadata"]
        stored = self.store.get(STATEFUL_SETS, metadata["namespace"], metadata["name"])
        if stored is None:
            return
        stored = copy.deepcopy(stored)
        revision = _revision(stored)
        pods = self._owned_pods(stored)
        revisions = [(p["metadata"].get("labels") or {}).get(REVISION_LABEL) for p in pods]
        updated = revisions.count(revision)
        previous = stored.get("status") or {}
        current_revision = (
            revision if updated == len(pods) else previous.get("currentRevision", revision)
        )
        ready = sum(1 for pod in pods if _is_running_and_ready(pod))
        # The fields in the API's order; the omitempty ones left out when zero, as on the wire.
        status: dict[str, Any] = {}
        if "generation" in stored["metadata"]:
            status["observedGeneration"] = stored["metadata"]["generation"]
        status["replicas"] = len(pods)
        optional = {
            "readyReplicas": ready,
            "currentReplicas": revisions.count(current_revision),
            "updatedReplicas": updated,
        }
        status.update((field, value) for field, value in optional.items() if value)
        status["currentRevision"] = current_revision
        status["updateRevision"] = revision
        status["collisionCount"] = 0
        status["availableReplicas"] = ready
        if status == previous:
            return
        stored["status"] = status
        path = _path(STATEFUL_SETS, metadata["namespace"], metadata["name"], "status")
        self._controller.ok("PUT", path, stored)

    def _refresh_owner(self, pod: dict[str, Any]) -> None:
        owner = _controller_of(pod)
        if owner is None or owner.get("kind") != STATEFUL_SETS.kind:
            return
        stateful_set = self.store.get(STATEFUL_SETS, pod["metadata"]["namespace"], owner["name"])
        if stateful_set is not None and stateful_set["metadata"]["uid"] == owner.get("uid"):
            self._write_set_status(stateful_set)

    # The scheduler and the kubelet.

    def set_pod_running(
        self, namespace: str, name: str, *, ready: bool, node: str
    ) -> dict[str, Any]:
        with self.store.lock:
            pod = self._bind(self._pod(namespace, name), node)
            old = pod.get("status") or {}
            timestamp = now()
            statuses, started = [], []
            for container in pod["spec"].get("containers") or []:
                previous = _container_status(old, container["name"])
                running = (previous.get("state") or {}).get("running")
                if not running:
                    running = {"startedAt": timestamp}
                    started.append(container["name"])
                restarts = int(previous.get("restartCount") or 0)
                statuses.append(
                    {
                        "name": container["name"],
                        "state": {"running": running},
                        "lastState": previous.get("lastState") or {},
                        "ready": ready,
                        "restartCount": restarts,
                        "image": container.get("image", ""),
                        "imageID": _image_id(container.get("image", "")),
                        "containerID": _container_id(pod, container["name"], restarts),
                        "started": True,
                    }
                )
            unready = [] if ready else [status["name"] for status in statuses]
            stored = self._write_pod_status(
                self._kubelet, pod, self._kubelet_status(pod, "Running", unready, statuses)
            )
            for container_name in started:
                self._record(
                    stored,
                    component=KUBELET,
                    type="Normal",
                    reason="Started",
                    message=f"Started container {container_name}",
                    field_path=f"spec.containers{{{container_name}}}",
                )
            self._refresh_owner(stored)
            return stored

    def set_pod_unschedulable(self, namespace: str, name: str, *, message: str) -> dict[str, Any]:
        with self.store.lock:
            pod = self._pod(namespace, name)
            node = pod["spec"].get("nodeName")
            if node:
                raise ValueError(
                    f'pod {namespace}/{name} is already bound to node "{node}": a scheduled pod '
                    "does not become unschedulable (delete it and reconcile instead)"
                )
            conditions = [("PodScheduled", False, ("Unschedulable", message))]
            status = {
                "phase": "Pending",
                "conditions": _conditions(pod.get("status") or {}, conditions, now()),
            }
            stored = self._write_pod_status(self._scheduler, pod, status)
            self._record_series(
                stored,
                type="Warning",
                reason="FailedScheduling",
                message=message,
                action="Scheduling",
            )
            self._refresh_owner(stored)
            return stored

    def set_pod_waiting(
        self,
        namespace: str,
        name: str,
        *,
        reason: str,
        message: str,
        phase: str,
        restart_count: int,
        node: str,
    ) -> dict[str, Any]:
        with self.store.lock:
            pod = self._bind(self._pod(namespace, name), node)
            timestamp = now()
            waiting = {
                key: value for key, value in (("reason", reason), ("message", message)) if value
            }
            statuses = []
            for container in pod["spec"].get("containers") or []:
                status: dict[str, Any] = {
                    "name": container["name"],
                    "state": {"waiting": waiting},
                    "lastState": {},
                    "ready": False,
                    "restartCount": restart_count,
                    "image": container.get("image", ""),
                    "imageID": "",
                }
                if restart_count > 0:
                    last = _container_id(pod, container["name"], restart_count - 1)
                    status["lastState"] = {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "startedAt": timestamp,
                            "finishedAt": timestamp,
                            "containerID": last,
                        }
                    }
                    status["imageID"] = _image_id(container.get("image", ""))
                    status["containerID"] = last
                status["started"] = False
                statuses.append(status)
            unready = [status["name"] for status in statuses]
            stored = self._write_pod_status(
                self._kubelet, pod, self._kubelet_status(pod, phase, unready, statuses)
            )
            if reason not in STARTING_REASONS:
                for container_name in unready:
                    self._record(
                        stored,
                        component=KUBELET,
                        type="Warning",
                        reason="Failed" if reason in IMAGE_PULL_REASONS else "BackOff",
                        message=message,
                        field_path=f"spec.containers{{{container_name}}}",
                    )
            self._refresh_owner(stored)
            return stored

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        pod = self.store.get(PODS, namespace, name)
        if pod is None:
            raise LookupError(f'pods "{name}" not found in namespace "{namespace}"')
        return copy.deepcopy(pod)

    def _bind(self, pod: dict[str, Any], node: str) -> dict[str, Any]:
        """The pod bound to `node`, as the scheduler binds it (a pod never changes node)."""
        metadata = pod["metadata"]
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            if bound != node:
                raise ValueError(
                    f'pod {metadata["namespace"]}/{metadata["name"]} is bound to node "{bound}", '
                    f'not "{node}": a pod never moves to another node'
                )
            return pod
        stored = self._scheduler.ok(
            "PATCH",
            _path(PODS, metadata["namespace"], metadata["name"]),
            {"spec": {"nodeName": node}},
            content_type=MERGE_PATCH,
        )
        self._record_series(
            stored,
            type="Normal",
            reason="Scheduled",
            message=f"Successfully assigned {metadata['namespace']}/{metadata['name']} to {node}",
            action="Binding",
        )
        return stored

    def _kubelet_status(
        self,
        pod: dict[str, Any],
        phase: str,
        unready: list[str],
        container_statuses: list[dict[str, Any]],
    ) -> dict[str, Any]:
        old = pod.get("status") or {}
        timestamp = now()
        # Go prints the unready containers' names as a slice: `[main sidecar]`.
        not_ready = ("ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        conditions = [
            ("PodReadyToStartContainers", True, None),
            ("Initialized", True, None),
            ("Ready", not unready, not_ready if unready else None),
            ("ContainersReady", not unready, not_ready if unready else None),
            ("PodScheduled", True, None),
        ]
        host_ip = self._host_ip(pod["spec"]["nodeName"])
        pod_ip = self._pod_ip(pod)
        return {
            "phase": phase,
            "conditions": _conditions(old, conditions, timestamp),
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": old.get("startTime") or timestamp,
            "containerStatuses": container_statuses,
        }

    def _write_pod_status(
        self, component: _Component, pod: dict[str, Any], status: dict[str, Any]
    ) -> dict[str, Any]:
        metadata = pod["metadata"]
        body = copy.deepcopy(pod)
        body["status"] = status
        return component.ok(
            "PUT", _path(PODS, metadata["namespace"], metadata["name"], "status"), body
        )

    def _host_ip(self, node: str) -> str:
        return self._host_ips.setdefault(node, f"10.0.0.{len(self._host_ips) + 10}")

    def _pod_ip(self, pod: dict[str, Any]) -> str:
        existing = (pod.get("status") or {}).get("podIP")
        if existing:
            return str(existing)
        count = len(self._pod_ips)
        return self._pod_ips.setdefault(
            (pod["metadata"]["namespace"], pod["metadata"]["uid"]),
            f"10.244.{count // 250}.{count % 250 + 2}",
        )

    # Events.

    def add_event(
        self,
        namespace: str,
        *,
        kind: str,
        name: str,
        reason: str,
        message: str,
        type: str,  # noqa: A002 - the Event's field
        component: str,
    ) -> dict[str, Any]:
        with self.store.lock:
            try:
                rt: ResourceType | None = resource_for_kind_name(kind)
            except KeyError:
                rt = None
            obj = self.store.get(rt, namespace, name) if rt is not None else None
            if obj is not None:
                return self._record(
                    obj, component=component, type=type, reason=reason, message=message
                )
            involved: dict[str, Any] = {"kind": kind}
            if rt is None or rt.namespaced:
                involved["namespace"] = namespace
            involved["name"] = name
            if rt is not None:
                involved["apiVersion"] = rt.api_version
            return self._post_legacy_event(
                namespace, involved, component=component, type=type, reason=reason, message=message
            )

    def _record(
        self,
        obj: dict[str, Any],
        *,
        component: str,
        type: str,  # noqa: A002 - the Event's field
        reason: str,
        message: str,
        field_path: str = "",
    ) -> dict[str, Any]:
        """An event about `obj`, from the legacy recorder the controllers and the kubelet use."""
        host = ""
        if component == KUBELET and obj.get("kind") == PODS.kind:
            host = str((obj.get("spec") or {}).get("nodeName") or "")
        return self._post_legacy_event(
            obj["metadata"].get("namespace") or "default",
            _reference(obj, field_path),
            component=component,
            host=host,
            type=type,
            reason=reason,
            message=message,
        )

    def _post_legacy_event(
        self,
        namespace: str,
        involved: dict[str, Any],
        *,
        component: str,
        type: str,  # noqa: A002 - the Event's field
        reason: str,
        message: str,
        host: str = "",
    ) -> dict[str, Any]:
        timestamp = now()
        source = {"component": component, **({"host": host} if host else {})}
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self._event_name(involved["name"]), "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
            "type": type,
            "reportingComponent": component,
            "reportingInstance": host,
        }
        # The process that sends it: the controllers run in kube-controller-manager.
        sender = {CONTROLLER: self._controller, KUBELET: self._kubelet}.get(component) or (
            _Component(self._api, component)
        )
        # The recorder's correlator: an identical event counts up instead of repeating.
        for _, stored in self.store.find(EVENTS, namespace):
            if _legacy_key(stored) == _legacy_key(event):
                patch = {"count": int(stored.get("count") or 1) + 1, "lastTimestamp": timestamp}
                path = _path(EVENTS, namespace, stored["metadata"]["name"])
                return sender.ok("PATCH", path, patch, content_type=MERGE_PATCH)
        return sender.ok("POST", _path(EVENTS, namespace), event)

    def _record_series(
        self,
        obj: dict[str, Any],
        *,
        type: str,  # noqa: A002 - the Event's field
        reason: str,
        message: str,
        action: str,
    ) -> dict[str, Any]:
        """An event from the scheduler, which records through events.k8s.io/v1.

        Read through core/v1 such an event has eventTime, action and reportingComponent, an
        empty source and no firstTimestamp, lastTimestamp or count; a repeat of it counts up
        `series` instead.
        """
        namespace = obj["metadata"]["namespace"]
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": self._event_name(obj["metadata"]["name"]), "namespace": namespace},
            "involvedObject": _reference(obj),
            "reason": reason,
            "message": message,
            "source": {},
            "type": type,
            "eventTime": _micro_now(),
            "action": action,
            "reportingComponent": SCHEDULER,
            "reportingInstance": SCHEDULER_INSTANCE,
        }
        for _, stored in self.store.find(EVENTS, namespace):
            if _series_key(stored) == _series_key(event):
                count = int((stored.get("series") or {}).get("count") or 1) + 1
                patch = {"series": {"count": count, "lastObservedTime": _micro_now()}}
                path = _path(EVENTS, namespace, stored["metadata"]["name"])
                return self._scheduler.ok("PATCH", path, patch, content_type=MERGE_PATCH)
        return self._scheduler.ok("POST", _path(EVENTS, namespace), event)

    def _event_name(self, name: str) -> str:
        # The recorder's `<object>.<UnixNano in hex>`, kept unique within a nanosecond.
        self._last_event_time = max(time.time_ns(), self._last_event_time + 1)
        return f"{name}.{self._last_event_time:x}"


def _reference(obj: dict[str, Any], field_path: str = "") -> dict[str, Any]:
    """An ObjectReference to a stored object, as client-go's GetReference makes it."""
    metadata = obj["metadata"]
    reference: dict[str, Any] = {"kind": obj["kind"]}
    if metadata.get("namespace"):
        reference["namespace"] = metadata["namespace"]
    reference["name"] = metadata["name"]
    reference["uid"] = metadata.get("uid")
    reference["apiVersion"] = obj["apiVersion"]
    reference["resourceVersion"] = metadata.get("resourceVersion")
    if field_path:
        reference["fieldPath"] = field_path
    return reference


def _involved_key(event: dict[str, Any]) -> tuple[str, ...]:
    involved = event.get("involvedObject") or {}
    return tuple(
        str(involved.get(field) or "")
        for field in ("kind", "namespace", "name", "fieldPath", "uid", "apiVersion")
    )


def _legacy_key(event: dict[str, Any]) -> tuple[str, ...]:
    """What client-go's EventCorrelator compares to find a repeat (getEventKey)."""
    if event.get("eventTime"):
        return ()
    source = event.get("source") or {}
    return (
        str(source.get("component") or ""),
        str(source.get("host") or ""),
        *_involved_key(event),
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        str(event.get("message") or ""),
    )


def _series_key(event: dict[str, Any]) -> tuple[str, ...]:
    """What the events.k8s.io broadcaster compares to find a repeat (getKey)."""
    if not event.get("eventTime"):
        return ()
    return (
        *_involved_key(event),
        str(event.get("action") or ""),
        str(event.get("reason") or ""),
        str(event.get("reportingComponent") or ""),
        str(event.get("reportingInstance") or ""),
        str(event.get("type") or ""),
        str(event.get("message") or ""),
    )


def _conditions(
    old_status: dict[str, Any],
    wanted: Sequence[tuple[str, bool, tuple[str, str] | None]],
    timestamp: str,
) -> list[dict[str, Any]]:
    """Pod conditions; one keeps its lastTransitionTime while its status does not change."""
    conditions = []
    for kind, true, why in wanted:
        value = "True" if true else "False"
        previous = _condition(old_status, kind)
        condition: dict[str, Any] = {
            "type": kind,
            "status": value,
            "lastProbeTime": None,
            "lastTransitionTime": (
                previous.get("lastTransitionTime")
                if previous.get("status") == value and previous.get("lastTransitionTime")
                else timestamp
            ),
        }
        if why is not None:
            condition["reason"], condition["message"] = why
        conditions.append(condition)
    return conditions


def _container_status(status: dict[str, Any], name: str) -> dict[str, Any]:
    for container in status.get("containerStatuses") or []:
        if container.get("name") == name:
            return dict(container)
    return {}


def _image_id(image: str) -> str:
    repository = image.split("@", maxsplit=1)[0]
    if ":" in repository.rsplit("/", 1)[-1]:
        repository = repository.rsplit(":", 1)[0]
    return f"{repository}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _container_id(pod: dict[str, Any], container: str, restart: int) -> str:
    seed = f"{pod['metadata']['uid']}/{container}/{restart}"
    return f"containerd://{hashlib.sha256(seed.encode()).hexdigest()}"
