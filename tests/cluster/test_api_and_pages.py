"""Provisioning runs, capacity and clusters through the API and the pages, per persona."""

from typing import Any

import pytest
from django.urls import reverse

from portal.cluster.models import ProvisioningRun, RunState
from portal.cluster.services import capacity_record, cluster_create, provisioning_run_execute
from portal.core.models import AuditEvent
from tenants.models import MemberRole
from tenants.services import membership_set
from tests.loaded import page_loaded


@pytest.fixture
def provisioned(db, tenant_a, developer, lead):
    """Tenant A provisioned (dry-run) in cluster `lab`."""
    cluster_create(actor=None, name="lab")
    run = ProvisioningRun.objects.get(tenant=tenant_a)
    return provisioning_run_execute(run_id=run.pk)


def gpu_nodes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "metadata": {
                "name": f"gpu-{index}",
                "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            },
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96"}},
        }
        for index in range(count)
    ]


def test_a_member_reads_a_run_with_its_results(provisioned, client_for, developer):
    response = client_for(developer).get(reverse("api:provisioning-run", args=[provisioned.pk]))
    assert response.status_code == 200
    body = response.json()
    assert body["state"] == "succeeded"
    assert body["tenant"] == "vision"
    assert body["results"][0] == {
        "api_version": "v1", "kind": "Namespace", "namespace": "", "name": "t-vision",
        "outcome": "rendered", "message": "", "drift": [],
    }  # fmt: skip
    assert "kind: ResourceQuota" in body["manifests"]


def test_an_outsider_gets_404_for_a_run_page_and_api(provisioned, client_for, outsider):
    client = client_for(outsider)
    assert client.get(reverse("api:provisioning-run", args=[provisioned.pk])).status_code == 404
    assert client.get(reverse("cluster:run", args=[provisioned.pk])).status_code == 404
    assert client.get(reverse("cluster:tenant-runs", args=["vision"])).status_code == 404
    listed = client.get(reverse("api:provisioning-runs")).json()
    assert provisioned.pk not in [run["id"] for run in listed["results"]]


def test_runs_list_filters_by_state_and_refuses_unknown_states(provisioned, client_for, admin_user):
    client = client_for(admin_user)
    url = reverse("api:provisioning-runs")
    assert client.get(url, {"state": "succeeded"}).json()["count"] >= 1
    assert client.get(url, {"state": "failed"}).json()["count"] == 0
    refused = client.get(url, {"state": "done"})
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"state": ["Unknown state."]}


def test_tenant_page_shows_the_namespace_objects_and_runs(provisioned, client_for, developer):
    html = page_loaded(client_for(developer), reverse("tenants:detail", args=["vision"]))
    assert 'data-testid="object-ResourceQuota-tenant-quota"' in html
    assert f'data-testid="run-{provisioned.pk}"' in html
    assert "hx-trigger" not in html.split('id="provisioning"')[1].split(">")[0]


