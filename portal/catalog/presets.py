"""Catalog presets: the GPU models, sharing backends and offerings DOMAIN.md describes, and a
few notebook images.

Loaded by `manage.py catalog_presets` (and the demo). Each backend's resource names and GPU-eq
rule come from its documentation:

- whole GPUs: `nvidia.com/gpu: N` (NVIDIA device plugin) or `amd.com/gpu: N` (AMD), 1 each;
- time-slicing / MPS, renamed: `nvidia.com/gpu.shared: 1`, 1 / replicas (at most 1 per pod);
- MIG, mixed strategy: `nvidia.com/mig-<profile>: 1`, compute slices / 7;
- HAMi: `nvidia.com/gpu: 1` + `nvidia.com/gpumem` (MiB) and/or `nvidia.com/gpucores` (%),
  max(memory share, cores share), model chosen by the `nvidia.com/use-gputype` annotation;
- Aliyun gpushare: `aliyun.com/gpu-mem` in GiB, GiB / the model's memory in GiB;
- TKEStack vCUDA: `tencent.com/vcuda-core` (100 = 1 GPU) + `tencent.com/vcuda-memory`
  (256 MiB units), vcuda-core / 100.

Notebook images are Jupyter Docker Stacks images (quay.io/jupyter) with a pinned date tag, which
start as the notebook manifests expect (`start-notebook.py`). AMD's ROCm PyTorch image has no
Jupyter server, so it comes disabled, for an admin to replace with a Jupyter build of it.

Presets are matched by slug (or, for models, backends and images, by name, in case an admin
changed the slug); whatever exists is left as the admin made it.
"""

from dataclasses import dataclass, field
from fractions import Fraction

from django.db import transaction

from portal.accounts.models import User
from portal.catalog.models import GpuModel, NotebookImage, Offering, SharingBackend
from portal.catalog.services import (
    gpu_model_create,
    notebook_image_create,
    offering_create,
    sharing_backend_create,
)


@dataclass(frozen=True)
class BackendPreset:
    slug: str
    name: str
    description: str
    memory_isolation: bool


@dataclass(frozen=True)
class ModelPreset:
    slug: str
    name: str
    vendor: str
    memory_mib: int
    # As the node labeller writes it: NVIDIA GPU feature discovery puts the NVML device name,
    # spaces turned into dashes, under nvidia.com/gpu.product.
    node_label_value: str
    node_label_key: str = "nvidia.com/gpu.product"
    # The NVML device name. HAMi's nvidia.com/use-gputype matches it as a case-insensitive
    # substring, so the full name keeps an "A100" request off the other A100 model's nodes.
    device_name: str = ""


@dataclass(frozen=True)
class ImagePreset:
    slug: str
    name: str
    image: str
    description: str
    vendors: tuple[str, ...]
    enabled: bool = True


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
    BackendPreset(
        "whole",
        "Whole GPU (NVIDIA device plugin)",
        "Exclusive NVIDIA GPUs as nvidia.com/gpu.",
        memory_isolation=True,
    ),
    BackendPreset(
        "time-slicing",
        "NVIDIA time-slicing",
        "Shares of a GPU by time, renamed to nvidia.com/gpu.shared; no memory isolation.",
        memory_isolation=False,
    ),
    BackendPreset(
        "mps",
        "NVIDIA MPS",
        "Shares of a GPU through the Multi-Process Service, renamed to nvidia.com/gpu.shared.",
        memory_isolation=False,
    ),
    BackendPreset(
        "mig",
        "NVIDIA MIG (mixed)",
        "Hardware-isolated Multi-Instance GPU slices, one resource per profile.",
        memory_isolation=True,
    ),
    BackendPreset(
        "hami",
        "HAMi",
        "Memory and compute slices enforced by HAMi's vGPU scheduler and in-container limits.",
        memory_isolation=True,
    ),
    BackendPreset(
        "gpushare",
        "Aliyun gpushare",
        "GPU memory shares via the gpushare scheduler extender (nodes labelled gpushare=true); "
        "memory is not enforced.",
        memory_isolation=False,
    ),
    BackendPreset(
        "vcuda",
        "TKEStack vCUDA",
        "Compute and memory shares enforced by vCUDA.",
        memory_isolation=True,
    ),
    BackendPreset(
        "amd",
        "AMD device plugin",
        "Exclusive AMD GPUs as amd.com/gpu (ROCm device plugin).",
        memory_isolation=True,
    ),
]

