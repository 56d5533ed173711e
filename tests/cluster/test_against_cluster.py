"""Provisioning against the Kubernetes API emulator, through the real client: the bundle lands,
re-runs write nothing, drift is found and repaired, quota admission holds, faults converge."""

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import connection
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from portal.accounts.models import MemberRole
from portal.allocations.models import RequestState
from portal.allocations.services import gpu_request_submit
from portal.cluster.errors import ClusterError
from portal.cluster.models import Outcome, ProvisioningRun, RunKind, RunState
from portal.cluster.services import (
    capacity_collect,
    cluster_reconcile,
    provisioning_run_execute,
)
from portal.core.models import AuditEvent
from portal.workloads.services import (
    notebook_delete,
    notebook_launch,
    notebook_stop,
    notebooks_observe,
)
from tenants.services import tenant_change_state, tenant_create
from tests.cluster.fixtures import run_queued

NETWORK_POLICIES = [
    "default-deny",
    "allow-same-namespace",
    "allow-dns",
    "allow-ingress-controller",
    "allow-monitoring",
]
BUNDLE_SIZE = 1 + 1 + 1 + 1 + 2 + len(NETWORK_POLICIES)  # as the README states


BUNDLE_KINDS = {"ServiceAccount", "ResourceQuota", "LimitRange", "RoleBinding", "NetworkPolicy"}
DISCOVERY = re.compile(r"^/(version|api|apis|api/v1|apis/[^/]+/[^/]+)/?$")
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def access_of(method: str, path: str) -> tuple[str, str, str] | None:
    """(API group, resource, RBAC verb) of a request; None for discovery."""
    if DISCOVERY.match(path):
        return None
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    resource, named = rest[0], len(rest) > 1
    verb = VERBS.get(method, "get" if named else "list")
    return group, resource, verb


def bundle_in(kube_api, namespace: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (obj["kind"], obj["metadata"]["name"]): obj
        for obj in kube_api.objects(namespace=namespace)
        if obj["kind"] in BUNDLE_KINDS
    }


def test_a_new_tenant_with_an_approved_a100_gets_its_bundle_in_the_cluster(
    live_cluster, kube_api, admin_user, developer, catalog
):
    tenant = tenant_create(actor=admin_user, slug="genomics", name="Genomics")
    from tenants.services import membership_set, quota_set  # noqa: PLC0415

    membership_set(actor=admin_user, tenant=tenant, user=developer, role=MemberRole.DEVELOPER)
    quota_set(
        actor=admin_user, tenant=tenant, gpu_model=catalog["a100-80gb-whole"].gpu_model, gpu_eq=4
    )
    [run] = run_queued(tenant)
    assert run.state == RunState.SUCCEEDED, run.error
    assert [r.outcome for r in run.results.all()] == [Outcome.CREATED] * BUNDLE_SIZE

    allocation = gpu_request_submit(
        actor=developer, tenant=tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    assert allocation.state == RequestState.APPROVED
    [run] = run_queued(tenant)
    assert run.state == RunState.SUCCEEDED, run.error
    allocation.refresh_from_db()
    assert allocation.state == RequestState.ACTIVE

    namespace = kube_api.get_object("v1", "Namespace", "t-genomics")
    assert namespace["metadata"]["labels"]["gpu-portal.io/tenant"] == "genomics"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    objects = bundle_in(kube_api, "t-genomics")
    hard = objects["ResourceQuota", "tenant-quota"]["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "1"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "0"  # known to the catalog, not held
    developers = objects["RoleBinding", "gpu-portal-developers"]["subjects"]
    assert f"oidc:{developer.username}" in [subject["name"] for subject in developers]
    assert sorted(name for kind, name in objects if kind == "NetworkPolicy") == sorted(
        NETWORK_POLICIES
    )
    # Only the resource quota changed with the allocation; everything else was left alone.
    changed = [(r.kind, r.outcome) for r in run.results.all() if r.outcome != Outcome.UNCHANGED]
    assert changed == [("ResourceQuota", Outcome.CONFIGURED)]


def test_a_second_reconcile_of_an_unchanged_tenant_writes_nothing(live_cluster, kube_api, tenant_a):
    [run] = run_queued()
    assert run.state == RunState.SUCCEEDED, run.error
    first = cluster_reconcile(cluster=live_cluster)
    kube_api.clear_log()
    second = cluster_reconcile(cluster=live_cluster)
    assert first.drifted == second.drifted == []
    assert kube_api.writes() == []
    # One list of namespaces and one per bundle kind, whatever the number of tenants.
    assert second.api_requests == 6
    assert not ProvisioningRun.objects.filter(kind=RunKind.REPAIR).exists()


def test_an_unchanged_rerun_only_reads(live_cluster, kube_api, tenant_a, admin_user):
    run_queued()
    kube_api.clear_log()
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="suspend")
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="reactivate")
    [run] = run_queued()
    assert {r.outcome for r in run.results.all()} == {Outcome.UNCHANGED}
    assert kube_api.writes() == []


