"""The Kubernetes API server emulator, driven through the real `kubernetes` client over HTTP.

Typed answers are read through `.to_dict()` (snake_case keys); answers of the dynamic client
and of the emulator's store are the wire's camelCase dicts.
"""

import http.client
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any

import kubernetes_validate.utils
import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError

from tests.kubeapi import fixtures
from tests.kubeapi.faults import WRITE_METHODS
from tests.kubeapi.resources import KUBERNETES_VERSION, RESOURCE_TYPES
from tests.kubeapi.server import KubeApiEmulator

# The fixture, imported so that this module runs on its own. An assignment rather than
# `from ... import kube_api`: the tests' parameters of that name would redefine an import.
kube_api = fixtures.kube_api

RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
GPU = "nvidia.com/gpu"


# Clients, configured from the kubeconfig the emulator writes.


def make_client(kube_api: KubeApiEmulator, tmp_path, *, retries: Any = None) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(
        config_file=str(kube_api.kubeconfig(tmp_path / "kubeconfig")),
        client_configuration=configuration,
        persist_config=False,
    )
    configuration.retries = retries
    return client.ApiClient(configuration)


@pytest.fixture
def api_client(kube_api: KubeApiEmulator, tmp_path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(kube_api.kubeconfig(tmp_path / "kc")))
    yield api
    api.close()