MODELS = [
    ModelPreset(
        "a100-80gb",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA",
        81920,
        "NVIDIA-A100-SXM4-80GB",
        device_name="NVIDIA A100-SXM4-80GB",
    ),
    ModelPreset(
        "a100-40gb",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA",
        40960,
        "NVIDIA-A100-SXM4-40GB",
        device_name="NVIDIA A100-SXM4-40GB",
    ),
    ModelPreset(
        "h100-80gb",
        "NVIDIA H100-80GB-HBM3",
        "NVIDIA",
        81920,
        "NVIDIA-H100-80GB-HBM3",
        device_name="NVIDIA H100 80GB HBM3",
    ),
    ModelPreset("t4", "NVIDIA T4", "NVIDIA", 15360, "Tesla-T4", device_name="Tesla T4"),
    # The AMD node labeller writes the board's product name (rocm-smi's "Card series") with
    # spaces turned into underscores and parentheses dropped. Each MI250 GCD is one 64 GiB GPU.
    ModelPreset(
        "mi250",
        "AMD Instinct MI250",
        "AMD",
        65536,
        "AMD_INSTINCT_MI250_MCM_OAM_AC_MBA",
        node_label_key="amd.com/gpu.product-name",
    ),
]

MIG_PROFILES = {
    "a100-80gb": ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "a100-40gb": ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "h100-80gb": ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
}

# (model, backend, replicas): the device plugin advertises each GPU `replicas` times.
SHARED_REPLICAS = [
    ("t4", "time-slicing", 4),
    ("a100-80gb", "time-slicing", 4),
    ("a100-80gb", "mps", 2),
    ("h100-80gb", "mps", 4),
]

# (model, MiB, percent of the cores). HAMi gives a container the whole GPU's memory or cores
# when the matching resource is left out, so each preset names both.
HAMI_SLICES = [
    ("a100-80gb", 20480, 25),
    ("a100-80gb", 40960, 50),
    ("a100-40gb", 10240, 25),
    ("t4", 3840, 25),
]

# (model, GiB)
GPUSHARE_SLICES = [("t4", 4), ("a100-40gb", 10)]

# (model, vcuda-core percent, slug suffix)
VCUDA_SLICES = [("t4", 50, "half"), ("a100-40gb", 50, "half"), ("a100-40gb", 25, "quarter")]

_VCUDA_MEMORY_UNIT_MIB = 256


