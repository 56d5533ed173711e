from fractions import Fraction

from portal.catalog.models import GpuModel, Offering, SharingBackend
from portal.catalog.presets import BACKENDS, MIG_PROFILES, catalog_presets_load
from portal.catalog.validators import validate_annotations, validate_resources
from portal.core.models import AuditEvent


def test_presets_load_once_and_a_second_run_creates_nothing(db) -> None:
    first = catalog_presets_load(actor=None)
    events = AuditEvent.objects.count()
    second = catalog_presets_load(actor=None)

    assert first["backends"] == len(BACKENDS)
    assert first["offerings"] == Offering.objects.count()
    assert second == {"backends": 0, "models": 0, "offerings": 0}
    assert AuditEvent.objects.count() == events


def test_every_backend_in_the_domain_has_offerings(db) -> None:
    catalog_presets_load(actor=None)

    resources = {name for offering in Offering.objects.all() for name in offering.resources}

    assert {"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/gpumem", "nvidia.com/gpucores",
            "aliyun.com/gpu-mem", "tencent.com/vcuda-core", "tencent.com/vcuda-memory",
            "amd.com/gpu"} <= resources  # fmt: skip
    for model, profiles in MIG_PROFILES.items():
        for profile in profiles:
            assert f"nvidia.com/mig-{profile}" in resources, (model, profile)
    assert set(SharingBackend.objects.values_list("slug", flat=True)) == {b[0] for b in BACKENDS}


def test_every_preset_offering_is_valid(db) -> None:
    catalog_presets_load(actor=None)

    for offering in Offering.objects.select_related("gpu_model"):
        validate_resources(offering.resources)
        validate_annotations(offering.annotations)
        if offering.whole:
            assert offering.gpu_eq.denominator == 1
            assert offering.gpu_eq >= 1
        else:
            assert 0 < offering.gpu_eq <= 1, offering.slug


def test_fractional_presets_follow_their_backends_rules(db) -> None:
    catalog_presets_load(actor=None)
    gpu_eq = {offering.slug: offering.gpu_eq for offering in Offering.objects.all()}

    assert gpu_eq["a100-80gb-mig-3g-40gb"] == Fraction(3, 7)
    assert gpu_eq["h100-80gb-mig-7g-80gb"] == 1
    assert gpu_eq["t4-time-slicing-1-4"] == Fraction(1, 4)
    assert gpu_eq["a100-80gb-hami-20480mib"] == Fraction(1, 4)  # max(20480/81920, 25/100)
    assert gpu_eq["t4-gpushare-4gib"] == Fraction(4, 15)  # 4 GiB of 15 GiB
    assert gpu_eq["t4-vcuda-half"] == Fraction(1, 2)
    assert GpuModel.objects.get(slug="mi250").node_label_key == "amd.com/gpu.product-name"
