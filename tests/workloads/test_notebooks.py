"""Notebooks against the Kubernetes API emulator: launching lands the objects with the offering's
GPU resources; stop, start and delete do what they say; bad input names the field; the pod's
state and events become the notebook's state and reason."""

from decimal import Decimal
from typing import Any

import pytest

from portal.allocations.models import RequestState
from portal.allocations.services import (
    allocations_expire,
    gpu_request_approve,
    gpu_request_release,
    gpu_request_submit,
)
from portal.catalog.models import Offering
from portal.cluster.models import ProvisioningRun, RunKind, RunState
from portal.core.errors import Conflict, InvalidTransition, NotFound, ValidationFailed
from portal.core.models import AuditEvent
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.services import (
    notebook_delete,
    notebook_launch,
    notebook_start,
    notebook_stop,
)
from tests.cluster.fixtures import run_queued
from tests.workloads.conftest import allocation_of, launch


def statefulset_of(kube_api, notebook: Notebook) -> dict[str, Any]:
    found: dict[str, Any] | None = kube_api.get_object(
        "apps/v1", "StatefulSet", notebook.kubernetes_name, "t-vision"
    )
    assert found is not None, "no StatefulSet"
    return found


def gpu_limits(kube_api, notebook: Notebook) -> dict[str, str]:
    container = statefulset_of(kube_api, notebook)["spec"]["template"]["spec"]["containers"][0]
    limits: dict[str, str] = container["resources"]["limits"]
    return {name: value for name, value in limits.items() if name not in ("cpu", "memory")}


def refreshed(notebook: Notebook) -> Notebook:
    return Notebook.objects.get(pk=notebook.pk)


@pytest.mark.parametrize(
    ("offering_slug", "expected"),
    [
        ("a100-80gb-whole", {"nvidia.com/gpu": "1"}),
        ("a100-80gb-mig-1g-10gb", {"nvidia.com/mig-1g.10gb": "1"}),
        ("a100-80gb-time-slicing-1-4", {"nvidia.com/gpu.shared": "1"}),
        (
            "a100-80gb-hami-20480mib",
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20480", "nvidia.com/gpucores": "25"},
        ),
        ("a100-40gb-gpushare-10gib", {"aliyun.com/gpu-mem": "10"}),
    ],
)
def test_launching_creates_the_objects_with_the_offerings_gpu_resources(
    live_cluster, kube_api, gpu_tenant, developer, catalog, offering_slug, expected
):
    offering = catalog[offering_slug]
    allocation = allocation_of(developer, gpu_tenant, offering)
    notebook = launch(developer, allocation)
    runs = run_queued(gpu_tenant)
    assert [run.state for run in runs] == [RunState.SUCCEEDED] * len(runs), runs
    [notebook_run] = [run for run in runs if run.kind == RunKind.NOTEBOOK]
    assert [(r.kind, r.outcome) for r in notebook_run.results.all()] == [
        ("Secret", "created"),
        ("PersistentVolumeClaim", "created"),
        ("StatefulSet", "created"),
        ("Service", "created"),
    ]
    assert "(redacted)" in notebook_run.manifests
    assert notebook.token not in notebook_run.manifests
    assert gpu_limits(kube_api, notebook) == expected
    pod = statefulset_of(kube_api, notebook)["spec"]["template"]
    model = offering.gpu_model
    assert pod["spec"]["nodeSelector"] == {model.node_label_key: model.node_label_value}
    for name, value in offering.annotations.items():
        assert pod["metadata"]["annotations"][name] == value
    assert statefulset_of(kube_api, notebook)["spec"]["replicas"] == 1
    claim = kube_api.get_object(
        "v1", "PersistentVolumeClaim", f"{notebook.kubernetes_name}-workspace", "t-vision"
    )
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.PENDING
    assert AuditEvent.objects.filter(
        action="notebook.launch", target_type="workloads.notebook", target_id=str(notebook.pk)
    ).exists()


