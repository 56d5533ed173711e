"""The tenant bundle is a pure function of portal state, valid for Kubernetes."""

from decimal import Decimal
from typing import Any

import kubernetes_validate
import pytest

from portal.catalog.models import Offering
from portal.cluster.manifests import (
    BundleSpec,
    gpu_resource_totals,
    manifest_differences,
    manifests_yaml,
    tenant_bundle_manifests,
)

KUBERNETES_VERSION = "1.33.0"


def spec(**overrides) -> BundleSpec:
    values: dict[str, Any] = {
        "tenant_slug": "vision",
        "namespace": "t-vision",
        "suspended": False,
        "cpu_cores": 64,
        "memory_gib": 256,
        "storage_gib": 1024,
        "pods": 50,
        "volumes": 20,
        "gpu_resources": {},
        "known_gpu_resources": frozenset({"nvidia.com/gpu"}),
        "leads": ("lee",),
        "developers": ("dana", "ann"),
        "identity_prefix": "oidc:",
        "ingress_namespace_labels": {"kubernetes.io/metadata.name": "ingress-nginx"},
        "monitoring_namespace_labels": {"kubernetes.io/metadata.name": "monitoring"},
    }
    return BundleSpec(**(values | overrides))


def by_kind(manifests, kind, name=None):
    found = [m for m in manifests if m["kind"] == kind and name in (None, m["metadata"]["name"])]
    assert found, f"no {kind} {name or ''} rendered"
    return found[0]


def test_every_manifest_is_valid_for_every_offering_preset(catalog: dict[str, Offering]):
    assert len(catalog) > 20  # every backend in DOMAIN.md has presets
    for offering in catalog.values():
        totals = gpu_resource_totals([(offering.resources, 2)])
        manifests = tenant_bundle_manifests(
            spec(gpu_resources=totals, known_gpu_resources=frozenset(totals))
        )
        for manifest in manifests:
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        hard = by_kind(manifests, "ResourceQuota")["spec"]["hard"]
        for name, quantity in offering.resources.items():
            assert Decimal(hard[f"requests.{name}"]) == Decimal(quantity) * 2, offering.slug


def test_quota_sums_allocations_per_extended_resource_exactly():
    holdings = [
        ({"nvidia.com/mig-1g.10gb": "1"}, 7),
        ({"nvidia.com/gpu": "1"}, 2),
        ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20480"}, 3),
    ]
    totals = gpu_resource_totals(holdings)
    assert totals == {
        "nvidia.com/mig-1g.10gb": 7,
        "nvidia.com/gpu": 5,
        "nvidia.com/gpumem": 61440,
    }
    manifests = tenant_bundle_manifests(
        spec(gpu_resources=totals, known_gpu_resources=frozenset({"aliyun.com/gpu-mem"}))
    )
    hard = by_kind(manifests, "ResourceQuota")["spec"]["hard"]
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "7"
    assert hard["requests.nvidia.com/gpu"] == "5"
    assert hard["requests.nvidia.com/gpumem"] == "61440"
    # A resource the catalog knows but the tenant holds none of is capped at zero.
    assert hard["requests.aliyun.com/gpu-mem"] == "0"
    assert hard["requests.cpu"] == "64"
    assert hard["requests.memory"] == "256Gi"
    assert hard["requests.storage"] == "1024Gi"
    assert hard["pods"] == "50"
    assert hard["persistentvolumeclaims"] == "20"
    assert not any(key.startswith("limits.nvidia.com") for key in hard)