def test_a_network_policy_deleted_behind_the_portals_back_is_found_and_repaired(
    live_cluster, kube_api, tenant_a
):
    run_queued()
    kube_api.delete_object("networking.k8s.io/v1", "NetworkPolicy", "allow-dns", "t-vision")
    report = cluster_reconcile(cluster=live_cluster)
    assert report.drifted == ["vision"]
    drift = AuditEvent.objects.get(action="cluster.drift")
    assert "NetworkPolicy/allow-dns" in drift.changes
    [repair] = run_queued()
    assert repair.kind == RunKind.REPAIR
    assert repair.state == RunState.SUCCEEDED
    created = [(r.kind, r.name) for r in repair.results.all() if r.outcome == Outcome.CREATED]
    assert created == [("NetworkPolicy", "allow-dns")]
    assert kube_api.get_object("networking.k8s.io/v1", "NetworkPolicy", "allow-dns", "t-vision")
    assert cluster_reconcile(cluster=live_cluster).drifted == []


def test_a_changed_quota_is_drift_with_the_field_named(live_cluster, kube_api, a100_tenant):
    run_queued()
    quota = kube_api.get_object("v1", "ResourceQuota", "tenant-quota", "t-vision")
    quota["spec"]["hard"]["requests.nvidia.com/gpu"] = "64"
    kube_api.put_object(quota)
    cluster_reconcile(cluster=live_cluster)
    [repair] = run_queued()
    [result] = [r for r in repair.results.all() if r.outcome == Outcome.CONFIGURED]
    assert result.drift == ["spec.hard.requests.nvidia.com/gpu"]
    quota = kube_api.get_object("v1", "ResourceQuota", "tenant-quota", "t-vision")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"


def test_objects_the_portal_no_longer_wants_are_deleted_by_label_only(
    live_cluster, kube_api, tenant_a
):
    run_queued()
    labels = kube_api.get_object("v1", "ServiceAccount", "workload", "t-vision")["metadata"][
        "labels"
    ]
    for name, own_labels in (("left-over", labels), ("someone-elses", {"team": "x"})):
        kube_api.put_object(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": "t-vision", "labels": own_labels},
            }
        )
    cluster_reconcile(cluster=live_cluster)
    [repair] = run_queued()
    deleted = [r.name for r in repair.results.all() if r.outcome == Outcome.DELETED]
    assert deleted == ["left-over"]
    assert kube_api.get_object("v1", "ServiceAccount", "someone-elses", "t-vision")


def test_a_pod_asking_for_more_gpus_than_the_quota_allows_is_refused(
    live_cluster, kube_api, a100_tenant, developer, catalog
):
    gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    run_queued()
    api = k8s_client.CoreV1Api(
        k8s_config.new_client_from_config(config_file=live_cluster.kubeconfig_path)
    )

    def pod(name: str, gpus: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "jupyter/base-notebook",
                        "resources": {
                            "limits": {"nvidia.com/gpu": str(gpus), "cpu": "1", "memory": "1Gi"},
                            "requests": {"cpu": "1", "memory": "1Gi"},
                        },
                    }
                ]
            },
        }

    with pytest.raises(ApiException) as refused:
        api.create_namespaced_pod("t-vision", pod("greedy", 2))  # type: ignore[arg-type]
    assert refused.value.status == 403
    assert "exceeded quota: tenant-quota" in str(refused.value.body)
    api.create_namespaced_pod("t-vision", pod("fits", 1))  # type: ignore[arg-type]
    assert kube_api.get_object("v1", "Pod", "fits", "t-vision")


