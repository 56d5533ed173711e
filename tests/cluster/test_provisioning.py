"""Provisioning runs in dry-run mode: queued on commit, claimed once, results recorded, and the
allocations they provision started. The cluster emulator tests cover applying for real."""

from datetime import timedelta

import pytest
import yaml
from django.urls import reverse
from django.utils import timezone

from portal.allocations.models import RequestState
from portal.allocations.services import gpu_request_release, gpu_request_submit
from portal.cluster.models import Outcome, ProvisioningRun, RunKind, RunState
from portal.cluster.services import (
    cluster_create,
    provisioning_run_execute,
    provisioning_run_retry,
    provisioning_runs_resume,
)
from portal.core.errors import InvalidTransition, ValidationFailed
from portal.core.models import AuditEvent
from tenants.models import MemberRole
from tenants.services import membership_set, tenant_change_state, tenant_create


@pytest.fixture
def dry_cluster(db):
    return cluster_create(actor=None, name="lab")


def test_creating_a_tenant_provisions_it_in_every_enabled_cluster(
    dry_cluster, admin_user, tasks_in_process, django_capture_on_commit_callbacks
):
    cluster_create(actor=admin_user, name="spare", enabled=False)
    with django_capture_on_commit_callbacks(execute=True):
        tenant = tenant_create(actor=admin_user, slug="genomics", name="Genomics")
    run = ProvisioningRun.objects.get(tenant=tenant)
    assert run.cluster == dry_cluster
    assert run.state == RunState.SUCCEEDED
    assert run.dry_run
    assert run.reason == "tenant created"
    assert run.requested_by == admin_user
    outcomes = list(run.results.values_list("kind", "name", "outcome"))
    assert outcomes[0] == ("Namespace", "t-genomics", Outcome.RENDERED)
    assert {kind for kind, _, _ in outcomes} == {
        "Namespace", "ServiceAccount", "ResourceQuota", "LimitRange", "RoleBinding",
        "NetworkPolicy",
    }  # fmt: skip
    documents = list(yaml.safe_load_all(run.manifests))
    assert [doc["metadata"]["name"] for doc in documents] == [name for _, name, _ in outcomes]
    assert AuditEvent.objects.filter(action="provisioning_run.succeeded").count() == 1


def test_changes_made_while_a_run_waits_share_that_run(dry_cluster, admin_user, developer):
    tenant = tenant_create(actor=admin_user, slug="genomics", name="Genomics")
    membership_set(actor=admin_user, tenant=tenant, user=developer, role=MemberRole.LEAD)
    membership_set(actor=admin_user, tenant=tenant, user=developer, role=MemberRole.DEVELOPER)
    runs = ProvisioningRun.objects.filter(tenant=tenant)
    assert runs.count() == 1
    assert runs.get().state == RunState.QUEUED


def test_a_run_is_executed_once_however_often_it_is_delivered(dry_cluster, tenant_a):
    run = ProvisioningRun.objects.get(tenant=tenant_a)
    first = provisioning_run_execute(run_id=run.pk, worker="w1")
    assert first is not None
    assert first.state == RunState.SUCCEEDED
    assert provisioning_run_execute(run_id=run.pk, worker="w2") is None
    run.refresh_from_db()
    assert (run.attempts, run.claimed_by) == (1, "w1")


def test_an_approved_allocation_becomes_active_when_its_run_succeeds(
    dry_cluster, a100_tenant, developer, catalog, client_for
):
    for run in ProvisioningRun.objects.filter(tenant=a100_tenant):
        provisioning_run_execute(run_id=run.pk)
    allocation = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    assert allocation.state == RequestState.APPROVED
    run = ProvisioningRun.objects.get(tenant=a100_tenant, state=RunState.QUEUED)
    assert list(run.gpu_requests.all()) == [allocation]
    provisioning_run_execute(run_id=run.pk)
    allocation.refresh_from_db()
    assert allocation.state == RequestState.ACTIVE
    body = client_for(developer).get(reverse("api:request", args=[allocation.pk])).json()
    assert [(r["id"], r["state"]) for r in body["provisioning_runs"]] == [(run.pk, "succeeded")]
    hard = next(
        doc for doc in yaml.safe_load_all(ProvisioningRun.objects.get(pk=run.pk).manifests)
        if doc["kind"] == "ResourceQuota"
    )["spec"]["hard"]  # fmt: skip
    assert hard["requests.nvidia.com/gpu"] == "1"
    assert AuditEvent.objects.filter(action="gpu_request.activate", target_id=str(allocation.pk))

    # Releasing it queues a run that takes the GPU out of the namespace's quota again.
    gpu_request_release(actor=developer, gpu_request=allocation)
    run = ProvisioningRun.objects.get(tenant=a100_tenant, state=RunState.QUEUED)
    assert "allocation ends" in run.reason
    provisioning_run_execute(run_id=run.pk)
    hard = next(
        doc for doc in yaml.safe_load_all(ProvisioningRun.objects.get(pk=run.pk).manifests)
        if doc["kind"] == "ResourceQuota"
    )["spec"]["hard"]  # fmt: skip
    assert hard["requests.nvidia.com/gpu"] == "0"


