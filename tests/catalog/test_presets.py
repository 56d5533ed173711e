from fractions import Fraction
from io import StringIO

import pytest
from django.core.management import call_command

from portal.catalog.models import GpuModel, GpuPool, Offering, SharingBackend
from portal.catalog.presets import (
    BACKENDS,
    IMAGES,
    MIG_PROFILES,
    MODELS,
    OFFERINGS,
    catalog_presets_load,
)
from portal.catalog.services import gpu_model_update, offering_update
from portal.catalog.validators import (
    validate_annotations,
    validate_label_key,
    validate_label_value,
    validate_resources,
)
from portal.core.models import AuditEvent
from tenants.models import Quota


@pytest.fixture
def presets(db) -> None:
    catalog_presets_load(actor=None)


def test_presets_load_once_and_a_second_run_creates_nothing(db) -> None:
    first = catalog_presets_load(actor=None)
    rows = (SharingBackend.objects.count(), GpuModel.objects.count(), Offering.objects.count())
    events = AuditEvent.objects.count()

    second = catalog_presets_load(actor=None)

    assert first == {
        "backends": len(BACKENDS), "models": len(MODELS), "offerings": len(OFFERINGS),
        "images": len(IMAGES),
    }  # fmt: skip
    assert rows == (len(BACKENDS), len(MODELS), len(OFFERINGS))
    assert second == {"backends": 0, "models": 0, "offerings": 0, "images": 0}
    assert (
        SharingBackend.objects.count(),
        GpuModel.objects.count(),
        Offering.objects.count(),
    ) == rows
    assert AuditEvent.objects.count() == events


def test_presets_are_written_through_the_services_and_audited(db) -> None:
    catalog_presets_load(actor=None)

    assert AuditEvent.objects.filter(action="offering.create").count() == len(OFFERINGS)
    assert AuditEvent.objects.filter(action="gpu_model.create").count() == len(MODELS)
    assert AuditEvent.objects.filter(action="backend.create").count() == len(BACKENDS)


def test_a_rerun_leaves_an_admins_edits_alone(admin_user, presets) -> None:
    offering = Offering.objects.get(slug="t4-time-slicing-1-4")
    offering_update(actor=admin_user, offering=offering, name="T4 quarter", enabled=False)
    model = GpuModel.objects.get(slug="a100-80gb")
    gpu_model_update(actor=admin_user, gpu_model=model, slug="a100-sxm-80")

    again = catalog_presets_load(actor=admin_user)

    assert again == {"backends": 0, "models": 0, "offerings": 0, "images": 0}
    offering.refresh_from_db()
    assert (offering.name, offering.enabled) == ("T4 quarter", False)
    # The renamed model is recognised by its name, not created a second time.
    assert not GpuModel.objects.filter(slug="a100-80gb").exists()
    assert GpuModel.objects.count() == len(MODELS)


def test_a_deleted_preset_comes_back_on_the_next_run(presets) -> None:
    Offering.objects.filter(slug="h100-80gb-mig-1g-20gb").delete()  # as a repair would

    again = catalog_presets_load(actor=None)

    assert again == {"backends": 0, "models": 0, "offerings": 1, "images": 0}
    assert Offering.objects.get(slug="h100-80gb-mig-1g-20gb").gpu_eq == Fraction(1, 7)


def test_every_backend_in_the_domain_has_offerings(presets) -> None:
    resources = {name for offering in Offering.objects.all() for name in offering.resources}

    assert {"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/gpumem", "nvidia.com/gpucores",
            "aliyun.com/gpu-mem", "tencent.com/vcuda-core", "tencent.com/vcuda-memory",
            "amd.com/gpu"} <= resources  # fmt: skip
    for model, profiles in MIG_PROFILES.items():
        for profile in profiles:
            assert Offering.objects.filter(
                gpu_model__slug=model, resources__has_key=f"nvidia.com/mig-{profile}"
            ).exists(), (model, profile)
    assert set(SharingBackend.objects.values_list("slug", flat=True)) == {b.slug for b in BACKENDS}
    for backend in SharingBackend.objects.all():
        assert backend.offerings.exists(), backend.slug


def test_every_preset_offering_is_valid(presets) -> None:
    for offering in Offering.objects.select_related("gpu_model"):
        validate_resources(offering.resources)
        validate_annotations(offering.annotations)
        if offering.whole:
            assert offering.gpu_eq.denominator == 1, offering.slug
            assert offering.gpu_eq >= 1, offering.slug
        else:
            assert 0 < offering.gpu_eq <= 1, offering.slug


