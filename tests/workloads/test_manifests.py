"""A notebook's objects are a pure function of portal state, valid for Kubernetes, with the GPU
part taken from the offering."""

from decimal import Decimal
from typing import Any

import kubernetes_validate
import pytest

from portal.catalog.models import Offering
from portal.workloads.manifests import (
    NotebookSpec,
    notebook_host,
    notebook_manifests,
    redacted,
)

KUBERNETES_VERSION = "1.33.0"


def spec_for(offering: Offering, **overrides: Any) -> NotebookSpec:
    model = offering.gpu_model
    values: dict[str, Any] = {
        "name": "nb-7",
        "namespace": "t-vision",
        "tenant_slug": "vision",
        "owner": "dana",
        "image": "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-10",
        "cpu_cores": Decimal("0.5"),
        "memory_gib": 16,
        "workspace_gib": 20,
        "gpu_resources": offering.resources,
        "annotations": offering.annotations,
        "node_selector": {model.node_label_key: model.node_label_value},
        "host": "nb-7.vision.gpu.example.org",
        "token": "s3cret-token",
    }
    return NotebookSpec(**(values | overrides))


def by_kind(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [manifest for manifest in manifests if manifest["kind"] == kind]
    return found


def container_of(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    pod = by_kind(manifests, "StatefulSet")["spec"]["template"]["spec"]
    container: dict[str, Any] = pod["containers"][0]
    return container


def test_every_manifest_is_valid_for_every_offering_preset(catalog: dict[str, Offering]):
    for offering in catalog.values():
        manifests = notebook_manifests(spec_for(offering))
        assert [m["kind"] for m in manifests] == [
            "Secret", "PersistentVolumeClaim", "StatefulSet", "Service", "Ingress",
        ]  # fmt: skip
        for manifest in manifests:
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        resources = container_of(manifests)["resources"]
        for name, quantity in offering.resources.items():
            assert resources["limits"][name] == resources["requests"][name] == quantity


@pytest.mark.parametrize(
    ("slug", "units", "expected"),
    [
        ("a100-80gb-whole", 2, {"nvidia.com/gpu": "2"}),
        ("a100-80gb-mig-1g-10gb", 2, {"nvidia.com/mig-1g.10gb": "2"}),
        ("a100-80gb-time-slicing-1-4", 1, {"nvidia.com/gpu.shared": "1"}),
        # HAMi's memory and cores are per GPU, and its offerings allow one unit per workload.
        (
            "a100-80gb-hami-20480mib",
            1,
            {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20480", "nvidia.com/gpucores": "25"},
        ),
        ("t4-gpushare-4gib", 2, {"aliyun.com/gpu-mem": "8"}),
    ],
)
def test_the_gpu_request_is_the_offerings_resources_times_the_units(
    catalog: dict[str, Offering], slug: str, units: int, expected: dict[str, str]
):
    manifests = notebook_manifests(spec_for(catalog[slug], gpu_units=units))
    limits = container_of(manifests)["resources"]["limits"]
    assert {name: value for name, value in limits.items() if "/" in name} == expected
    assert limits["cpu"] == "500m"
    assert limits["memory"] == "16Gi"


def test_the_pod_lands_on_the_models_nodes_and_tolerates_their_taint(
    catalog: dict[str, Offering],
):
    offering = catalog["a100-80gb-mig-1g-10gb"]
    pod = by_kind(notebook_manifests(spec_for(offering)), "StatefulSet")["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {
        offering.gpu_model.node_label_key: offering.gpu_model.node_label_value
    }
    assert pod["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["spec"]["serviceAccountName"] == "workload"
    assert pod["metadata"]["labels"]["gpu-portal.io/component"] == "notebook"


def test_hami_offerings_carry_the_gpu_type_annotation(catalog: dict[str, Offering]):
    offering = catalog["a100-80gb-hami-20480mib"]
    pod = by_kind(notebook_manifests(spec_for(offering)), "StatefulSet")["spec"]["template"]
    assert "nvidia.com/use-gputype" in pod["metadata"]["annotations"]


def test_a_stopped_notebook_has_no_replica_and_keeps_its_workspace(
    catalog: dict[str, Offering],
):
    manifests = notebook_manifests(spec_for(catalog["t4-whole"], running=False))
    assert by_kind(manifests, "StatefulSet")["spec"]["replicas"] == 0
    claim = by_kind(manifests, "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "nb-7-workspace"
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"


def test_without_a_host_pattern_there_is_no_ingress(catalog: dict[str, Offering]):
    manifests = notebook_manifests(spec_for(catalog["t4-whole"], host=""))
    assert "Ingress" not in [manifest["kind"] for manifest in manifests]
    assert notebook_host("", name="nb-7", tenant_slug="vision") == ""
    assert (
        notebook_host("{name}.{tenant}.gpu.example.org", name="nb-7", tenant_slug="vision")
        == "nb-7.vision.gpu.example.org"
    )


def test_notebook_objects_are_not_part_of_the_tenant_bundle(catalog: dict[str, Offering]):
    # The bundle's reconcile deletes labelled bundle objects it no longer renders; notebooks
    # carry another component label, so it never touches them.
    for manifest in notebook_manifests(spec_for(catalog["t4-whole"])):
        assert manifest["metadata"]["labels"]["gpu-portal.io/component"] == "notebook"


def test_the_token_reaches_jupyter_through_a_secret_and_is_redacted_when_stored(catalog):
    manifests = notebook_manifests(spec_for(catalog["a100-80gb-whole"]))
    secret = by_kind(manifests, "Secret")
    assert secret["stringData"] == {"token": "s3cret-token"}
    [env] = container_of(manifests)["env"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "nb-7-token", "key": "token"}
    assert "s3cret-token" not in str(container_of(manifests))
    assert redacted(secret)["stringData"] == {"token": "(redacted)"}
    assert secret["stringData"] == {"token": "s3cret-token"}  # the original is untouched


def test_prometheus_scrapes_the_servers_kernel_activity_without_the_token(catalog):
    manifests = notebook_manifests(spec_for(catalog["a100-80gb-whole"], base_url="/nb/"))
    annotations = by_kind(manifests, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/nb/metrics"
    assert "--ServerApp.authenticate_prometheus=False" in container_of(manifests)["args"]
