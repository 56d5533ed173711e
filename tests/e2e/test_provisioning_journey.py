"""An admin creates a tenant and watches its namespace being provisioned, on the page, by a real
Celery worker applying to the Kubernetes API emulator."""

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from portal.cluster.services import cluster_create
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser


def test_admin_creates_a_tenant_and_watches_the_run_finish(
    live_server, page: Page, admin_user, celery_worker, kube_api, settings, tmp_path: Path
) -> None:
    settings.PORTAL_CLUSTER_MODE = "kubernetes"
    settings.PORTAL_CLUSTER_RETRY_BACKOFF_SECONDS = 0.01
    kubeconfig = tmp_path / "kubeconfig"
    kube_api.kubeconfig(kubeconfig)
    cluster_create(
        actor=admin_user,
        name="lab",
        mode="kubernetes",
        connection="kubeconfig",
        kubeconfig_path=str(kubeconfig),
    )
    # Slow enough writes that the page shows the run in progress before it ends.
    kube_api.faults.slow(0.4, methods=("PATCH",))

    sign_in(page, live_server.url, "admin")
    page.goto(f"{live_server.url}/manage/tenants/")
    page.get_by_role("link", name="New tenant").click()
    page.get_by_label("Slug").fill("genomics")
    page.get_by_label("Name").fill("Genomics Lab")
    page.get_by_role("button", name="Create tenant").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Genomics Lab")

    section = page.get_by_test_id("provisioning")
    expect(section.get_by_test_id("provisioning-progress")).to_be_visible()
    # The section polls until the run ends, then stops.
    expect(section.get_by_test_id("run-state")).to_have_text("succeeded", timeout=30_000)
    expect(section.get_by_test_id("provisioning-progress")).to_have_count(0)
    expect(section.get_by_test_id("object-Namespace-t-genomics")).to_contain_text("created")
    expect(section.get_by_test_id("object-NetworkPolicy-default-deny")).to_be_visible()
    assert kube_api.get_object("v1", "Namespace", "t-genomics") is not None

    section.get_by_role("link", name="#").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Provisioning run")
    expect(page.get_by_test_id("result-ResourceQuota-tenant-quota")).to_contain_text("created")
    expect(page.get_by_test_id("manifests")).to_contain_text("kind: ResourceQuota")