def test_suspending_scales_workloads_to_zero_and_takes_the_gpus_away(
    live_cluster, kube_api, tenant_a, admin_user
):
    run_queued()
    kube_api.put_object(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "notebook", "namespace": "t-vision"},
            "spec": {"replicas": 1, "serviceName": "notebook", "selector": {}, "template": {}},
        }
    )
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="suspend")
    [run] = run_queued()
    assert run.state == RunState.SUCCEEDED, run.error
    scaled = [(r.kind, r.name) for r in run.results.all() if r.outcome == Outcome.SCALED_DOWN]
    assert scaled == [("StatefulSet", "notebook")]
    assert (
        kube_api.get_object("apps/v1", "StatefulSet", "notebook", "t-vision")["spec"]["replicas"]
        == 0
    )
    hard = kube_api.get_object("v1", "ResourceQuota", "tenant-quota", "t-vision")["spec"]["hard"]
    assert hard["pods"] == "0"


def test_archiving_deletes_the_namespace_and_everything_in_it(
    live_cluster, kube_api, tenant_a, admin_user
):
    run_queued()
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="archive")
    [run] = run_queued()
    assert run.kind == RunKind.DELETE
    assert [(r.kind, r.outcome) for r in run.results.all()] == [("Namespace", Outcome.DELETED)]
    assert kube_api.get_object("v1", "Namespace", "t-vision") is None
    assert kube_api.objects(namespace="t-vision") == []


def test_a_namespace_the_portal_does_not_manage_is_left_alone(live_cluster, kube_api, db):
    kube_api.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t-ops"}})
    tenant_create(actor=None, slug="ops", name="Ops")
    [run] = run_queued()
    assert run.state == RunState.FAILED
    assert "not managed by the portal" in run.error
    assert kube_api.objects(namespace="t-ops") == []


def test_a_refusal_fails_the_run_with_the_api_reason_and_retry_succeeds(
    live_cluster, kube_api, tenant_a, admin_user
):
    from portal.cluster.services import provisioning_run_retry  # noqa: PLC0415

    kube_api.faults.fail_next(1, status=403, methods=("PATCH",))
    [run] = run_queued()
    assert run.state == RunState.FAILED
    assert run.error.startswith("apply Namespace t-vision: 403")
    outcomes = [r.outcome for r in run.results.all()]
    assert outcomes == [Outcome.FAILED] + [Outcome.SKIPPED] * (BUNDLE_SIZE - 1)
    provisioning_run_retry(actor=admin_user, run=run)
    [retried] = run_queued()
    assert retried.pk == run.pk
    assert retried.state == RunState.SUCCEEDED
    assert retried.attempts == 1  # a retry starts a fresh set of attempts


def test_transient_errors_are_retried_within_the_run(live_cluster, kube_api, tenant_a):
    kube_api.faults.fail_next(2, status=503, methods=("PATCH",))
    kube_api.faults.drop_next(1, methods=("PATCH",))
    [run] = run_queued()
    assert run.state == RunState.SUCCEEDED, run.error
    assert run.attempts == 1
    assert run.api_requests == 1 + BUNDLE_SIZE + 3


def test_a_slow_api_server_times_out_and_the_run_is_queued_again(
    live_cluster, kube_api, tenant_a, settings
):
    settings.PORTAL_CLUSTER_TIMEOUT_SECONDS = 0.3
    settings.PORTAL_CLUSTER_RETRY_ATTEMPTS = 2
    kube_api.faults.slow(1.0)
    run = ProvisioningRun.objects.get(tenant=tenant_a)
    attempt = provisioning_run_execute(run_id=run.pk)
    assert attempt is not None
    assert attempt.state == RunState.QUEUED
    assert "will retry" in attempt.error
    kube_api.faults.clear()
    [done] = run_queued()
    assert done.state == RunState.SUCCEEDED
    assert done.attempts == 2


