"""Catalog presets: the GPU models, sharing backends and offerings DOMAIN.md describes.

Loaded by `manage.py catalog_presets` (and the demo). Each backend's resource names and GPU-eq
rule come from its documentation:

- whole GPUs: `nvidia.com/gpu: N` (`amd.com/gpu` for AMD), 1 GPU-eq each;
- time-slicing / MPS, renamed: `nvidia.com/gpu.shared: 1`, 1 / replicas (at most 1 per pod);
- MIG, mixed strategy: `nvidia.com/mig-<profile>: 1`, compute slices / 7;
- HAMi: `nvidia.com/gpu: 1` + `nvidia.com/gpumem` (MiB) and/or `nvidia.com/gpucores` (%),
  max(memory share, cores share), model chosen by the `nvidia.com/use-gputype` annotation;
- Aliyun gpushare: `aliyun.com/gpu-mem` in GiB, GiB / the model's memory;
- TKEStack vCUDA: `tencent.com/vcuda-core` (100 = 1 GPU) + `tencent.com/vcuda-memory`
  (256 MiB units), vcuda-core / 100.
"""

from dataclasses import dataclass, field
from fractions import Fraction

from portal.accounts.models import User
from portal.catalog.models import GpuModel, Offering, SharingBackend
from portal.catalog.services import gpu_model_create, offering_create, sharing_backend_create


@dataclass(frozen=True)
class ModelPreset:
    slug: str
    name: str
    vendor: str
    memory_mib: int
    node_label_value: str
    node_label_key: str = "nvidia.com/gpu.product"
    hami_type: str = ""  # what HAMi's nvidia.com/use-gputype matches


@dataclass(frozen=True)
class OfferingPreset:
    slug: str
    name: str
    model: str
    backend: str
    size: str
    resources: dict[str, str]
    gpu_eq: Fraction
    whole: bool = False
    annotations: dict[str, str] = field(default_factory=dict)
    max_units_per_workload: int | None = None


BACKENDS = [
    ("whole", "Whole GPU", "Exclusive GPUs from the NVIDIA or AMD device plugin.", True),
    ("time-slicing", "NVIDIA time-slicing", "Shares of a GPU by time; no memory isolation.", False),
    ("mps", "NVIDIA MPS", "Shares of a GPU through the Multi-Process Service.", False),
    ("mig", "NVIDIA MIG (mixed)", "Hardware-isolated Multi-Instance GPU slices.", True),
    ("hami", "HAMi", "Memory and compute slices enforced by HAMi's vGPU scheduler.", True),
    (
        "gpushare",
        "Aliyun gpushare",
        "GPU memory shares via the gpushare scheduler extender.",
        False,
    ),
    ("vcuda", "TKEStack vCUDA", "Compute and memory shares enforced by vCUDA.", True),
]

MODELS = [
    ModelPreset(
        "a100-80gb",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA",
        81920,
        "NVIDIA-A100-SXM4-80GB",
        hami_type="A100",
    ),
    ModelPreset(
        "a100-40gb",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA",
        40960,
        "NVIDIA-A100-SXM4-40GB",
        hami_type="A100",
    ),
    ModelPreset(
        "h100-80gb",
        "NVIDIA H100-80GB-HBM3",
        "NVIDIA",
        81920,
        "NVIDIA-H100-80GB-HBM3",
        hami_type="H100",
    ),
    ModelPreset("t4", "NVIDIA T4", "NVIDIA", 15360, "Tesla-T4", hami_type="T4"),
    ModelPreset(
        "mi250",
        "AMD Instinct MI250",
        "AMD",
        65536,
        "Instinct-MI250",
        node_label_key="amd.com/gpu.product-name",
    ),
]

MIG_PROFILES = {
    "a100-80gb": ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "a100-40gb": ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "h100-80gb": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
}


