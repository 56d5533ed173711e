"""A developer launches a notebook on a fractional A100, watches it start, stops it and starts
it again: a real Celery worker applies the objects to the Kubernetes API emulator, and the
test plays the kubelet by marking the pod running."""

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from portal.cluster.services import cluster_create
from portal.workloads.models import Notebook
from tests.conftest import wait_until
from tests.e2e.test_tenant_admin_journey import sign_in

pytestmark = pytest.mark.browser


def test_developer_launches_a_notebook_on_a_mig_slice_stops_and_starts_it(
    live_server,
    page: Page,
    developer,
    a100_tenant,
    celery_worker,
    kube_api,
    settings,
    tmp_path: Path,
) -> None:
    settings.PORTAL_CLUSTER_MODE = "kubernetes"
    settings.PORTAL_CLUSTER_RETRY_BACKOFF_SECONDS = 0.01
    kubeconfig = tmp_path / "kubeconfig"
    kube_api.kubeconfig(kubeconfig)
    cluster_create(
        actor=None,
        name="lab",
        mode="kubernetes",
        connection="kubeconfig",
        kubeconfig_path=str(kubeconfig),
        notebook_host_pattern="{name}.{tenant}.gpu.example.org",
    )

    sign_in(page, live_server.url, "dev")
    page.get_by_role("link", name="Notebooks").click()
    page.get_by_role("link", name="Launch a notebook").first.click()
    page.get_by_label("Tenant").select_option("vision")
    page.get_by_label("GPU and size").select_option("a100-80gb-mig-1g-10gb")
    expect(page.get_by_test_id("decision-path")).to_contain_text("Approved at once")
    page.get_by_label("Image").select_option("pytorch-cuda12")
    page.get_by_label("Name", exact=True).fill("thesis")
    page.get_by_role("button", name="Launch").click()

    expect(page.get_by_role("heading", level=1)).to_contain_text("Notebook thesis")
    state = page.get_by_test_id("notebook-state")
    expect(state).to_have_text("pending", timeout=20_000)
    notebook = Notebook.objects.get()
    name = notebook.kubernetes_name

    def pod_made() -> bool:
        # The test plays the StatefulSet controller and the kubelet.
        kube_api.reconcile_statefulsets()
        return kube_api.get_object("v1", "Pod", f"{name}-0", "t-vision") is not None

    wait_until(pod_made, timeout=30, what="the notebook's pod")
    limits = kube_api.get_object("v1", "Pod", f"{name}-0", "t-vision")["spec"]["containers"][0]
    assert limits["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"
    kube_api.set_pod_running("t-vision", f"{name}-0")

    expect(state).to_have_text("running", timeout=30_000)
    link = page.get_by_test_id("notebook-url")
    expect(link).to_have_attribute(
        "href", f"https://{name}.vision.gpu.example.org/lab?token={notebook.token}"
    )

    page.get_by_role("button", name="Stop").click()  # asks first
    page.get_by_role("dialog").get_by_role("button", name="Stop notebook").click()
    expect(state).to_have_text("stopped", timeout=30_000)
    statefulset = kube_api.get_object("apps/v1", "StatefulSet", name, "t-vision")
    assert statefulset["spec"]["replicas"] == 0
    kube_api.reconcile_statefulsets()
    assert kube_api.get_object("v1", "Pod", f"{name}-0", "t-vision") is None
    workspace = kube_api.get_object("v1", "PersistentVolumeClaim", f"{name}-workspace", "t-vision")
    assert workspace is not None

    page.get_by_role("button", name="Start").click()
    expect(state).to_have_text("pending", timeout=30_000)
    wait_until(pod_made, timeout=30, what="the notebook's pod again")
    kube_api.set_pod_running("t-vision", f"{name}-0")
    expect(state).to_have_text("running", timeout=30_000)

    page.get_by_role("link", name="All notebooks").click()
    row = page.get_by_test_id(f"notebook-{notebook.pk}")
    expect(row.get_by_test_id("notebook-state")).to_have_text("running")