def test_polling_a_finished_tenant_stops_with_286(provisioned, client_for, developer):
    response = client_for(developer).get(
        reverse("cluster:tenant-runs", args=["vision"]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 286


def test_a_queued_run_keeps_the_section_polling(db, tenant_a, client_for, developer):
    cluster_create(actor=None, name="lab")
    response = client_for(developer).get(
        reverse("cluster:tenant-runs", args=["vision"]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert 'hx-trigger="every 2s"' in response.content.decode()


def test_tenant_page_queries_stay_bounded_with_many_runs(
    provisioned, client_for, developer, admin_user, django_assert_max_num_queries
):
    from portal.accounts.services import user_create  # noqa: PLC0415

    for index in range(12):
        user = user_create(actor=None, username=f"member-{index}")
        membership_set(
            actor=admin_user, tenant=provisioned.tenant, user=user, role=MemberRole.DEVELOPER
        )
        run = ProvisioningRun.objects.get(tenant=provisioned.tenant, state=RunState.QUEUED)
        provisioning_run_execute(run_id=run.pk)
    client = client_for(developer)
    with django_assert_max_num_queries(20):
        assert client.get(reverse("tenants:detail", args=["vision"])).status_code == 200


def test_capacity_counts_free_units_per_offering(
    db, catalog, client_for, developer, finance_user, django_assert_max_num_queries
):
    from portal.catalog.services import gpu_pool_create  # noqa: PLC0415

    cluster = cluster_create(actor=None, name="lab")
    whole = catalog["a100-80gb-whole"]
    gpu_pool_create(
        actor=None, cluster="lab", name="a100", gpu_model=whole.gpu_model, backend=whole.backend
    )
    pods = [
        {
            "spec": {
                "nodeName": "gpu-0",
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "3"}}}],
            }
        }
    ]
    capacity_record(cluster=cluster, nodes=gpu_nodes(40), pods=pods)
    client = client_for(developer)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("api:capacity"), {"offering": "a100-80gb-whole"})
    assert response.status_code == 200
    body = response.json()
    assert (body["count"], body["next"], body["previous"]) == (1, None, None)
    [row] = body["results"]
    assert (row["total"], row["allocated"], row["free"], row["nodes"]) == (320, 3, 317, 40)
    assert row["free_gpu_eq"] == "317"
    page = client.get(reverse("cluster:capacity"))
    assert 'data-testid="capacity-lab-a100-80gb-whole"' in page.content.decode()
    preview = client.get(
        reverse("allocations:preview"),
        {"tenant": "vision", "offering": "a100-80gb-whole", "count": 1},
    )
    assert "317 free units of" in preview.content.decode()
    # Finance requests nothing, so capacity is not theirs to see.
    assert client_for(finance_user).get(reverse("api:capacity")).status_code == 404


def test_capacity_pages_like_every_list(db, catalog, client_for, developer):
    from portal.catalog.services import gpu_pool_create  # noqa: PLC0415

    cluster = cluster_create(actor=None, name="lab")
    whole = catalog["a100-80gb-whole"]
    for name in ("a100", "a100-spare"):
        gpu_pool_create(
            actor=None, cluster="lab", name=name, gpu_model=whole.gpu_model, backend=whole.backend
        )
    capacity_record(cluster=cluster, nodes=gpu_nodes(2), pods=[])
    client = client_for(developer)
    url = reverse("api:capacity")
    first = client.get(url, {"offering": "a100-80gb-whole", "page_size": 1}).json()
    assert first["count"] == 2
    assert [row["pool"] for row in first["results"]] == ["a100"]
    assert first["next"] is not None
    second = client.get(url, {"offering": "a100-80gb-whole", "page_size": 1, "page": 2}).json()
    assert [row["pool"] for row in second["results"]] == ["a100-spare"]
    assert second["next"] is None
    assert client.get(url, {"page": 3, "page_size": 1}).status_code == 404


