import pytest

from portal.catalog.models import Offering
from portal.catalog.presets import catalog_presets_load
from tenants.models import Tenant
from tenants.services import quota_set, tenant_update


@pytest.fixture
def catalog(db) -> dict[str, Offering]:
    catalog_presets_load(actor=None)
    return {offering.slug: offering for offering in Offering.objects.select_related("gpu_model")}


@pytest.fixture
def a100_tenant(tenant_a: Tenant, admin_user, catalog) -> Tenant:
    """Tenant A with 10 A100-80GB GPU-eq, auto-approving up to 1 GPU-eq for 8 hours."""
    quota_set(
        actor=admin_user, tenant=tenant_a, gpu_model=catalog["a100-80gb-whole"].gpu_model, gpu_eq=10
    )
    return tenant_update(
        actor=admin_user, tenant=tenant_a, auto_approve_gpu_eq="1", auto_approve_hours=8
    )