def test_suspended_tenant_gets_no_gpus_and_no_pods():
    manifests = tenant_bundle_manifests(
        spec(suspended=True, gpu_resources={"nvidia.com/gpu": Decimal(4)})
    )
    hard = by_kind(manifests, "ResourceQuota")["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "0"
    assert hard["pods"] == "0"


def test_namespace_is_labelled_for_tenant_manager_and_baseline_pod_security():
    namespace = tenant_bundle_manifests(spec())[0]
    assert namespace["kind"] == "Namespace"
    labels = namespace["metadata"]["labels"]
    assert labels["gpu-portal.io/tenant"] == "vision"
    assert labels["app.kubernetes.io/managed-by"] == "gpu-portal"
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"


def test_every_object_carries_the_bundle_labels_in_the_tenant_namespace():
    for manifest in tenant_bundle_manifests(spec())[1:]:
        assert manifest["metadata"]["namespace"] == "t-vision"
        assert manifest["metadata"]["labels"]["gpu-portal.io/component"] == "tenant-bundle"


def test_role_bindings_give_leads_edit_without_network_policies_and_developers_view():
    manifests = tenant_bundle_manifests(spec())
    leads = by_kind(manifests, "RoleBinding", "gpu-portal-leads")
    developers = by_kind(manifests, "RoleBinding", "gpu-portal-developers")
    assert leads["roleRef"]["name"] == "gpu-portal-tenant-lead"
    assert developers["roleRef"]["name"] == "view"
    assert [s["name"] for s in leads["subjects"]] == [
        "oidc:/gpu-portal/tenants/vision/leads",
        "oidc:lee",
    ]
    assert [s["name"] for s in developers["subjects"]] == [
        "oidc:/gpu-portal/tenants/vision/developers",
        "oidc:ann",
        "oidc:dana",
    ]


def test_network_policies_deny_by_default_and_allow_what_notebooks_need():
    manifests = tenant_bundle_manifests(spec())
    names = [m["metadata"]["name"] for m in manifests if m["kind"] == "NetworkPolicy"]
    assert names == [
        "default-deny",
        "allow-same-namespace",
        "allow-dns",
        "allow-ingress-controller",
        "allow-monitoring",
    ]
    deny = by_kind(manifests, "NetworkPolicy", "default-deny")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    ingress = by_kind(manifests, "NetworkPolicy", "allow-ingress-controller")["spec"]
    assert ingress["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "ingress-nginx"
    }


def test_unset_namespace_selector_renders_no_allowance_rather_than_all_namespaces():
    manifests = tenant_bundle_manifests(spec(monitoring_namespace_labels={}))
    names = [m["metadata"]["name"] for m in manifests if m["kind"] == "NetworkPolicy"]
    assert "allow-monitoring" not in names
    assert "allow-ingress-controller" in names


def test_rendering_is_deterministic_and_yaml_round_trips():
    import yaml  # noqa: PLC0415

    first = manifests_yaml(tenant_bundle_manifests(spec()))
    assert first == manifests_yaml(tenant_bundle_manifests(spec()))
    assert list(yaml.safe_load_all(first)) == tenant_bundle_manifests(spec())


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        # The server adds defaults, status and metadata: not drift.
        (
            {
                "metadata": {"name": "q", "uid": "1", "labels": {"a": "1", "extra": "x"}},
                "spec": {"hard": {"pods": "5"}},
                "status": {},
            },
            [],
        ),
        (
            {"metadata": {"name": "q", "labels": {"a": "2"}}, "spec": {"hard": {"pods": "5"}}},
            ["metadata.labels.a"],
        ),
        (
            {"metadata": {"name": "q", "labels": {"a": "1"}}, "spec": {"hard": {}}},
            ["spec.hard.pods"],
        ),
        ({"metadata": {"name": "q", "labels": {"a": "1"}}}, ["spec"]),
    ],
)
def test_differences_count_only_what_the_portal_renders(live, expected):
    desired = {"metadata": {"name": "q", "labels": {"a": "1"}}, "spec": {"hard": {"pods": "5"}}}
    assert manifest_differences(desired, live) == expected


def test_quantities_printed_differently_are_not_drift():
    desired = {"spec": {"hard": {"requests.memory": "1024Mi", "requests.cpu": "1"}}}
    live = {"spec": {"hard": {"requests.memory": "1Gi", "requests.cpu": "1000m"}}}
    assert manifest_differences(desired, live) == []
    live["spec"]["hard"]["requests.cpu"] = "2"
    assert manifest_differences(desired, live) == ["spec.hard.requests.cpu"]


def test_list_items_are_compared_in_order_and_by_length():
    desired = {"subjects": [{"name": "a"}, {"name": "b"}]}
    assert manifest_differences(desired, {"subjects": [{"name": "a"}]}) == ["subjects"]
    assert manifest_differences(desired, {"subjects": [{"name": "a"}, {"name": "c"}]}) == [
        "subjects[1].name"
    ]


def test_container_defaults_never_exceed_the_tenant_quota():
    default = by_kind(tenant_bundle_manifests(spec()), "LimitRange")["spec"]["limits"][0]
    assert default["default"] == {"cpu": "2", "memory": "8Gi"}
    assert default["defaultRequest"] == {"cpu": "500m", "memory": "1Gi"}
    small = by_kind(tenant_bundle_manifests(spec(cpu_cores=1, memory_gib=4)), "LimitRange")
    assert small["spec"]["limits"][0]["default"] == {"cpu": "1", "memory": "4Gi"}
    none = by_kind(tenant_bundle_manifests(spec(cpu_cores=0, memory_gib=0)), "LimitRange")
    assert none["spec"]["limits"][0] == {"type": "Container", "default": {}, "defaultRequest": {}}
    kubernetes_validate.validate(none, KUBERNETES_VERSION, strict=True)