def test_only_failed_runs_are_retried(dry_cluster, tenant_a, admin_user):
    run = ProvisioningRun.objects.get(tenant=tenant_a)
    with pytest.raises(InvalidTransition, match="queued"):
        provisioning_run_retry(actor=admin_user, run=run)


def test_archiving_a_tenant_queues_the_deletion_of_its_namespace(dry_cluster, tenant_a, admin_user):
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="archive")
    run = ProvisioningRun.objects.get(tenant=tenant_a, kind=RunKind.DELETE)
    assert run.reason == "tenant archived"


def test_a_run_whose_worker_vanished_is_queued_again(dry_cluster, tenant_a):
    run = ProvisioningRun.objects.get(tenant=tenant_a)
    ProvisioningRun.objects.filter(pk=run.pk).update(
        state=RunState.RUNNING, started_at=timezone.now() - timedelta(hours=1), claimed_by="gone"
    )
    assert provisioning_runs_resume() == [run.pk]
    run.refresh_from_db()
    assert run.state == RunState.QUEUED
    assert "gone" in run.error
    assert AuditEvent.objects.filter(action="provisioning_run.requeue").count() == 1
    finished = provisioning_run_execute(run_id=run.pk)
    assert finished is not None
    assert finished.state == RunState.SUCCEEDED


def test_a_cluster_with_a_kubeconfig_connection_needs_its_path(db):
    with pytest.raises(ValidationFailed) as refused:
        cluster_create(actor=None, name="prod", connection="kubeconfig")
    assert "kubeconfig_path" in refused.value.fields


def test_cluster_labels_must_be_valid_kubernetes_labels(db):
    with pytest.raises(ValidationFailed) as refused:
        cluster_create(actor=None, name="prod", ingress_namespace_labels={"bad key!": "x"})
    assert "ingress_namespace_labels" in refused.value.fields


def test_an_old_bundle_run_of_an_archived_tenant_only_deletes(dry_cluster, tenant_a, admin_user):
    bundle = ProvisioningRun.objects.get(tenant=tenant_a)
    tenant_change_state(actor=admin_user, tenant=tenant_a, action="archive")
    done = provisioning_run_execute(run_id=bundle.pk)
    assert done is not None
    assert done.kind == RunKind.DELETE
    assert done.manifests.strip() in ("", "[]")


def test_allocations_count_only_in_clusters_with_a_pool_for_them(
    dry_cluster, a100_tenant, developer, catalog
):
    from portal.catalog.services import gpu_pool_create  # noqa: PLC0415

    for run in ProvisioningRun.objects.filter(tenant=a100_tenant):
        provisioning_run_execute(run_id=run.pk)
    # Approved while the cluster described no pools (it then hosts every offering) ...
    allocation = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    t4 = catalog["t4-whole"]
    gpu_pool_create(
        actor=None, cluster="lab", name="t4", gpu_model=t4.gpu_model, backend=t4.backend
    )
    # ... and run once its only pool is of T4s: no quota for it there, and it stays approved.
    run = ProvisioningRun.objects.get(tenant=a100_tenant, state=RunState.QUEUED)
    finished = provisioning_run_execute(run_id=run.pk)
    assert finished is not None
    hard = next(d for d in yaml.safe_load_all(finished.manifests) if d["kind"] == "ResourceQuota")
    assert hard["spec"]["hard"]["requests.nvidia.com/gpu"] == "0"
    allocation.refresh_from_db()
    assert allocation.state == RequestState.APPROVED  # no cluster here runs it
    # A new request for it is refused: no pool serves it.
    again = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    assert again.state == RequestState.REJECTED


def test_a_suspended_tenants_allocations_do_not_start(
    dry_cluster, a100_tenant, developer, admin_user, catalog
):
    allocation = gpu_request_submit(
        actor=developer, tenant=a100_tenant, offering=catalog["a100-80gb-whole"], count=1
    )
    tenant_change_state(actor=admin_user, tenant=a100_tenant, action="suspend")
    for run in ProvisioningRun.objects.filter(tenant=a100_tenant, state=RunState.QUEUED):
        provisioning_run_execute(run_id=run.pk)
    allocation.refresh_from_db()
    assert allocation.state == RequestState.REVOKED  # ended by the suspension, never active


def test_a_run_abandoned_too_often_fails_instead_of_looping(dry_cluster, tenant_a):
    run = ProvisioningRun.objects.get(tenant=tenant_a)
    ProvisioningRun.objects.filter(pk=run.pk).update(
        state=RunState.RUNNING, started_at=timezone.now() - timedelta(hours=1), attempts=4
    )
    assert provisioning_runs_resume() == []
    run.refresh_from_db()
    assert run.state == RunState.FAILED
    assert "gave up" in run.error


def test_a_clusters_namespace_prefix_cannot_change(dry_cluster, admin_user):
    from portal.cluster.services import cluster_update  # noqa: PLC0415

    with pytest.raises(ValidationFailed) as refused:
        cluster_update(actor=admin_user, cluster=dry_cluster, namespace_prefix="gpu-")
    assert "namespace_prefix" in refused.value.fields
    cluster_update(actor=admin_user, cluster=dry_cluster, pods_per_namespace=80)
    dry_cluster.refresh_from_db()
    assert dry_cluster.pods_per_namespace == 80