def _offerings() -> list[OfferingPreset]:
    models = {model.slug: model for model in MODELS}
    presets = [
        OfferingPreset(
            slug=f"{model.slug}-whole",
            name=f"{model.name}, whole GPU",
            model=model.slug,
            backend="whole",
            size="1 GPU",
            resources={"amd.com/gpu" if model.vendor == "AMD" else "nvidia.com/gpu": "1"},
            gpu_eq=Fraction(1),
            whole=True,
        )
        for model in MODELS
    ]
    for model_slug, profiles in MIG_PROFILES.items():
        for profile in profiles:
            slices = int(profile.split("g.", 1)[0])
            presets.append(
                OfferingPreset(
                    slug=f"{model_slug}-mig-{profile.replace('.', '-')}",
                    name=f"{models[model_slug].name}, MIG {profile}",
                    model=model_slug,
                    backend="mig",
                    size=profile,
                    resources={f"nvidia.com/mig-{profile}": "1"},
                    gpu_eq=Fraction(slices, 7),
                )
            )
    for model_slug, backend, replicas in (
        ("t4", "time-slicing", 4),
        ("a100-80gb", "time-slicing", 4),
        ("a100-80gb", "mps", 2),
    ):
        presets.append(
            OfferingPreset(
                slug=f"{model_slug}-{backend}-1-{replicas}",
                name=f"{models[model_slug].name}, 1/{replicas} share ({backend})",
                model=model_slug,
                backend=backend,
                size=f"1/{replicas}",
                resources={"nvidia.com/gpu.shared": "1"},
                gpu_eq=Fraction(1, replicas),
                max_units_per_workload=1,
            )
        )
    for model_slug, memory_mib, cores in (("a100-80gb", 20480, 25), ("t4", 3840, 25)):
        model = models[model_slug]
        presets.append(
            OfferingPreset(
                slug=f"{model_slug}-hami-{memory_mib}mib",
                name=f"{model.name}, {memory_mib // 1024} GiB / {cores}% (HAMi)",
                model=model_slug,
                backend="hami",
                size=f"{memory_mib} MiB",
                resources={
                    "nvidia.com/gpu": "1",
                    "nvidia.com/gpumem": str(memory_mib),
                    "nvidia.com/gpucores": str(cores),
                },
                annotations={"nvidia.com/use-gputype": model.hami_type},
                gpu_eq=max(Fraction(memory_mib, model.memory_mib), Fraction(cores, 100)),
                max_units_per_workload=1,
            )
        )
    for model_slug, gib in (("t4", 4), ("a100-40gb", 10)):
        model = models[model_slug]
        presets.append(
            OfferingPreset(
                slug=f"{model_slug}-gpushare-{gib}gib",
                name=f"{model.name}, {gib} GiB (gpushare)",
                model=model_slug,
                backend="gpushare",
                size=f"{gib} GiB",
                resources={"aliyun.com/gpu-mem": str(gib)},
                gpu_eq=Fraction(gib * 1024, model.memory_mib),
                max_units_per_workload=1,
            )
        )
    presets.append(
        OfferingPreset(
            slug="t4-vcuda-half",
            name="NVIDIA T4, half (vCUDA)",
            model="t4",
            backend="vcuda",
            size="50%",
            resources={"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "30"},
            gpu_eq=Fraction(50, 100),
            max_units_per_workload=1,
        )
    )
    return presets


OFFERINGS = _offerings()


def catalog_presets_load(*, actor: User | None) -> dict[str, int]:
    """Create the preset backends, models and offerings that do not exist yet (by slug).

    Idempotent: what exists is left as it is, so an admin's edits survive a re-run.
    Returns how many of each were created.
    """
    created = {"backends": 0, "models": 0, "offerings": 0}
    backends = {backend.slug: backend for backend in SharingBackend.objects.all()}
    for slug, name, description, isolation in BACKENDS:
        if slug not in backends:
            backends[slug] = sharing_backend_create(
                actor=actor,
                slug=slug,
                name=name,
                description=description,
                memory_isolation=isolation,
            )
            created["backends"] += 1
    models = {model.slug: model for model in GpuModel.objects.all()}
    for preset in MODELS:
        if preset.slug not in models:
            models[preset.slug] = gpu_model_create(
                actor=actor,
                slug=preset.slug,
                name=preset.name,
                vendor=preset.vendor,
                memory_mib=preset.memory_mib,
                node_label_key=preset.node_label_key,
                node_label_value=preset.node_label_value,
            )
            created["models"] += 1
    existing = set(Offering.objects.values_list("slug", flat=True))
    for offering in OFFERINGS:
        if offering.slug in existing:
            continue
        offering_create(
            actor=actor,
            slug=offering.slug,
            name=offering.name,
            gpu_model=models[offering.model],
            backend=backends[offering.backend],
            size=offering.size,
            whole=offering.whole,
            resources=offering.resources,
            annotations=offering.annotations,
            gpu_eq=offering.gpu_eq,
            max_units_per_workload=offering.max_units_per_workload,
        )
        created["offerings"] += 1
    return created