def test_twenty_tenants_converge_while_a_third_of_requests_fail(live_cluster, kube_api, db):
    kube_api.faults.error_rate(0.3, statuses=(500, 503, 429), seed=7, retry_after="0")
    kube_api.faults.drop_rate(0.05, seed=8)
    tenants = [tenant_create(actor=None, slug=f"team-{i:02d}", name=f"Team {i}") for i in range(20)]
    for _ in range(10):
        finished = run_queued()
        # Every run ends succeeded or visibly failed, never in between.
        assert all(run.state in (RunState.SUCCEEDED, RunState.FAILED) for run in finished)
        assert all(run.error for run in finished if run.state == RunState.FAILED)
        try:
            if cluster_reconcile(cluster=live_cluster).drifted == []:
                break
        except ClusterError:
            continue  # the reconcile itself met too many faults; the next round tries again
    else:
        pytest.fail("the cluster did not converge in 10 rounds")
    kube_api.faults.clear()
    for tenant in tenants:
        names = [
            (o["kind"], o["metadata"]["name"])
            for o in kube_api.objects(namespace=f"t-{tenant.slug}")
        ]
        assert len(names) == len(set(names)) == BUNDLE_SIZE - 1  # no duplicates, nothing missing
    assert not ProvisioningRun.objects.filter(state__in=(RunState.QUEUED, RunState.RUNNING))


def test_provisioning_two_hundred_tenants_costs_requests_linear_in_tenants(
    live_cluster, kube_api, db
):
    for i in range(200):
        tenant_create(actor=None, slug=f"t{i:03d}", name=f"Tenant {i}")
    kube_api.clear_log()
    finished = run_queued()
    assert len(finished) == 200
    assert all(run.state == RunState.SUCCEEDED for run in finished)
    # Per new tenant: one GET of its namespace, then one apply per bundle object; discovery
    # is a constant (the client caches it on disk for the server).
    per_tenant = 1 + BUNDLE_SIZE
    assert sum(run.api_requests for run in finished) == 200 * per_tenant
    discovery = [r for r in kube_api.requests if access_of(r.method, r.path) is None]
    assert len(kube_api.requests) - len(discovery) == 200 * per_tenant
    assert len(discovery) <= 10


def test_capacity_reads_nodes_and_pod_requests(live_cluster, kube_api, catalog, db):
    from portal.catalog.services import gpu_pool_create  # noqa: PLC0415
    from portal.cluster.selectors import capacity_rows  # noqa: PLC0415

    whole = catalog["a100-80gb-whole"]
    mig = catalog["a100-80gb-mig-1g-10gb"]
    mig_resource = "nvidia.com/mig-1g.10gb"
    gpu_pool_create(
        actor=None, cluster="lab", name="a100", gpu_model=whole.gpu_model, backend=whole.backend
    )
    gpu_pool_create(
        actor=None, cluster="lab", name="a100-mig", gpu_model=mig.gpu_model, backend=mig.backend
    )
    label = {whole.gpu_model.node_label_key: whole.gpu_model.node_label_value}
    kube_api.add_node(
        "gpu-1", labels=label | {"gpu-portal.io/pool": "a100"}, allocatable={"nvidia.com/gpu": "8"}
    )
    kube_api.add_node(
        "gpu-2",
        labels=label | {"gpu-portal.io/pool": "a100-mig"},
        allocatable={"nvidia.com/mig-1g.10gb": "14"},
    )
    kube_api.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    container = {"name": "c", "image": "x", "resources": {"limits": {mig_resource: "3"}}}
    kube_api.put_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"nodeName": "gpu-2", "containers": [container]},
            "status": {"phase": "Running"},
        }
    )
    assert capacity_collect(cluster=live_cluster) == 2
    rows = {row.offering.slug: row for row in capacity_rows(cluster="lab")}
    assert (rows["a100-80gb-whole"].total, rows["a100-80gb-whole"].free) == (8, 8)
    assert (rows["a100-80gb-mig-1g-10gb"].total, rows["a100-80gb-mig-1g-10gb"].free) == (14, 11)


