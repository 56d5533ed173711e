"""Provisioning runs on /metrics: what the alerts on stuck and failed runs read."""

from django.test import Client

from portal.cluster.models import ProvisioningRun, RunState
from portal.cluster.services import (
    cluster_create,
    provisioning_request,
    provisioning_run_execute,
)
from tenants.services import tenant_create
from tests.scrape import scraped


def test_unfinished_runs_are_counted_per_cluster_with_the_oldest_one_queued(
    client: Client, admin_user
) -> None:
    cluster_create(actor=None, name="lab")
    cluster_create(actor=None, name="spare")
    first = tenant_create(actor=admin_user, slug="genomics", name="Genomics")
    tenant_create(actor=admin_user, slug="physics", name="Physics")
    oldest = ProvisioningRun.objects.filter(cluster__name="lab", tenant=first).get()
    ProvisioningRun.objects.filter(cluster__name="spare").update(state=RunState.SUCCEEDED)

    assert scraped(client, "portal_provisioning_runs_unfinished") == {
        (("cluster", "lab"), ("state", "queued")): 2.0,
        (("cluster", "lab"), ("state", "running")): 0.0,
        (("cluster", "spare"), ("state", "queued")): 0.0,
        (("cluster", "spare"), ("state", "running")): 0.0,
    }
    assert scraped(client, "portal_provisioning_oldest_unfinished_run_timestamp_seconds") == {
        (("cluster", "lab"),): oldest.created_at.timestamp()
    }


def test_a_failed_run_counts_until_a_later_run_of_the_namespace(client: Client, admin_user) -> None:
    cluster_create(actor=None, name="lab")
    tenant = tenant_create(actor=admin_user, slug="genomics", name="Genomics")
    other = tenant_create(actor=admin_user, slug="physics", name="Physics")
    ProvisioningRun.objects.update(state=RunState.FAILED, error="Forbidden")

    assert scraped(client, "portal_provisioning_failed_runs") == {(("cluster", "lab"),): 2.0}

    [again] = provisioning_request(tenant=tenant, reason="retry", actor=admin_user)
    # The new run is queued: the failure it may fix no longer counts.
    assert scraped(client, "portal_provisioning_failed_runs") == {(("cluster", "lab"),): 1.0}
    # The other tenant's failure still stands whatever its neighbour's runs do.
    provisioning_run_execute(run_id=again.pk)
    assert ProvisioningRun.objects.filter(tenant=other, state=RunState.FAILED).exists()
    assert scraped(client, "portal_provisioning_failed_runs") == {(("cluster", "lab"),): 1.0}