def _offerings() -> list[OfferingPreset]:
    models = {model.slug: model for model in MODELS}
    presets = [
        OfferingPreset(
            slug=f"{model.slug}-whole",
            name=f"{model.name}, whole GPU",
            model=model.slug,
            backend="amd" if model.vendor == "AMD" else "whole",
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
    for model_slug, backend, replicas in SHARED_REPLICAS:
        presets.append(
            OfferingPreset(
                slug=f"{model_slug}-{backend}-1-{replicas}",
                name=f"{models[model_slug].name}, 1/{replicas} share ({backend})",
                model=model_slug,
                backend=backend,
                size=f"1/{replicas}",
                resources={"nvidia.com/gpu.shared": "1"},
                gpu_eq=Fraction(1, replicas),
                # The device plugin refuses more than one shared replica per container.
                max_units_per_workload=1,
            )
        )
    for model_slug, memory_mib, cores in HAMI_SLICES:
        model = models[model_slug]
        presets.append(
            OfferingPreset(
                slug=f"{model_slug}-hami-{memory_mib}mib",
                name=f"{model.name}, {memory_mib // 1024} GiB / {cores}% (HAMi)",
                model=model_slug,
                backend="hami",
                size=f"{memory_mib} MiB / {cores}%",
                resources={
                    "nvidia.com/gpu": "1",
                    "nvidia.com/gpumem": str(memory_mib),
                    "nvidia.com/gpucores": str(cores),
                },
                annotations={"nvidia.com/use-gputype": model.device_name},
                gpu_eq=max(Fraction(memory_mib, model.memory_mib), Fraction(cores, 100)),
                max_units_per_workload=1,
            )
        )
    for model_slug, gib in GPUSHARE_SLICES:
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
    for model_slug, cores, suffix in VCUDA_SLICES:
        model = models[model_slug]
        share = Fraction(cores, 100)
        memory_units = model.memory_mib * share / _VCUDA_MEMORY_UNIT_MIB
        presets.append(
            OfferingPreset(
                slug=f"{model_slug}-vcuda-{suffix}",
                name=f"{model.name}, {cores}% (vCUDA)",
                model=model_slug,
                backend="vcuda",
                size=f"{cores}%",
                resources={
                    "tencent.com/vcuda-core": str(cores),
                    # Memory in proportion to the compute share, rounded down to whole units.
                    "tencent.com/vcuda-memory": str(int(memory_units)),
                },
                gpu_eq=share,
                # vCUDA takes a fraction below 100 or whole GPUs, never two fractions.
                max_units_per_workload=1,
            )
        )
    return presets


OFFERINGS = _offerings()

IMAGES = [
    ImagePreset(
        "pytorch-cuda12",
        "PyTorch (CUDA 12)",
        "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-17",
        "JupyterLab with PyTorch built for CUDA 12, on the Jupyter Docker Stacks.",
        ("NVIDIA",),
    ),
    ImagePreset(
        "tensorflow-cuda",
        "TensorFlow (CUDA)",
        "quay.io/jupyter/tensorflow-notebook:cuda-2025-11-17",
        "JupyterLab with TensorFlow and CUDA, on the Jupyter Docker Stacks.",
        ("NVIDIA",),
    ),
    ImagePreset(
        "pytorch-rocm",
        "PyTorch (ROCm)",
        "rocm/pytorch:rocm6.4_ubuntu24.04_py3.12_pytorch_release_2.6.0",
        "AMD's PyTorch 2.6 for ROCm 6.4. It has no Jupyter server (no start-notebook.py): "
        "build a Jupyter layer on it, point this entry at that image and enable it.",
        ("AMD",),
        # Disabled until then: a notebook started from it would never become ready.
        enabled=False,
    ),
    ImagePreset(
        "minimal-python",
        "Minimal Python",
        "quay.io/jupyter/minimal-notebook:2025-11-17",
        "JupyterLab and Python without a GPU framework; install what you need.",
        (),
    ),
]


@transaction.atomic
def catalog_presets_load(*, actor: User | None) -> dict[str, int]:
    """Create the preset backends, models and offerings that do not exist yet.

    Idempotent: what exists is left as it is, so an admin's edits survive a re-run, and a
    second run creates nothing. All or nothing, through the catalog services (so audited).
    Returns how many of each were created:
    {"backends": n, "models": n, "offerings": n, "images": n}.
    """
    created = {"backends": 0, "models": 0, "offerings": 0, "images": 0}

    backends_by_slug = {backend.slug: backend for backend in SharingBackend.objects.all()}
    backends_by_name = {backend.name: backend for backend in backends_by_slug.values()}
    backends: dict[str, SharingBackend] = {}
    for backend_preset in BACKENDS:
        backend = backends_by_slug.get(backend_preset.slug) or backends_by_name.get(
            backend_preset.name
        )
        if backend is None:
            backend = sharing_backend_create(
                actor=actor,
                slug=backend_preset.slug,
                name=backend_preset.name,
                description=backend_preset.description,
                memory_isolation=backend_preset.memory_isolation,
            )
            created["backends"] += 1
        backends[backend_preset.slug] = backend

    models_by_slug = {model.slug: model for model in GpuModel.objects.all()}
    models_by_name = {model.name: model for model in models_by_slug.values()}
    models: dict[str, GpuModel] = {}
    for model_preset in MODELS:
        model = models_by_slug.get(model_preset.slug) or models_by_name.get(model_preset.name)
        if model is None:
            model = gpu_model_create(
                actor=actor,
                slug=model_preset.slug,
                name=model_preset.name,
                vendor=model_preset.vendor,
                memory_mib=model_preset.memory_mib,
                node_label_key=model_preset.node_label_key,
                node_label_value=model_preset.node_label_value,
            )
            created["models"] += 1
        models[model_preset.slug] = model

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

    images = NotebookImage.objects.values_list("slug", "name")
    existing_slugs = {slug for slug, _ in images}
    existing_names = {name for _, name in images}
    for image in IMAGES:
        if image.slug in existing_slugs or image.name in existing_names:
            continue
        notebook_image_create(
            actor=actor,
            slug=image.slug,
            name=image.name,
            image=image.image,
            description=image.description,
            vendors=list(image.vendors),
            enabled=image.enabled,
        )
        created["images"] += 1
    return created