def test_the_cluster_role_grants_every_request_the_portal_makes(
    live_cluster, kube_api, a100_tenant, admin_user, developer, catalog
):
    """Every API request of provisioning, reconcile, capacity, suspend and archive is allowed by
    deploy/kubernetes/rbac.yaml, and the role grants nothing the portal does not use."""
    gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    run_queued()
    kube_api.delete_object("networking.k8s.io/v1", "NetworkPolicy", "allow-dns", "t-vision")
    cluster_reconcile(cluster=live_cluster)
    run_queued()
    capacity_collect(cluster=live_cluster)
    # A notebook: launched, read back, stopped, deleted with its workspace.
    live_cluster.notebook_host_pattern = "{name}.{tenant}.gpu.example.org"
    live_cluster.save()
    allocation = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    notebook = notebook_launch(actor=developer, allocation_id=allocation.pk, image="minimal-python")
    run_queued()
    kube_api.reconcile_statefulsets()
    notebooks_observe(cluster=live_cluster)
    notebook_stop(actor=developer, notebook=notebook)
    run_queued()
    notebook_delete(actor=developer, notebook=notebook, keep_workspace=False)
    run_queued()
    tenant_change_state(actor=admin_user, tenant=a100_tenant, action="suspend")
    run_queued()
    tenant_change_state(actor=admin_user, tenant=a100_tenant, action="archive")
    run_queued()

    documents = list(yaml.safe_load_all(Path("deploy/kubernetes/rbac.yaml").read_text()))
    [role] = [
        d for d in documents if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "gpu-portal"
    ]
    # Leads manage workloads but never the namespace's isolation.
    [lead_role] = [d for d in documents if d["metadata"]["name"] == "gpu-portal-tenant-lead"]
    for rule in lead_role["rules"]:
        if "networkpolicies" in rule["resources"] or "rolebindings" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    used = {
        access
        for request in kube_api.requests
        if (access := access_of(request.method, request.path)) is not None
    }
    # Server-side apply of a missing object needs create as well as patch.
    applied = {
        access[:2]
        for request in kube_api.requests
        if request.content_type.startswith("application/apply-patch")
        and (access := access_of(request.method, request.path)) is not None
    }
    used |= {(group, resource, "create") for group, resource in applied}
    assert ("", "secrets", "create") in used  # the notebook was there
    assert ("", "events", "list") in used
    assert used - granted == set()
    assert not any("*" in grant for grant in granted)


def test_a_delete_only_removes_the_object_as_it_was_checked(live_cluster, kube_api):
    from portal.cluster.errors import ClusterRefused  # noqa: PLC0415
    from portal.cluster.gateway import KubernetesGateway  # noqa: PLC0415

    kube_api.put_object(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t-x", "labels": {"a": "1"}}}
    )
    gateway = KubernetesGateway(live_cluster)
    seen = gateway.get("v1", "Namespace", "t-x")
    assert seen is not None
    changed = kube_api.get_object("v1", "Namespace", "t-x")
    changed["metadata"]["labels"] = {"a": "2"}
    kube_api.put_object(changed)
    with pytest.raises(ClusterRefused) as refused:
        gateway.delete("v1", "Namespace", "t-x", seen=seen)
    assert refused.value.status == 409
    assert kube_api.get_object("v1", "Namespace", "t-x") is not None
    assert gateway.delete("v1", "Namespace", "t-x", seen=gateway.get("v1", "Namespace", "t-x"))
    gateway.close()