@pytest.fixture
def dyn(api_client: client.ApiClient, tmp_path) -> DynamicClient:
    # Discovery is cached in a file; one per test keeps each test's discovery on the wire.
    return DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def raw(
    kube_api: KubeApiEmulator,
    method: str,
    path: str,
    body: str | None = None,
    headers: dict[str, str] | None = None,
    *,
    authorization: str | None = "",
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request as it goes on the wire: status, headers and body of the answer.

    `authorization` is the header to send: "" for the emulator's token, None for none.
    """
    port = int(kube_api.url.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    sent = dict(headers or {})
    if authorization is not None:
        sent["Authorization"] = authorization or f"Bearer {kube_api.token}"
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def status_of(error: ApiException | DynamicApiError) -> dict[str, Any]:
    """The Status body of a refusal."""
    body = error.body
    return dict(json.loads(body.decode() if isinstance(body, bytes) else str(body)))


# Manifests: plain dicts for the dynamic client and the store, typed models for typed APIs.


def typed[M](from_dict: Callable[[dict[str, Any]], M | None], manifest: dict[str, Any]) -> M:
    model = from_dict(manifest)
    assert model is not None
    return model


def config_map(
    name: str, data: dict[str, str], namespace: str = "team", **metadata: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "data": data,
    }


def cm(name: str, data: dict[str, str], namespace: str = "team", **metadata: Any) -> Any:
    return typed(client.V1ConfigMap.from_dict, config_map(name, data, namespace, **metadata))


def pod_manifest(
    name: str,
    namespace: str = "team",
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "busybox", "resources": resources}]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def pod(name: str, namespace: str = "team", **kwargs: Any) -> client.V1Pod:
    return typed(client.V1Pod.from_dict, pod_manifest(name, namespace, **kwargs))


def quota(name: str, hard: dict[str, str], namespace: str = "team") -> client.V1ResourceQuota:
    manifest = {"metadata": {"name": name, "namespace": namespace}, "spec": {"hard": hard}}
    return typed(client.V1ResourceQuota.from_dict, manifest)


def ns(name: str, labels: dict[str, str] | None = None) -> client.V1Namespace:
    return client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))


def names(listed: Any) -> list[str]:
    """Names in a typed list answer."""
    return [item["metadata"]["name"] for item in listed.to_dict()["items"]]


def apply(
    dyn: DynamicClient, manifest: dict[str, Any], manager: str = "portal", **kwargs: Any
) -> Any:
    """Server-side apply through the dynamic client; the raw HTTP response."""
    resource = dyn.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
    return dyn.server_side_apply(
        resource, body=manifest, field_manager=manager, serialize=False, **kwargs
    )


# 1. Discovery.


def test_version_reports_the_emulated_kubernetes_version(dyn: DynamicClient) -> None:
    assert dyn.version["kubernetes"]["gitVersion"] == f"v{KUBERNETES_VERSION}"
    assert dyn.version["kubernetes"]["minor"] == KUBERNETES_VERSION.split(".")[1]


def test_discovery_documents_have_the_api_server_shapes(kube_api: KubeApiEmulator) -> None:
    def get(path: str) -> dict[str, Any]:
        status, headers, body = raw(kube_api, "GET", path, headers={"Accept": "application/json"})
        assert (status, headers["Content-Type"]) == (200, "application/json")
        return dict(json.loads(body))

    assert get("/api")["kind"] == "APIVersions"
    assert get("/api")["versions"] == ["v1"]
    groups = get("/apis")
    assert groups["kind"] == "APIGroupList"
    assert [group["name"] for group in groups["groups"]] == [
        "apps",
        "networking.k8s.io",
        "rbac.authorization.k8s.io",
    ]
    assert get("/apis/apps")["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
    core_resources = {r["name"]: r for r in get("/api/v1")["resources"]}
    assert core_resources["namespaces"]["namespaced"] is False
    assert core_resources["nodes"]["namespaced"] is False
    assert core_resources["pods"]["kind"] == "Pod"
    assert core_resources["pods/log"]["verbs"] == ["get"]
    apps = get("/apis/apps/v1")
    assert (apps["kind"], apps["groupVersion"]) == ("APIResourceList", "apps/v1")
    assert {r["name"] for r in apps["resources"]} >= {"deployments", "statefulsets"}
    assert raw(kube_api, "GET", "/apis/batch/v1")[0] == 404


def test_dynamic_client_resolves_every_served_kind(dyn: DynamicClient) -> None:
    for rt in RESOURCE_TYPES:
        resource = dyn.resources.get(api_version=rt.api_version, kind=rt.kind)
        assert (resource.name, resource.namespaced) == (rt.plural, rt.namespaced)
    cluster_scoped = {rt.kind for rt in RESOURCE_TYPES if not rt.namespaced}
    assert cluster_scoped == {"Namespace", "Node", "ClusterRole", "ClusterRoleBinding"}


def test_discovery_answers_json_to_the_clients_accept_header(kube_api: KubeApiEmulator) -> None:
    # The v37 client's discovery sends `Accept: application/json`, never aggregated discovery.
    _, headers, _ = raw(kube_api, "GET", "/api/v1", headers={"Accept": "application/json"})
    assert headers["Content-Type"] == "application/json"
    status, headers, body = raw(kube_api, "GET", "/version", headers={"Accept": "application/yaml"})
    assert (status, headers["Content-Type"]) == (200, "application/yaml")
    assert b"gitVersion: v" in body
    protobuf = {"Accept": "application/vnd.kubernetes.protobuf"}
    assert raw(kube_api, "GET", "/api/v1", headers=protobuf)[0] == 406


# 2. Create, get, list, replace, delete.


def test_create_answers_201_with_server_filled_metadata(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespace(ns("team"))
    _, status, _ = core.create_namespaced_config_map_with_http_info("team", cm("settings", {}))
    assert status == 201
    _, _, body = raw(kube_api, "GET", "/api/v1/namespaces/team/configmaps/settings")
    live = json.loads(body)
    metadata = live["metadata"]
    assert (live["apiVersion"], live["kind"]) == ("v1", "ConfigMap")
    assert metadata["namespace"] == "team"
    assert uuid.UUID(metadata["uid"]).version == 4
    assert metadata["resourceVersion"].isdigit()
    assert RFC3339.fullmatch(metadata["creationTimestamp"])


def test_create_of_existing_object_answers_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespace(ns("team"))
    core.create_namespaced_config_map("team", cm("settings", {}))
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_config_map("team", cm("settings", {}))
    assert status_of(raised.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "settings" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "settings", "kind": "configmaps"},
        "code": 409,
    }


def test_get_of_missing_object_answers_404_status(dyn: DynamicClient) -> None:
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    with pytest.raises(DynamicApiError) as raised:
        deployments.get(name="web", namespace="default")
    assert raised.value.status == 404
    assert status_of(raised.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'deployments.apps "web" not found',
        "reason": "NotFound",
        "details": {"name": "web", "group": "apps", "kind": "deployments"},
        "code": 404,
    }


def test_list_has_list_kind_and_resource_version(dyn: DynamicClient) -> None:
    namespaces = dyn.resources.get(api_version="v1", kind="Namespace")
    created = namespaces.create(body={"metadata": {"name": "team"}})
    listed = json.loads(namespaces.get(serialize=False).data)
    assert (listed["kind"], listed["apiVersion"]) == ("NamespaceList", "v1")
    assert listed["metadata"]["resourceVersion"] == created.metadata.resourceVersion
    assert [item["metadata"]["name"] for item in listed["items"]] == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
        "team",
    ]
    # Items of a built-in list carry no apiVersion and kind, as on a real server.
    assert "kind" not in listed["items"][0]


def test_list_across_all_namespaces(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, dyn: DynamicClient
) -> None:
    for name in ("a", "b"):
        core.create_namespace(ns(name))
        core.create_namespaced_pod(name, pod(f"pod-{name}", name))
    everywhere = core.list_pod_for_all_namespaces().to_dict()["items"]
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in everywhere] == [
        ("a", "pod-a"),
        ("b", "pod-b"),
    ]
    assert kube_api.requests[-1].path == "/api/v1/pods"
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    assert [p.metadata.name for p in pods.get(namespace="b").items] == ["pod-b"]
    assert kube_api.requests[-1].path == "/api/v1/namespaces/b/pods"
    assert len(pods.get().items) == 2


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-1", "web-2"]),
        ("app==web", ["web-1", "web-2"]),
        ("app!=web", ["db", "plain"]),
        ("tier", ["db", "web-1"]),
        ("!tier", ["plain", "web-2"]),
        ("app in (db,cache)", ["db"]),
        ("app notin (web)", ["db", "plain"]),
        ("app=web,tier", ["web-1"]),
        ("app in (web, db),tier=front", ["web-1"]),
        ("", ["db", "plain", "web-1", "web-2"]),
    ],
)
def test_label_selector_operators(
    core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    core.create_namespace(ns("team"))
    for name, labels in (
        ("web-1", {"app": "web", "tier": "front"}),
        ("web-2", {"app": "web"}),
        ("db", {"app": "db", "tier": "back"}),
        ("plain", {}),
    ):
        core.create_namespaced_config_map("team", cm(name, {}, labels=labels))
    assert names(core.list_namespaced_config_map("team", label_selector=selector)) == expected


def test_malformed_label_selector_answers_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.list_namespaced_config_map("default", label_selector="app in web")
    assert raised.value.status == 400
    assert status_of(raised.value)["reason"] == "BadRequest"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p1", ["p1"]),
        ("metadata.name!=p1", ["p2", "p3"]),
        ("metadata.namespace=other", ["p3"]),
        ("spec.nodeName=gpu-1", ["p1"]),
        ("spec.nodeName==gpu-1", ["p1"]),
        ("spec.nodeName=", ["p3"]),
        ("status.phase=Running", ["p1", "p2"]),
        ("status.phase!=Running,metadata.namespace!=team", ["p3"]),
    ],
)
def test_field_selectors(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, selector: str, expected: list[str]
) -> None:
    for name, namespace, node, phase in (
        ("p1", "team", "gpu-1", "Running"),
        ("p2", "team", "gpu-2", "Running"),
        ("p3", "other", None, "Pending"),
    ):
        manifest = pod_manifest(name, namespace, node=node)
        manifest["status"] = {"phase": phase}
        kube_api.put_object(manifest)
    listed = core.list_pod_for_all_namespaces(field_selector=selector)
    assert sorted(names(listed)) == expected


def test_unsupported_field_selector_answers_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.list_namespaced_config_map("default", field_selector="data.key=x")
    assert raised.value.status == 400
    assert status_of(raised.value)["message"] == "field label not supported: data.key"


def test_list_pages_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for index in range(5):
        core.create_namespaced_config_map("default", cm(f"cm-{index}", {}, "default"))
    first = core.list_namespaced_config_map("default", limit=2).to_dict()
    assert [i["metadata"]["name"] for i in first["items"]] == ["cm-0", "cm-1"]
    assert first["metadata"]["remaining_item_count"] == 3
    token = first["metadata"]["_continue"]
    second = core.list_namespaced_config_map("default", limit=2, _continue=token).to_dict()
    assert [i["metadata"]["name"] for i in second["items"]] == ["cm-2", "cm-3"]
    token = second["metadata"]["_continue"]
    last = core.list_namespaced_config_map("default", limit=2, _continue=token).to_dict()
    assert [i["metadata"]["name"] for i in last["items"]] == ["cm-4"]
    assert last["metadata"]["_continue"] is None


def test_replace_answers_200_and_bumps_resource_version(core: client.CoreV1Api) -> None:
    core.create_namespace(ns("team"))
    created = core.create_namespaced_config_map("team", cm("settings", {"a": "1"})).to_dict()
    version = created["metadata"]["resource_version"]
    body = cm("settings", {"a": "2"}, resourceVersion=version)
    answer, status, _ = core.replace_namespaced_config_map_with_http_info("settings", "team", body)
    replaced = answer.to_dict()
    assert status == 200
    assert replaced["data"] == {"a": "2"}
    assert int(replaced["metadata"]["resource_version"]) > int(version)
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]


def test_replace_with_stale_resource_version_answers_409_conflict(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespace(ns("team"))
    created = core.create_namespaced_config_map("team", cm("settings", {"a": "1"})).to_dict()
    stale = created["metadata"]["resource_version"]
    core.replace_namespaced_config_map("settings", "team", cm("settings", {"a": "2"}))
    with pytest.raises(ApiException) as raised:
        core.replace_namespaced_config_map(
            "settings", "team", cm("settings", {"a": "3"}, resourceVersion=stale)
        )
    assert raised.value.status == 409
    assert status_of(raised.value)["reason"] == "Conflict"
    assert status_of(raised.value)["message"].startswith(
        'Operation cannot be fulfilled on configmaps "settings": the object has been modified'
    )
    live = kube_api.get_object("v1", "ConfigMap", "settings", "team")
    assert live is not None
    assert live["data"] == {"a": "2"}


def test_replace_of_missing_object_answers_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.replace_namespaced_config_map("ghost", "default", cm("ghost", {}, "default"))
    assert raised.value.status == 404


def test_delete_answers_a_status_or_the_object_and_404_when_absent(
    core: client.CoreV1Api,
) -> None:
    core.create_namespace(ns("team"))
    created = core.create_namespaced_config_map("team", cm("settings", {})).to_dict()
    deleted = core.delete_namespaced_config_map("settings", "team")
    assert isinstance(deleted, dict)
    assert deleted["status"] == "Success"
    uid = created["metadata"]["uid"]
    assert deleted["details"] == {"name": "settings", "kind": "configmaps", "uid": uid}
    core.create_namespaced_pod("team", pod("worker"))
    assert core.delete_namespaced_pod("worker", "team").to_dict()["metadata"]["name"] == "worker"
    with pytest.raises(ApiException) as raised:
        core.delete_namespaced_config_map("settings", "team")
    assert raised.value.status == 404


def test_typed_apps_rbac_and_networking_clients_round_trip(
    api_client: client.ApiClient,
) -> None:
    client.CoreV1Api(api_client).create_namespace(ns("team"))
    apps = client.AppsV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    networking = client.NetworkingV1Api(api_client)
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
    }
    selector = {"matchLabels": {"app": "web"}}
    deployment = {"metadata": {"name": "web"}, "spec": {"selector": selector, "template": template}}
    apps.create_namespaced_deployment("team", typed(client.V1Deployment.from_dict, deployment))
    stateful_set = {
        "metadata": {"name": "db"},
        "spec": {"selector": selector, "serviceName": "db", "template": template},
    }
    apps.create_namespaced_stateful_set("team", typed(client.V1StatefulSet.from_dict, stateful_set))
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    role = {"metadata": {"name": "reader"}, "rules": [rule]}
    rbac.create_namespaced_role("team", typed(client.V1Role.from_dict, role))
    cluster_role = {"metadata": {"name": "gpu:viewer"}, "rules": []}
    rbac.create_cluster_role(typed(client.V1ClusterRole.from_dict, cluster_role))
    binding = {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}],
    }
    rbac.create_namespaced_role_binding("team", typed(client.V1RoleBinding.from_dict, binding))
    policy = {"metadata": {"name": "deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    networking.create_namespaced_network_policy(
        "team", typed(client.V1NetworkPolicy.from_dict, policy)
    )

    web = apps.read_namespaced_deployment("web", "team").to_dict()
    assert web["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx"
    assert names(apps.list_namespaced_stateful_set("team")) == ["db"]
    read_binding = rbac.read_namespaced_role_binding("reader", "team").to_dict()
    assert read_binding["role_ref"]["name"] == "reader"
    assert names(rbac.list_cluster_role()) == ["gpu:viewer"]
    read_policy = networking.read_namespaced_network_policy("deny", "team").to_dict()
    assert read_policy["spec"]["policy_types"] == ["Ingress"]


# 3. Server-side apply.


def test_apply_creates_a_missing_object_with_201_and_records_the_manager(
    dyn: DynamicClient,
) -> None:
    response = apply(dyn, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    assert response.status == 201
    live = json.loads(response.data)
    [entry] = live["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("portal", "Apply", "v1")
    assert RFC3339.fullmatch(entry["time"])


def test_apply_removes_fields_the_manager_no_longer_applies(
    kube_api: KubeApiEmulator, dyn: DynamicClient
) -> None:
    apply(dyn, config_map("settings", {"a": "1", "b": "2"}, "default", labels={"x": "1", "y": "2"}))
    response = apply(dyn, config_map("settings", {"a": "1"}, "default", labels={"x": "1"}))
    assert response.status == 200
    live = kube_api.get_object("v1", "ConfigMap", "settings", "default")
    assert live is not None
    assert live["data"] == {"a": "1"}
    assert live["metadata"]["labels"] == {"x": "1"}


def test_apply_keeps_fields_set_by_other_writers(
    kube_api: KubeApiEmulator, dyn: DynamicClient
) -> None:
    config_maps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    apply(dyn, config_map("settings", {"a": "1", "b": "2"}, "default"))
    config_maps.patch(
        name="settings",
        namespace="default",
        body={"data": {"extra": "kept"}, "metadata": {"labels": {"by": "kubectl"}}},
        content_type="application/merge-patch+json",
        field_manager="kubectl",
    )
    apply(dyn, config_map("settings", {"a": "10"}, "default"))
    live = kube_api.get_object("v1", "ConfigMap", "settings", "default")
    assert live is not None
    assert live["data"] == {"a": "10", "extra": "kept"}
    assert live["metadata"]["labels"] == {"by": "kubectl"}
    managers = {(e["manager"], e["operation"]) for e in live["metadata"]["managedFields"]}
    assert managers == {("portal", "Apply"), ("kubectl", "Update")}


def test_apply_of_identical_object_keeps_resource_version(
    kube_api: KubeApiEmulator, dyn: DynamicClient
) -> None:
    manifest = config_map("settings", {"a": "1"}, "default", labels={"team": "vision"})
    first = json.loads(apply(dyn, manifest).data)
    again = apply(dyn, manifest)
    assert again.status == 200
    second = json.loads(again.data)
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["managedFields"] == first["metadata"]["managedFields"]
    assert kube_api.get_object("v1", "ConfigMap", "settings", "default") == second


def test_apply_without_field_manager_answers_422(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    with pytest.raises(ApiException) as raised:
        core.patch_namespaced_config_map(
            "settings",
            "default",
            config_map("settings", {}, "default"),
            _content_type="application/apply-patch+yaml",
        )
    assert raised.value.status == 422
    assert status_of(raised.value)["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: '
        "fieldManager: Required value: is required for apply patch"
    )
    assert kube_api.get_object("v1", "ConfigMap", "settings", "default") is None


def test_apply_accepts_a_yaml_body(kube_api: KubeApiEmulator) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: gpu\n"
    status, _, body = raw(
        kube_api,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/settings?fieldManager=portal&force=true",
        manifest,
        {"Content-Type": "application/apply-patch+yaml"},
    )
    assert status == 201
    assert json.loads(body)["data"] == {"mode": "gpu"}


def test_apply_conflicting_with_another_manager_answers_409_unless_forced(
    dyn: DynamicClient,
) -> None:
    apply(dyn, config_map("settings", {"a": "1"}, "default"), manager="kubectl")
    with pytest.raises(DynamicApiError) as raised:
        apply(dyn, config_map("settings", {"a": "2"}, "default"))
    assert raised.value.status == 409
    assert status_of(raised.value)["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.a'
    )
    forced = apply(dyn, config_map("settings", {"a": "2"}, "default"), force_conflicts=True)
    live = json.loads(forced.data)
    assert live["data"] == {"a": "2"}
    assert [e["manager"] for e in live["metadata"]["managedFields"]] == ["portal"]


# 4. Merge, strategic merge and JSON patches.


def test_merge_patch_sets_and_removes_fields(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("settings", {"a": "1", "b": "2"}, "default"))
    patched = core.patch_namespaced_config_map(
        "settings",
        "default",
        {"data": {"a": "10", "b": None, "c": "3"}},
        _content_type="application/merge-patch+json",
    )
    assert patched.to_dict()["data"] == {"a": "10", "c": "3"}


def test_strategic_merge_patch_merges_like_a_merge_patch(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map(
        "default", cm("settings", {"a": "1"}, "default", labels={"keep": "yes"})
    )
    # A dict body with no content type named goes out as a strategic merge patch.
    core.patch_namespaced_config_map("settings", "default", {"metadata": {"labels": {"new": "y"}}})
    assert kube_api.requests[-1].content_type == "application/strategic-merge-patch+json"
    live = core.read_namespaced_config_map("settings", "default").to_dict()
    assert live["metadata"]["labels"] == {"keep": "yes", "new": "y"}
    assert live["data"] == {"a": "1"}


def test_json_patch_adds_replaces_removes_and_tests(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("settings", {"a": "1", "b": "2"}, "default"))
    patched = core.patch_namespaced_config_map(
        "settings",
        "default",
        [
            {"op": "test", "path": "/data/a", "value": "1"},
            {"op": "replace", "path": "/data/a", "value": "10"},
            {"op": "remove", "path": "/data/b"},
            {"op": "add", "path": "/metadata/labels", "value": {"app": "web"}},
        ],
        _content_type="application/json-patch+json",
    ).to_dict()
    assert patched["data"] == {"a": "10"}
    assert patched["metadata"]["labels"] == {"app": "web"}


def test_failed_json_patch_test_answers_422_and_changes_nothing(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", cm("settings", {"a": "1"}, "default"))
    before = kube_api.get_object("v1", "ConfigMap", "settings", "default")
    with pytest.raises(ApiException) as raised:
        core.patch_namespaced_config_map(
            "settings",
            "default",
            [
                {"op": "replace", "path": "/data/a", "value": "2"},
                {"op": "test", "path": "/data/a", "value": "1"},
            ],
            _content_type="application/json-patch+json",
        )
    assert raised.value.status == 422
    assert status_of(raised.value)["message"] == "testing value /data/a failed: test failed"
    assert kube_api.get_object("v1", "ConfigMap", "settings", "default") == before


def test_patch_with_unknown_content_type_answers_415(kube_api: KubeApiEmulator) -> None:
    headers = {"Content-Type": "text/plain"}
    status, _, body = raw(kube_api, "PATCH", "/api/v1/namespaces/default", "{}", headers)
    assert status == 415
    assert json.loads(body)["reason"] == "UnsupportedMediaType"


# 5. Namespaces.


def test_writes_into_a_missing_namespace_answer_404_namespace_not_found(
    core: client.CoreV1Api, dyn: DynamicClient
) -> None:
    with pytest.raises(ApiException) as created:
        core.create_namespaced_config_map("ghost", cm("settings", {}, "ghost"))
    with pytest.raises(DynamicApiError) as applied:
        apply(dyn, config_map("settings", {}, "ghost"))
    for error in (created.value, applied.value):
        assert error.status == 404
        assert status_of(error)["message"] == 'namespaces "ghost" not found'
        assert status_of(error)["details"] == {"name": "ghost", "kind": "namespaces"}
    # A get names the object, as a real server does.
    with pytest.raises(ApiException) as read:
        core.read_namespaced_config_map("settings", "ghost")
    assert read.value.status == 404
    assert status_of(read.value)["message"] == 'configmaps "settings" not found'


def test_deleting_a_namespace_removes_everything_in_it(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespace(ns("team"))
    core.create_namespaced_config_map("team", cm("settings", {}))
    core.create_namespaced_pod("team", pod("worker"))
    core.create_namespaced_config_map("default", cm("other", {}, "default"))
    deleted = core.delete_namespace("team")
    assert isinstance(deleted, dict)
    assert deleted["status"]["phase"] == "Terminating"
    assert kube_api.objects(namespace="team") == []
    assert kube_api.get_object("v1", "Namespace", "team") is None
    assert [o["metadata"]["name"] for o in kube_api.objects("ConfigMap")] == ["other"]


def test_system_namespaces_cannot_be_deleted(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core.delete_namespace("kube-system")
    assert raised.value.status == 403
    assert status_of(raised.value)["message"] == (
        'namespaces "kube-system" is forbidden: this namespace may not be deleted'
    )


# 6. Server-maintained metadata.


def test_resource_version_is_a_global_counter_bumped_by_every_change(
    core: client.CoreV1Api,
) -> None:
    secret = typed(client.V1Secret.from_dict, {"metadata": {"name": "s"}})
    answers: list[Any] = [
        core.create_namespace(ns("team")),
        core.create_namespaced_config_map("team", cm("a", {})),
        core.create_namespaced_secret("team", secret),
        core.patch_namespaced_config_map("a", "team", {"data": {"k": "v"}}),
    ]
    versions = [int(answer.to_dict()["metadata"]["resource_version"]) for answer in answers]
    assert versions == sorted(set(versions))
    assert len(versions) == 4


def test_namespaces_get_the_metadata_name_label(core: client.CoreV1Api) -> None:
    created = core.create_namespace(ns("team", labels={"tenant": "vision"})).to_dict()
    assert created["metadata"]["labels"] == {
        "tenant": "vision",
        "kubernetes.io/metadata.name": "team",
    }
    assert created["status"]["phase"] == "Active"


# 7. Validation.


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        (
            "Namespace",
            "Team_A",
            (
                'Namespace "Team_A" is invalid: metadata.name: Invalid value: "Team_A": '
                "a lowercase RFC 1123 label"
            ),
        ),
        (
            "ConfigMap",
            "a..b",
            (
                'ConfigMap "a..b" is invalid: metadata.name: Invalid value: "a..b": '
                "a lowercase RFC 1123 subdomain"
            ),
        ),
        (
            "Service",
            "1-svc",
            'Service "1-svc" is invalid: metadata.name: Invalid value: "1-svc": a DNS-1035 label',
        ),
    ],
)
def test_invalid_names_answer_422(dyn: DynamicClient, kind: str, name: str, expected: str) -> None:
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}
    if kind == "Service":
        manifest["spec"] = {"ports": [{"port": 80}]}
    resource = dyn.resources.get(api_version="v1", kind=kind)
    with pytest.raises(DynamicApiError) as raised:
        resource.create(body=manifest, namespace=None if kind == "Namespace" else "default")
    status = status_of(raised.value)
    assert (raised.value.status, status["reason"], status["status"]) == (422, "Invalid", "Failure")
    assert status["message"].startswith(expected)
    assert status["details"]["causes"][0]["field"] == "metadata.name"


def test_invalid_label_answers_422(core: client.CoreV1Api) -> None:
    body = cm("ok", {}, "default", labels={"bad key!": "x"})
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_config_map("default", body)
    assert raised.value.status == 422
    assert 'metadata.labels: Invalid value: "bad key!"' in status_of(raised.value)["message"]


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
            'Pod "p" is invalid: spec.containers: Required value',
        ),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 1}},
            'ConfigMap "c" is invalid: data.n: Invalid value: 1:',
        ),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "colour": "red"},
            'ConfigMap "c" is invalid: colour: field not declared in schema',
        ),
        (
            pod_manifest("p", "default", limits={GPU: "0.5"}),
            (
                'Pod "p" is invalid: spec.containers[0].resources.limits[nvidia.com/gpu]: '
                'Invalid value: "0.5": must be an integer'
            ),
        ),
    ],
)
def test_schema_and_semantic_violations_answer_422(
    dyn: DynamicClient, manifest: dict[str, Any], expected: str
) -> None:
    resource = dyn.resources.get(api_version="v1", kind=manifest["kind"])
    with pytest.raises(DynamicApiError) as raised:
        resource.create(body=manifest, namespace="default")
    assert raised.value.status == 422
    assert status_of(raised.value)["message"].startswith(expected)


def test_status_is_stored_but_not_validated(kube_api: KubeApiEmulator, dyn: DynamicClient) -> None:
    manifest = pod_manifest("p", "default")
    manifest["status"] = {"phase": "Running", "notAStatusField": 1}
    dyn.resources.get(api_version="v1", kind="Pod").create(body=manifest, namespace="default")
    live = kube_api.get_object("v1", "Pod", "p", "default")
    assert live is not None
    assert live["status"] == {"phase": "Running", "notAStatusField": 1}


def test_validated_kubernetes_version_is_supported_by_kubernetes_validate() -> None:
    assert KUBERNETES_VERSION in kubernetes_validate.utils.all_versions()


# 8. ResourceQuota admission.


def test_pod_exceeding_gpu_quota_is_forbidden_with_the_api_server_message(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespace(ns("team"))
    core.create_namespaced_resource_quota("team", quota("tenant-quota", {f"requests.{GPU}": "1"}))
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod("team", pod("nb-1", requests={GPU: "2"}, limits={GPU: "2"}))
    assert raised.value.status == 403
    status = status_of(raised.value)
    assert status["reason"] == "Forbidden"
    assert status["message"] == (
        'pods "nb-1" is forbidden: exceeded quota: tenant-quota, requested: '
        "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, "
        "limited: requests.nvidia.com/gpu=1"
    )
    assert kube_api.objects("Pod", "team") == []


def test_limits_count_as_requests_for_extended_resources(core: client.CoreV1Api) -> None:
    core.create_namespace(ns("team"))
    mig = "nvidia.com/mig-1g.10gb"
    core.create_namespaced_resource_quota(
        "team", quota("gpu", {f"requests.{mig}": "2", "aliyun.com/gpu-mem": "16"})
    )
    core.create_namespaced_pod("team", pod("a", limits={mig: "2"}))
    with pytest.raises(ApiException) as slices:
        core.create_namespaced_pod("team", pod("b", limits={mig: "1"}))
    assert status_of(slices.value)["message"].endswith(
        f"requested: requests.{mig}=1, used: requests.{mig}=2, limited: requests.{mig}=2"
    )
    with pytest.raises(ApiException) as memory:
        core.create_namespaced_pod("team", pod("c", limits={"aliyun.com/gpu-mem": "20"}))
    assert status_of(memory.value)["message"].endswith(
        "requested: aliyun.com/gpu-mem=20, used: aliyun.com/gpu-mem=0, "
        "limited: aliyun.com/gpu-mem=16"
    )


def test_finished_pods_do_not_use_quota(kube_api: KubeApiEmulator, core: client.CoreV1Api) -> None:
    core.create_namespace(ns("team"))
    core.create_namespaced_resource_quota("team", quota("q", {f"requests.{GPU}": "1"}))
    core.create_namespaced_pod("team", pod("first", limits={GPU: "1"}))
    with pytest.raises(ApiException):
        core.create_namespaced_pod("team", pod("second", limits={GPU: "1"}))
    finished = kube_api.get_object("v1", "Pod", "first", "team")
    assert finished is not None
    finished["status"] = {"phase": "Succeeded"}
    kube_api.put_object(finished)
    created = core.create_namespaced_pod("team", pod("second", limits={GPU: "1"})).to_dict()
    assert created["metadata"]["name"] == "second"


@pytest.mark.parametrize(
    ("hard", "requests", "message"),
    [
        (
            {"requests.cpu": "1"},
            {"cpu": "1500m"},
            "requested: requests.cpu=1500m, used: requests.cpu=500m, limited: requests.cpu=1",
        ),
        ({"cpu": "1"}, {"cpu": "1"}, "requested: cpu=1, used: cpu=500m, limited: cpu=1"),
        (
            {"requests.memory": "1Gi"},
            {"memory": "1Gi"},
            (
                "requested: requests.memory=1Gi, used: requests.memory=512Mi, "
                "limited: requests.memory=1Gi"
            ),
        ),
        ({"pods": "1"}, {}, "requested: pods=1, used: pods=1, limited: pods=1"),
    ],
)
def test_cpu_memory_and_pod_count_quotas(
    core: client.CoreV1Api, hard: dict[str, str], requests: dict[str, str], message: str
) -> None:
    core.create_namespace(ns("team"))
    core.create_namespaced_resource_quota("team", quota("q", hard))
    core.create_namespaced_pod("team", pod("first", requests={"cpu": "500m", "memory": "512Mi"}))
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_pod("team", pod("second", requests=requests))
    assert raised.value.status == 403
    assert status_of(raised.value)["message"].endswith(message)


def test_quota_status_tracks_usage(core: client.CoreV1Api) -> None:
    core.create_namespace(ns("team"))
    hard = {f"requests.{GPU}": "4", "pods": "10", "requests.memory": "8Gi"}
    core.create_namespaced_resource_quota("team", quota("q", hard))
    core.create_namespaced_pod("team", pod("a", requests={"memory": "1Gi"}, limits={GPU: "2"}))
    status = core.read_namespaced_resource_quota("q", "team").to_dict()["status"]
    assert status["hard"] == hard
    assert status["used"] == {f"requests.{GPU}": "2", "pods": "1", "requests.memory": "1Gi"}
    core.delete_namespaced_pod("a", "team")
    status = core.read_namespaced_resource_quota("q", "team").to_dict()["status"]
    assert status["used"] == {f"requests.{GPU}": "0", "pods": "0", "requests.memory": "0"}


def test_apply_of_a_pod_is_admitted_against_quota(
    core: client.CoreV1Api, dyn: DynamicClient
) -> None:
    core.create_namespace(ns("team"))
    core.create_namespaced_resource_quota("team", quota("q", {f"requests.{GPU}": "1"}))
    with pytest.raises(DynamicApiError) as raised:
        apply(dyn, pod_manifest("nb-1", limits={GPU: "2"}))
    assert raised.value.status == 403
    message = status_of(raised.value)["message"]
    assert message.startswith('pods "nb-1" is forbidden: exceeded quota: q')
    assert apply(dyn, pod_manifest("nb-1", limits={GPU: "1"})).status == 201


# 9. Authentication.


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", "Basic YWRtaW46YWRtaW4="])
def test_requests_without_the_token_answer_401(
    kube_api: KubeApiEmulator, authorization: str | None
) -> None:
    status, _, body = raw(kube_api, "GET", "/api/v1/namespaces", authorization=authorization)
    assert status == 401
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }


# 10. Faults.


def statuses(kube_api: KubeApiEmulator, count: int) -> list[int]:
    return [raw(kube_api, "GET", "/api/v1/namespaces")[0] for _ in range(count)]


def test_error_rate_is_reproducible_with_a_seed_and_429_carries_retry_after(
    kube_api: KubeApiEmulator,
) -> None:
    kube_api.faults.error_rate(0.3, statuses=(500, 503, 429), seed=1)
    first = statuses(kube_api, 60)
    kube_api.faults.error_rate(0.3, statuses=(500, 503, 429), seed=1)
    assert statuses(kube_api, 60) == first
    assert set(first) == {200, 500, 503, 429}
    assert 8 <= sum(status != 200 for status in first) <= 30
    kube_api.faults.error_rate(1.0, statuses=(429,))
    status, headers, body = raw(kube_api, "GET", "/api/v1/namespaces")
    assert (status, headers["Retry-After"]) == (429, "1")
    assert json.loads(body)["reason"] == "TooManyRequests"


def test_retry_after_is_configurable(kube_api: KubeApiEmulator, tmp_path) -> None:
    kube_api.faults.fail_next(1, status=429, retry_after="7")
    # urllib3's default retries would wait out the Retry-After and ask again.
    with (
        make_client(kube_api, tmp_path, retries=False) as api,
        pytest.raises(ApiException) as raised,
    ):
        client.CoreV1Api(api).list_namespace()
    assert raised.value.status == 429
    assert raised.value.headers is not None
    assert raised.value.headers["Retry-After"] == "7"
    assert status_of(raised.value)["details"] == {"retryAfterSeconds": 7}


def test_fail_next_fails_only_the_given_methods(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    kube_api.faults.fail_next(2, status=503, methods=("POST",))
    core.list_namespace()
    for _ in range(2):
        with pytest.raises(ApiException) as raised:
            core.create_namespace(ns("team"))
        assert raised.value.status == 503
    core.create_namespace(ns("team"))
    assert [(r.method, r.status, r.fault) for r in kube_api.requests] == [
        ("GET", 200, False),
        ("POST", 503, True),
        ("POST", 503, True),
        ("POST", 201, False),
    ]


def test_slow_faults_delay_answers_of_the_given_methods(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    kube_api.faults.slow(0.4, methods=("POST",))
    started = time.monotonic()
    core.list_namespace()
    assert time.monotonic() - started < 0.3
    started = time.monotonic()
    core.create_namespace(ns("team"))
    assert time.monotonic() - started >= 0.4


def test_slow_write_lands_even_when_the_client_gives_up(
    kube_api: KubeApiEmulator, tmp_path
) -> None:
    kube_api.faults.slow(0.5)
    with (
        make_client(kube_api, tmp_path, retries=False) as api,
        pytest.raises(urllib3.exceptions.ReadTimeoutError),
    ):
        client.CoreV1Api(api).create_namespace(ns("team"), _request_timeout=0.1)
    deadline = time.monotonic() + 5
    while kube_api.get_object("v1", "Namespace", "team") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kube_api.get_object("v1", "Namespace", "team") is not None


def test_dropped_connections_close_without_an_answer(kube_api: KubeApiEmulator, tmp_path) -> None:
    kube_api.faults.drop_next(1)
    with make_client(kube_api, tmp_path, retries=False) as api:
        core = client.CoreV1Api(api)
        with pytest.raises(urllib3.exceptions.ProtocolError):
            core.list_namespace()
        assert len(names(core.list_namespace())) == 4
    assert [(r.status, r.fault) for r in kube_api.requests] == [(None, True), (200, False)]


def test_drop_rate_drops_a_seeded_share_of_requests(kube_api: KubeApiEmulator) -> None:
    kube_api.faults.drop_rate(0.5, seed=3)
    for _ in range(20):
        with suppress(http.client.RemoteDisconnected, ConnectionError):
            raw(kube_api, "GET", "/api/v1/namespaces")
    dropped = [r for r in kube_api.requests if r.status is None]
    assert 4 <= len(dropped) <= 16
    assert all(r.fault for r in dropped)


def test_faulted_writes_change_nothing(kube_api: KubeApiEmulator, core: client.CoreV1Api) -> None:
    core.create_namespace(ns("team"))
    before = kube_api.objects()
    kube_api.faults.fail_next(1, status=500)
    kube_api.faults.drop_next(1)
    with pytest.raises(ApiException):
        core.create_namespaced_config_map("team", cm("settings", {}))
    with pytest.raises(http.client.RemoteDisconnected):
        raw(kube_api, "DELETE", "/api/v1/namespaces/team")
    assert kube_api.objects() == before


def test_writes_only_restricts_faults_to_writes(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    kube_api.faults.writes_only()
    kube_api.faults.error_rate(1.0, statuses=(500,))
    assert names(core.list_namespace())
    with pytest.raises(ApiException) as raised:
        core.create_namespace(ns("team"))
    assert raised.value.status == 500
    assert {r.method for r in kube_api.requests if r.fault} <= WRITE_METHODS


def test_clearing_faults_restores_normal_answers(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    kube_api.faults.error_rate(1.0, statuses=(503,))
    kube_api.faults.drop_rate(1.0)
    kube_api.faults.fail_next(5)
    kube_api.faults.slow(2)
    kube_api.faults.clear()
    started = time.monotonic()
    core.create_namespace(ns("team"))
    assert time.monotonic() - started < 1
    assert not any(r.fault for r in kube_api.requests)


# 11. The request log.


def test_request_log_records_requests_in_order(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    core.create_namespace(ns("team"))
    core.list_namespaced_config_map("team", label_selector="app=web")
    core.patch_namespace("team", {"metadata": {"labels": {"a": "b"}}}, field_manager="portal")
    with pytest.raises(ApiException):
        core.delete_namespaced_config_map("ghost", "team")
    assert [(r.method, r.path, r.status, r.fault) for r in kube_api.requests] == [
        ("POST", "/api/v1/namespaces", 201, False),
        ("GET", "/api/v1/namespaces/team/configmaps", 200, False),
        ("PATCH", "/api/v1/namespaces/team", 200, False),
        ("DELETE", "/api/v1/namespaces/team/configmaps/ghost", 404, False),
    ]
    assert kube_api.requests[1].query == {"labelSelector": "app=web"}
    assert kube_api.requests[2].query == {"fieldManager": "portal"}
    assert kube_api.requests[2].content_type == "application/strategic-merge-patch+json"
    assert [r.method for r in kube_api.writes()] == ["POST", "PATCH", "DELETE"]
    kube_api.clear_log()
    assert kube_api.requests == []


# 12. Direct store access.


def test_store_helpers_work_without_http(kube_api: KubeApiEmulator) -> None:
    stored = kube_api.put_object(config_map("settings", {"a": "1"}, "default"))
    assert stored["metadata"]["resourceVersion"].isdigit()
    assert uuid.UUID(stored["metadata"]["uid"])
    replaced = kube_api.put_object(config_map("settings", {"a": "2"}, "default"))
    assert replaced["metadata"]["uid"] == stored["metadata"]["uid"]
    assert kube_api.get_object("v1", "ConfigMap", "settings", "default") == replaced
    assert [o["metadata"]["name"] for o in kube_api.objects("ConfigMap", "default")] == ["settings"]
    node = kube_api.add_node("gpu-1", labels={"pool": "a100"}, allocatable={GPU: "8"})
    assert node["status"]["allocatable"] == node["status"]["capacity"] == {GPU: "8"}
    assert [o["metadata"]["name"] for o in kube_api.objects("Node")] == ["gpu-1"]
    assert kube_api.delete_object("v1", "ConfigMap", "settings", "default") is True
    assert kube_api.delete_object("v1", "ConfigMap", "settings", "default") is False
    assert kube_api.get_object("v1", "ConfigMap", "settings", "default") is None
    assert kube_api.requests == []


def test_put_object_bypasses_validation_and_faults(
    kube_api: KubeApiEmulator, core: client.CoreV1Api
) -> None:
    kube_api.faults.error_rate(1.0, statuses=(500,))
    kube_api.put_object({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}})
    kube_api.faults.clear()
    read = core.read_namespaced_config_map("Bad_Name", "default").to_dict()
    assert read["metadata"]["name"] == "Bad_Name"


def test_nodes_added_directly_are_served(kube_api: KubeApiEmulator, core: client.CoreV1Api) -> None:
    kube_api.add_node("gpu-1", labels={"pool": "a100"}, allocatable={GPU: "4"}, capacity={GPU: "8"})
    [node] = core.list_node(label_selector="pool=a100").to_dict()["items"]
    assert node["status"]["allocatable"] == {GPU: "4"}
    assert node["status"]["capacity"] == {GPU: "8"}


# 13. The kubeconfig.


def test_kubeconfig_works_with_both_loaders(kube_api: KubeApiEmulator, tmp_path) -> None:
    path = kube_api.kubeconfig(tmp_path / "kubeconfig")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == kube_api.url
    with client.ApiClient(configuration) as api:
        assert client.VersionApi(api).get_code().git_version == f"v{KUBERNETES_VERSION}"
    with config.new_client_from_config(config_file=str(path)) as api:
        assert api.configuration.host == kube_api.url
        namespace = client.CoreV1Api(api).read_namespace("default").to_dict()
        assert namespace["metadata"]["name"] == "default"


# More of a real server.


def test_pod_log_answers_text(kube_api: KubeApiEmulator, core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("nb", "default"))
    assert "nb" in core.read_namespaced_pod_log("nb", "default")
    kube_api.set_pod_log("default", "nb", "line 1\nline 2\nline 3\n")
    assert core.read_namespaced_pod_log("nb", "default", tail_lines=2) == "line 2\nline 3\n"
    with pytest.raises(ApiException) as raised:
        core.read_namespaced_pod_log("missing", "default")
    assert raised.value.status == 404


def test_status_subresource_changes_only_status(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", pod("nb", "default", labels={"a": "b"}))
    patched = core.patch_namespaced_pod_status(
        "nb",
        "default",
        {"status": {"phase": "Running"}, "metadata": {"labels": {"a": "changed"}}},
        _content_type="application/merge-patch+json",
    ).to_dict()
    assert patched["status"]["phase"] == "Running"
    assert patched["metadata"]["labels"] == {"a": "b"}


def test_dry_run_writes_store_nothing(kube_api: KubeApiEmulator, core: client.CoreV1Api) -> None:
    created = core.create_namespace(ns("team"), dry_run="All").to_dict()
    assert created["metadata"]["name"] == "team"
    assert kube_api.get_object("v1", "Namespace", "team") is None


def test_generate_name_gets_a_random_suffix(core: client.CoreV1Api) -> None:
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="run-"))
    created = core.create_namespaced_config_map("default", body).to_dict()
    assert re.fullmatch(r"run-[a-z0-9]{5}", created["metadata"]["name"])


def test_no_internal_errors_in_a_busy_session(
    kube_api: KubeApiEmulator, core: client.CoreV1Api, dyn: DynamicClient
) -> None:
    core.create_namespace(ns("team"))
    apply(dyn, pod_manifest("nb"))
    core.delete_collection_namespaced_pod("team")
    core.list_namespaced_event("team")
    assert kube_api.objects("Pod") == []
    assert kube_api.server_errors == []


def test_a_stopped_emulator_refuses_connections_and_restarts_on_the_same_port(
    kube_api: KubeApiEmulator, tmp_path
) -> None:
    url = kube_api.url
    with make_client(kube_api, tmp_path, retries=False) as api:
        core = client.CoreV1Api(api)
        core.create_namespace(ns("team"))
        kube_api.stop()
        # Kept-alive connections are closed too, not served by their handler threads.
        with pytest.raises(urllib3.exceptions.HTTPError):
            core.list_namespace()
        kube_api.start()
        assert kube_api.url == url
        assert "team" in names(core.list_namespace())


def test_concurrent_writers_each_get_their_own_resource_version(
    kube_api: KubeApiEmulator, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)

    def create(worker: int) -> list[int]:
        return [
            int(
                core.create_namespaced_config_map(
                    "default", cm(f"w{worker}-{n}", {}, "default")
                ).to_dict()["metadata"]["resource_version"]
            )
            for n in range(10)
        ]

    with ThreadPoolExecutor(max_workers=6) as pool:
        versions = [v for batch in pool.map(create, range(6)) for v in batch]
    assert len(set(versions)) == 60
    assert len(kube_api.objects("ConfigMap", "default")) == 60