def test_admin_registers_a_cluster_and_every_tenant_gets_a_run(
    db, tenant_a, tenant_b, client_for, admin_user
):
    client = client_for(admin_user)
    response = client.post(
        reverse("api:clusters"),
        {"name": "prod", "mode": "kubernetes", "connection": "in-cluster"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["applies"] is False  # PORTAL_CLUSTER_MODE=dry-run keeps it dry
    assert ProvisioningRun.objects.filter(cluster__name="prod").count() == 2
    assert AuditEvent.objects.filter(action="cluster.create").count() == 1
    again = client.post(reverse("api:clusters"), {"name": "prod"}, content_type="application/json")
    assert again.status_code == 409
    assert again.json()["error"]["fields"] == {"name": ["Taken."]}
    bad = client.patch(
        reverse("api:cluster", args=["prod"]),
        {"monitoring_namespace_labels": {"": "x"}},
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert "monitoring_namespace_labels" in bad.json()["error"]["fields"]
    for field, value in [("prometheus_url", "ftp://prom:9090"), ("metrics_interval_seconds", 0)]:
        refused = client.patch(
            reverse("api:cluster", args=["prod"]), {field: value}, content_type="application/json"
        )
        assert refused.status_code == 400, refused.content
        assert field in refused.json()["error"]["fields"]
    metered = client.patch(
        reverse("api:cluster", args=["prod"]),
        {"prometheus_url": "http://prometheus.monitoring:9090", "metrics_interval_seconds": 15},
        content_type="application/json",
    )
    assert metered.status_code == 200, metered.content
    assert metered.json()["prometheus_url"] == "http://prometheus.monitoring:9090"
    assert AuditEvent.objects.filter(action="cluster.update").count() == 1


def test_only_admins_see_clusters(db, client_for, lead, outsider):
    cluster_create(actor=None, name="prod")
    for user in (lead, outsider):
        client = client_for(user)
        assert client.get(reverse("api:cluster", args=["prod"])).status_code == 404
        assert client.get(reverse("cluster:detail", args=["prod"])).status_code == 404


def test_admin_cluster_page_shows_nodes_and_failed_runs(
    db, client_for, admin_user, tenant_a, django_assert_max_num_queries
):
    cluster = cluster_create(actor=None, name="lab")
    capacity_record(cluster=cluster, nodes=gpu_nodes(60), pods=[])
    ProvisioningRun.objects.filter(tenant=tenant_a).update(state=RunState.FAILED, error="403 x")
    run = ProvisioningRun.objects.get(tenant=tenant_a)
    client = client_for(admin_user)
    with django_assert_max_num_queries(15):
        html = client.get(reverse("cluster:detail", args=["lab"])).content.decode()
    assert 'data-testid="node-gpu-1"' in html
    assert f'data-testid="failed-{run.pk}"' in html
    response = client_for(admin_user).post(reverse("cluster:run-retry", args=[run.pk]))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.state == RunState.QUEUED


def test_admin_creates_a_cluster_from_the_form_with_errors_on_fields(db, client_for, admin_user):
    client = client_for(admin_user)
    response = client.post(
        reverse("cluster:create"),
        {
            "name": "edge",
            "mode": "dry-run",
            "connection": "kubeconfig",
            "ingress_namespace_labels": "{}",
            "monitoring_namespace_labels": "{}",
            "pods_per_namespace": 10,
            "volumes_per_namespace": 2,
        },
    )
    assert response.status_code == 400
    assert "Give the path of the kubeconfig file" in response.content.decode()
    response = client.post(
        reverse("cluster:create"),
        {
            "name": "edge",
            "mode": "dry-run",
            "connection": "in-cluster",
            "namespace_prefix": "gpu-",
            "ingress_namespace_labels": "{}",
            "monitoring_namespace_labels": "{}",
            "pods_per_namespace": 10,
            "volumes_per_namespace": 2,
            "enabled": "on",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("cluster:detail", args=["edge"])


def test_archiving_from_the_page_asks_for_the_slug_first(db, tenant_a, client_for, admin_user):
    client = client_for(admin_user)
    url = reverse("tenants:state", args=["vision"])
    asked = client.post(url, {"action": "archive"})
    assert asked.status_code == 200
    assert "Type <code>vision</code> to confirm" in asked.content.decode()
    wrong = client.post(url, {"action": "archive", "typed": "nlp", "confirmed": "yes"})
    assert "That is not vision." in wrong.content.decode()
    tenant_a.refresh_from_db()
    assert tenant_a.state == "active"
    done = client.post(
        url, {"action": "archive", "typed": "vision", "comment": "team closed", "confirmed": "yes"}
    )
    assert done.status_code == 302
    tenant_a.refresh_from_db()
    assert tenant_a.state == "archived"
    assert AuditEvent.objects.get(action="tenant.archive").comment == "team closed"


def test_the_runs_list_queries_stay_bounded(
    db, client_for, admin_user, django_assert_max_num_queries
):
    from tenants.services import tenant_create  # noqa: PLC0415

    cluster_create(actor=None, name="lab")
    for index in range(30):
        tenant_create(actor=admin_user, slug=f"team-{index}", name=f"Team {index}")
    client = client_for(admin_user)
    with django_assert_max_num_queries(6):
        body = client.get(reverse("api:provisioning-runs"), {"page_size": 100}).json()
    assert body["count"] == 30
    assert {run["requested_by"] for run in body["results"]} == {admin_user.username}