def test_the_gateway_reads_every_answer_so_writes_share_one_connection(live_cluster, kube_api):
    from portal.cluster.gateway import KubernetesGateway  # noqa: PLC0415

    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default"},
        "data": {"mode": "a"},
    }
    gateway = KubernetesGateway(live_cluster)
    try:
        gateway.get("v1", "Namespace", "default")  # discovery done, the pool has a connection
        kube_api.clear_log()
        assert gateway.apply(config_map) is True
        assert gateway.apply(config_map | {"data": {"mode": "b"}}) is False
        gateway.merge_patch("v1", "ConfigMap", "settings", "default", {"data": {"mode": "c"}})
        assert gateway.delete("v1", "ConfigMap", "settings", "default") is True
        assert gateway.get("v1", "ConfigMap", "settings", "default") is None
    finally:
        gateway.close()
    requests = kube_api.requests
    assert [(r.method, r.status) for r in requests] == [
        ("PATCH", 201), ("PATCH", 200), ("PATCH", 200), ("DELETE", 200), ("GET", 404)
    ]  # fmt: skip
    # An answer left unread holds its connection: the next request would need a new one, and
    # closing the client would abort the unread answer on the server's side.
    assert len({r.connection for r in requests}) == 1


def test_two_capacity_reads_at_once_make_one_read_and_no_error(
    transactional_db, live_cluster, kube_api, catalog
):
    from portal.catalog.services import gpu_pool_create  # noqa: PLC0415
    from portal.cluster.models import NodeCapacity  # noqa: PLC0415

    whole = catalog["a100-80gb-whole"]
    gpu_pool_create(
        actor=None, cluster="lab", name="a100", gpu_model=whole.gpu_model, backend=whole.backend
    )
    label = {whole.gpu_model.node_label_key: whole.gpu_model.node_label_value}
    for name in ("gpu-1", "gpu-2", "gpu-3"):
        kube_api.add_node(name, labels=label, allocatable={"nvidia.com/gpu": "8"})
    assert capacity_collect(cluster=live_cluster) == 3  # rows to replace, as in a running portal
    kube_api.clear_log()
    # Slow answers, so the second read is asked for while the first one runs.
    kube_api.faults.slow(0.5, methods=("GET",))
    barrier = threading.Barrier(2)

    def read() -> int:
        try:
            barrier.wait()
            return capacity_collect(cluster=live_cluster)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(pool.map(lambda _: read(), range(2)))

    assert counts == [3, 3]
    node_lists = [r for r in kube_api.requests if r.method == "GET" and r.path == "/api/v1/nodes"]
    assert len(node_lists) == 1
    assert NodeCapacity.objects.filter(cluster=live_cluster).count() == 3


def test_a_rotated_token_file_is_read_again_for_the_next_call(kube_api, settings, tmp_path, db):
    from portal.cluster.gateway import KubernetesGateway  # noqa: PLC0415
    from portal.cluster.services import cluster_create  # noqa: PLC0415

    settings.PORTAL_CLUSTER_MODE = "kubernetes"
    settings.PORTAL_CLUSTER_RETRY_BACKOFF_SECONDS = 0.01
    token = tmp_path / "token"
    token.write_text(kube_api.token + "\n")
    kube_api.kubeconfig(tmp_path / "kubeconfig", token_file="token")
    cluster = cluster_create(
        actor=None,
        name="remote",
        mode="kubernetes",
        connection="kubeconfig",
        kubeconfig_path=str(tmp_path / "kubeconfig"),
    )
    gateway = KubernetesGateway(cluster)
    try:
        assert gateway.get("v1", "Namespace", "default") is not None
        # The token rotates: the API server takes only the new one, written over the file.
        token.write_text(kube_api.rotate_token() + "\n")
        assert gateway.get("v1", "Namespace", "kube-system") is not None
        # A file gone for a moment (being replaced) keeps the last token read.
        token.unlink()
        assert gateway.get("v1", "Namespace", "kube-public") is not None
        kube_api.rotate_token()  # and an expired one is refused, not retried
        with pytest.raises(ClusterError, match="401"):
            gateway.get("v1", "Namespace", "default")
    finally:
        gateway.close()
    statuses = [r.status for r in kube_api.requests if r.path.startswith("/api/v1/namespaces/")]
    assert statuses == [200, 200, 200, 401]
