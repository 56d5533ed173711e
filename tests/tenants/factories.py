"""Test data made through the services, as the product makes it."""

from fractions import Fraction

from portal.accounts.models import User
from portal.catalog.models import GpuModel, SharingBackend
from portal.catalog.services import gpu_model_create, sharing_backend_create


def a100(admin: User) -> GpuModel:
    return gpu_model_create(
        actor=admin,
        slug="a100-80gb",
        name="NVIDIA A100-SXM4-80GB",
        vendor="NVIDIA",
        memory_mib=81920,
        node_label_value="NVIDIA-A100-SXM4-80GB",
    )


def t4(admin: User) -> GpuModel:
    return gpu_model_create(
        actor=admin,
        slug="t4",
        name="NVIDIA T4",
        vendor="NVIDIA",
        memory_mib=15360,
        node_label_value="Tesla-T4",
    )


def mig_backend(admin: User) -> SharingBackend:
    return sharing_backend_create(
        actor=admin, slug="mig", name="NVIDIA MIG (mixed)", memory_isolation=True
    )


ONE_SEVENTH = Fraction(1, 7)