def test_every_preset_model_has_a_valid_node_label(presets) -> None:
    for model in GpuModel.objects.all():
        validate_label_key(model.node_label_key)
        validate_label_value(model.node_label_value)

    labels = dict(GpuModel.objects.values_list("slug", "node_label_value"))
    assert labels["a100-80gb"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["h100-80gb"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["t4"] == "Tesla-T4"
    amd = GpuModel.objects.get(slug="mi250")
    assert (amd.node_label_key, amd.vendor) == ("amd.com/gpu.product-name", "AMD")


@pytest.mark.parametrize(
    ("model", "profile"),
    [(model, profile) for model, profiles in MIG_PROFILES.items() for profile in profiles],
)
def test_mig_slices_count_their_compute_slices_in_sevenths(presets, model, profile) -> None:
    offering = Offering.objects.get(resources__has_key=f"nvidia.com/mig-{profile}",
                                    gpu_model__slug=model)  # fmt: skip

    assert offering.gpu_eq == Fraction(int(profile[0]), 7)
    assert offering.resources == {f"nvidia.com/mig-{profile}": "1"}
    assert offering.backend.slug == "mig"


def test_fractional_presets_follow_their_backends_rules(presets) -> None:
    gpu_eq = {offering.slug: offering.gpu_eq for offering in Offering.objects.all()}

    assert gpu_eq["a100-80gb-mig-3g-40gb"] == Fraction(3, 7)
    assert gpu_eq["h100-80gb-mig-7g-80gb"] == 1
    assert gpu_eq["t4-time-slicing-1-4"] == Fraction(1, 4)
    assert gpu_eq["a100-80gb-mps-1-2"] == Fraction(1, 2)
    assert gpu_eq["a100-80gb-hami-20480mib"] == Fraction(1, 4)  # max(20480/81920, 25/100)
    assert gpu_eq["t4-hami-3840mib"] == Fraction(1, 4)  # max(3840/15360, 25/100)
    assert gpu_eq["t4-gpushare-4gib"] == Fraction(4, 15)  # 4 GiB of 15 GiB
    assert gpu_eq["a100-40gb-gpushare-10gib"] == Fraction(1, 4)
    assert gpu_eq["t4-vcuda-half"] == Fraction(1, 2)  # vcuda-core 50 of 100


def test_shares_allow_one_unit_per_workload_and_whole_gpus_any(presets) -> None:
    shared = Offering.objects.filter(resources__has_key="nvidia.com/gpu.shared")

    assert shared.exists()
    assert set(shared.values_list("max_units_per_workload", flat=True)) == {1}
    assert set(shared.values_list("backend__slug", flat=True)) == {"time-slicing", "mps"}
    whole = Offering.objects.filter(whole=True)
    assert set(whole.values_list("max_units_per_workload", flat=True)) == {None}
    assert whole.count() == len(MODELS)


def test_amd_gpus_are_whole_amd_gpus(presets) -> None:
    offering = Offering.objects.get(gpu_model__slug="mi250")

    assert offering.resources == {"amd.com/gpu": "1"}
    assert offering.backend.slug == "amd"
    assert offering.gpu_eq == 1


def test_vcuda_memory_is_in_256_mib_units_in_proportion_to_the_cores(presets) -> None:
    for offering in Offering.objects.filter(backend__slug="vcuda").select_related("gpu_model"):
        cores = int(offering.resources["tencent.com/vcuda-core"])
        memory_mib = int(offering.resources["tencent.com/vcuda-memory"]) * 256

        assert offering.gpu_eq == Fraction(cores, 100)
        assert memory_mib <= offering.gpu_model.memory_mib * Fraction(cores, 100)
    assert Offering.objects.get(slug="t4-vcuda-half").resources == {
        "tencent.com/vcuda-core": "50",
        "tencent.com/vcuda-memory": "30",  # 30 x 256 MiB = 7680 MiB, half of a T4
    }


def test_hami_slices_select_only_their_own_model(presets) -> None:
    """HAMi matches nvidia.com/use-gputype as a case-insensitive substring of the card's name."""
    names = {model.slug: model.device_name for model in MODELS if model.device_name}
    hami = Offering.objects.filter(backend__slug="hami").select_related("gpu_model")

    assert hami.exists()
    for offering in hami:
        wanted = offering.annotations["nvidia.com/use-gputype"].upper()
        matching = {slug for slug, name in names.items() if wanted in name.upper()}
        assert matching == {offering.gpu_model.slug}, offering.slug
        assert offering.resources["nvidia.com/gpu"] == "1"
        memory = Fraction(int(offering.resources["nvidia.com/gpumem"]),
                          offering.gpu_model.memory_mib)  # fmt: skip
        cores = Fraction(int(offering.resources["nvidia.com/gpucores"]), 100)
        assert offering.gpu_eq == max(memory, cores)


def test_the_command_prints_what_it_created(db) -> None:
    first, second = StringIO(), StringIO()

    call_command("catalog_presets", stdout=first)
    call_command("catalog_presets", stdout=second)

    assert (
        f"created {len(BACKENDS)} sharing backends, {len(MODELS)} GPU models, "
        f"{len(OFFERINGS)} offerings"
    ) in first.getvalue()
    assert "nothing to create" in second.getvalue()


def test_demo_data_adds_the_catalog_pools_and_quotas_once(db) -> None:
    call_command("demo_data", stdout=StringIO())
    events = AuditEvent.objects.count()
    output = StringIO()

    call_command("demo_data", stdout=output)

    assert AuditEvent.objects.count() == events
    assert Offering.objects.count() == len(OFFERINGS)
    pools = {
        pool.name: (pool.gpu_model.slug, pool.backend.slug)
        for pool in GpuPool.objects.filter(cluster="demo").select_related("gpu_model", "backend")
    }
    assert pools == {
        "a100-mig": ("a100-80gb", "mig"),
        "a100-whole": ("a100-80gb", "whole"),
        "h100": ("h100-80gb", "whole"),
        "t4-shared": ("t4", "time-slicing"),
    }
    quotas = {
        (quota.tenant.slug, quota.gpu_model.slug): quota.gpu_eq
        for quota in Quota.objects.select_related("tenant", "gpu_model")
    }
    assert quotas == {
        ("vision", "a100-80gb"): 8,
        ("vision", "t4"): 4,
        ("nlp", "h100-80gb"): 16,
        ("risk", "t4"): 2,
    }
    for username in ("developer", "lead", "finance", "admin", "nlp-dev"):
        assert username in output.getvalue()