def test_a_host_pattern_publishes_the_notebook_on_an_ingress(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    live_cluster.notebook_host_pattern = "{name}.{tenant}.gpu.example.org"
    live_cluster.save()
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    ingress = kube_api.get_object(
        "networking.k8s.io/v1", "Ingress", notebook.kubernetes_name, "t-vision"
    )
    host = f"{notebook.kubernetes_name}.vision.gpu.example.org"
    assert ingress["spec"]["rules"][0]["host"] == host
    assert refreshed(notebook).url == f"https://{host}/lab"


def test_stop_scales_to_zero_keeping_the_workspace_and_start_brings_it_back(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    notebook_stop(actor=developer, notebook=notebook)
    assert refreshed(notebook).state == NotebookState.STOPPING
    [run] = run_queued(gpu_tenant)
    assert run.state == RunState.SUCCEEDED, run.error
    assert statefulset_of(kube_api, notebook)["spec"]["replicas"] == 0
    assert kube_api.get_object(
        "v1", "PersistentVolumeClaim", f"{notebook.kubernetes_name}-workspace", "t-vision"
    )
    assert refreshed(notebook).state == NotebookState.STOPPED
    with pytest.raises(InvalidTransition):
        notebook_stop(actor=developer, notebook=notebook)

    notebook_start(actor=developer, notebook=notebook)
    run_queued(gpu_tenant)
    assert statefulset_of(kube_api, notebook)["spec"]["replicas"] == 1
    actions = list(
        AuditEvent.objects.filter(
            target_type="workloads.notebook", target_id=str(notebook.pk), actor=developer
        )
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["notebook.launch", "notebook.stop", "notebook.start"]


@pytest.mark.parametrize("keep_workspace", [True, False])
def test_delete_removes_the_objects_and_the_workspace_only_when_asked(
    live_cluster, kube_api, gpu_tenant, developer, catalog, keep_workspace
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    notebook_delete(actor=developer, notebook=notebook, keep_workspace=keep_workspace)
    [run] = run_queued(gpu_tenant)
    assert run.state == RunState.SUCCEEDED, run.error
    left = {
        (obj["kind"], obj["metadata"]["name"]) for obj in kube_api.objects(namespace="t-vision")
    }
    name = notebook.kubernetes_name
    assert ("StatefulSet", name) not in left
    assert ("Service", name) not in left
    assert ("Secret", f"{name}-token") not in left
    assert (("PersistentVolumeClaim", f"{name}-workspace") in left) is keep_workspace
    assert refreshed(notebook).state == NotebookState.DELETED
    with pytest.raises(InvalidTransition):
        notebook_delete(actor=developer, notebook=notebook, keep_workspace=True)


def test_releasing_the_allocation_stops_its_notebook_first(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    notebook = launch(developer, allocation)
    run_queued(gpu_tenant)
    gpu_request_release(actor=developer, gpu_request=allocation)
    notebook = refreshed(notebook)
    assert (notebook.desired, notebook.state) == (Desired.STOPPED, NotebookState.STOPPING)
    assert f"allocation {allocation.pk} released" in notebook.reason
    queued = ProvisioningRun.objects.filter(state=RunState.QUEUED).order_by("pk")
    assert [run.kind for run in queued] == [RunKind.NOTEBOOK, RunKind.BUNDLE]
    run_queued(gpu_tenant)
    assert statefulset_of(kube_api, notebook)["spec"]["replicas"] == 0
    with pytest.raises(InvalidTransition, match="request GPUs again"):
        notebook_start(actor=developer, notebook=notebook)


def test_an_expiring_allocation_stops_its_notebook(live_cluster, gpu_tenant, developer, catalog):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    notebook = launch(developer, allocation)
    run_queued(gpu_tenant)
    assert allocations_expire(now=allocation.ends_at) == 1
    assert refreshed(notebook).desired == Desired.STOPPED
    assert AuditEvent.objects.filter(action="notebook.stop", actor=None).exists()


def test_request_and_launch_in_one_waits_for_the_lead_then_starts(
    live_cluster, kube_api, gpu_tenant, developer, lead, catalog
):
    # 4 GPUs is above the 2 GPU-eq the tenant approves at once: a lead decides.
    notebook = notebook_launch(
        actor=developer,
        tenant="vision",
        offering="a100-80gb-whole",
        count=4,
        image="pytorch-cuda12",
    )
    assert notebook.state == NotebookState.WAITING
    assert notebook.allocation.state == RequestState.PENDING
    assert not ProvisioningRun.objects.filter(kind=RunKind.NOTEBOOK).exists()
    gpu_request_approve(actor=lead, gpu_request=notebook.allocation)
    assert refreshed(notebook).state == NotebookState.PENDING
    run_queued(gpu_tenant)
    assert gpu_limits(kube_api, notebook) == {"nvidia.com/gpu": "4"}
    assert notebook.cpu_cores == Decimal(4)  # the defaults


def test_a_rejected_request_fails_the_waiting_notebook(
    live_cluster, gpu_tenant, developer, lead, catalog
):
    from portal.allocations.services import gpu_request_reject  # noqa: PLC0415

    notebook = notebook_launch(
        actor=developer,
        tenant="vision",
        offering="a100-80gb-whole",
        count=4,
        image="pytorch-cuda12",
    )
    gpu_request_reject(actor=lead, gpu_request=notebook.allocation, comment="Not this week.")
    notebook = refreshed(notebook)
    assert notebook.state == NotebookState.FAILED
    assert "rejected" in notebook.reason
    assert "Not this week." in notebook.reason


# Bad input: every refusal names the field, and nothing is written.


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"image": "no-such-image"}, "image"),
        ({"image": "pytorch-rocm"}, "image"),  # disabled: not on the list
        ({"cpu_cores": "17"}, "cpu_cores"),  # above PORTAL_NOTEBOOK_MAX_CPU (16)
        ({"cpu_cores": "lots"}, "cpu_cores"),
        ({"cpu_cores": "0"}, "cpu_cores"),
        ({"memory_gib": 0}, "memory_gib"),
        ({"memory_gib": 4096}, "memory_gib"),
        ({"workspace_gib": 100000}, "workspace_gib"),
        ({"name": "Not A Slug"}, "name"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    gpu_tenant, developer, catalog, overrides, field
):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    with pytest.raises(ValidationFailed) as refused:
        launch(developer, allocation, **overrides)
    assert field in refused.value.fields
    assert not Notebook.objects.exists()


def test_an_image_for_another_vendor_is_refused(gpu_tenant, developer, catalog, admin_user):
    from portal.catalog.models import NotebookImage  # noqa: PLC0415
    from portal.catalog.services import notebook_image_update  # noqa: PLC0415

    image = NotebookImage.objects.get(slug="pytorch-rocm")
    notebook_image_update(actor=admin_user, notebook_image=image, enabled=True)
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    with pytest.raises(ValidationFailed, match="does not suit NVIDIA") as refused:
        launch(developer, allocation, image="pytorch-rocm")
    assert "image" in refused.value.fields


def test_the_cpu_limit_is_also_the_tenants_quota(gpu_tenant, developer, catalog, admin_user):
    from tenants.services import tenant_update  # noqa: PLC0415

    tenant_update(actor=admin_user, tenant=gpu_tenant, cpu_cores_quota=2)
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    with pytest.raises(ValidationFailed, match="At most 2 cores"):
        launch(developer, allocation, cpu_cores="3")


def test_another_users_or_tenants_allocation_is_not_found(
    gpu_tenant, tenant_b, developer, lead, outsider, admin_user, catalog
):
    from tenants.services import quota_set  # noqa: PLC0415

    leads_own = allocation_of(lead, gpu_tenant, catalog["a100-80gb-whole"])
    with pytest.raises(NotFound):
        launch(developer, leads_own)
    quota_set(
        actor=admin_user, tenant=tenant_b, gpu_model=catalog["a100-80gb-whole"].gpu_model, gpu_eq=4
    )
    theirs = gpu_request_submit(
        actor=outsider, tenant=tenant_b, offering=catalog["a100-80gb-whole"], count=1
    )
    with pytest.raises(NotFound):
        launch(developer, theirs)
    assert not Notebook.objects.exists()


def test_one_notebook_per_allocation(live_cluster, gpu_tenant, developer, catalog):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    launch(developer, allocation)
    with pytest.raises(Conflict, match="already has a notebook"):
        launch(developer, allocation)
    assert Notebook.objects.count() == 1


def test_more_units_than_the_offering_allows_per_workload_is_refused(
    gpu_tenant, developer, catalog
):
    offering: Offering = catalog["a100-80gb-time-slicing-1-4"]
    with pytest.raises(ValidationFailed):
        notebook_launch(
            actor=developer,
            tenant="vision",
            offering=offering.slug,
            count=2,
            image="pytorch-cuda12",
        )
    assert not Notebook.objects.exists()


def test_without_a_cluster_for_the_offering_the_launch_is_refused(gpu_tenant, developer, catalog):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    with pytest.raises(ValidationFailed, match="No enabled cluster runs") as refused:
        launch(developer, allocation)
    assert "offering" in refused.value.fields


def test_suspending_the_tenant_stops_its_notebooks_and_archiving_deletes_them(
    live_cluster, kube_api, gpu_tenant, developer, admin_user, catalog
):
    from tenants.services import tenant_change_state  # noqa: PLC0415

    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    tenant_change_state(actor=admin_user, tenant=gpu_tenant, action="suspend")
    notebook = refreshed(notebook)
    assert (notebook.desired, notebook.state) == (Desired.STOPPED, NotebookState.STOPPING)
    assert "suspended" in notebook.reason
    run_queued(gpu_tenant)
    assert statefulset_of(kube_api, notebook)["spec"]["replicas"] == 0
    with pytest.raises(InvalidTransition, match="suspended"):
        notebook_start(actor=developer, notebook=notebook)
    tenant_change_state(actor=admin_user, tenant=gpu_tenant, action="archive")
    assert refreshed(notebook).state == NotebookState.DELETED
    run_queued(gpu_tenant)
    assert kube_api.get_object("v1", "Namespace", "t-vision") is None


def test_a_failed_stop_can_be_tried_again(live_cluster, kube_api, gpu_tenant, developer, catalog):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    notebook_stop(actor=developer, notebook=notebook)
    kube_api.faults.fail_next(1, status=403, methods=("PATCH",))
    [failed] = run_queued(gpu_tenant)
    assert failed.state == RunState.FAILED
    notebook = refreshed(notebook)
    assert (notebook.desired, notebook.state) == (Desired.STOPPED, NotebookState.FAILED)
    notebook_stop(actor=developer, notebook=notebook)  # again, not a 409
    [run] = run_queued(gpu_tenant)
    assert run.state == RunState.SUCCEEDED, run.error
    assert refreshed(notebook).state == NotebookState.STOPPED
    assert statefulset_of(kube_api, notebook)["spec"]["replicas"] == 0


def test_a_member_removed_from_the_tenant_no_longer_sees_or_launches(
    live_cluster, gpu_tenant, developer, admin_user, catalog
):
    from tenants.services import membership_remove  # noqa: PLC0415

    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    notebook = launch(developer, allocation)
    spare = allocation_of(developer, gpu_tenant, catalog["a100-80gb-mig-1g-10gb"])
    membership_remove(actor=admin_user, tenant=gpu_tenant, username=developer.username)
    assert not Notebook.objects.visible_to(developer).filter(pk=notebook.pk).exists()
    with pytest.raises(NotFound):
        launch(developer, spare)


def test_a_request_and_launch_beyond_quota_is_refused_naming_the_count(
    live_cluster, gpu_tenant, developer, catalog
):
    from portal.allocations.models import GpuRequest  # noqa: PLC0415
    from portal.core.errors import QuotaExceeded  # noqa: PLC0415

    with pytest.raises(QuotaExceeded) as refused:
        notebook_launch(
            actor=developer,
            tenant="vision",
            offering="a100-80gb-whole",
            count=11,
            image="pytorch-cuda12",
        )
    assert "count" in refused.value.fields
    assert not Notebook.objects.exists()
    assert not GpuRequest.objects.filter(count=11).exists()


def test_an_unchanged_notebook_rerun_sends_no_write_and_reports_every_object_unchanged(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    from portal.cluster.services.runs import provisioning_run_queue  # noqa: PLC0415

    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    kube_api.reconcile_statefulsets()  # the cluster fills in its defaults and status
    kube_api.clear_log()
    notebook = refreshed(notebook)
    provisioning_run_queue(
        cluster=live_cluster,
        tenant=gpu_tenant,
        reason="again",
        actor=None,
        kind=RunKind.NOTEBOOK,
        notebook=notebook,
    )
    [run] = run_queued(gpu_tenant)
    assert run.state == RunState.SUCCEEDED, run.error
    assert [(r.kind, r.outcome) for r in run.results.all()] == [
        ("Secret", "unchanged"),
        ("PersistentVolumeClaim", "unchanged"),
        ("StatefulSet", "unchanged"),
        ("Service", "unchanged"),
    ]
    assert kube_api.writes() == []
    # No Ingress was ever made, so none is deleted: it is only looked for.
    assert [r.method for r in kube_api.requests if "/ingresses/" in r.path] == ["GET"]


def test_a_stop_writes_only_the_stateful_set_and_an_unpublished_notebook_loses_its_ingress(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    live_cluster.notebook_host_pattern = "{name}.{tenant}.gpu.example.org"
    live_cluster.save()
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    live_cluster.notebook_host_pattern = ""
    live_cluster.save()
    kube_api.clear_log()
    notebook_stop(actor=developer, notebook=notebook)
    [run] = run_queued(gpu_tenant)
    assert run.state == RunState.SUCCEEDED, run.error
    outcomes = [(r.kind, r.outcome) for r in run.results.all()]
    assert outcomes == [
        ("Secret", "unchanged"),
        ("PersistentVolumeClaim", "unchanged"),
        ("StatefulSet", "configured"),
        ("Service", "unchanged"),
        ("Ingress", "deleted"),
    ]
    assert run.results.get(kind="StatefulSet").drift == ["spec.replicas"]
    writes = [(r.method, r.path.rsplit("/", 2)[-2]) for r in kube_api.writes()]
    assert writes == [("PATCH", "statefulsets"), ("DELETE", "ingresses")]
    assert (
        kube_api.get_object("networking.k8s.io/v1", "Ingress", notebook.kubernetes_name, "t-vision")
        is None
    )
