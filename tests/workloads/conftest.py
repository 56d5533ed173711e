"""Tenants with GPU quota for notebooks, and launching on them."""

from typing import Any

import pytest

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.allocations.services import gpu_request_submit
from portal.catalog.models import Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.workloads.models import Notebook
from portal.workloads.services import notebook_launch
from tenants.models import Tenant
from tenants.services import quota_set, tenant_update


@pytest.fixture
def gpu_tenant(tenant_a: Tenant, admin_user: User, catalog: dict[str, Offering]) -> Tenant:
    """Tenant A with 10 GPU-eq of every GPU model, auto-approving up to 2 GPU-eq."""
    for model in {offering.gpu_model for offering in catalog.values()}:
        quota_set(actor=admin_user, tenant=tenant_a, gpu_model=model, gpu_eq=10)
    return tenant_update(actor=admin_user, tenant=tenant_a, auto_approve_gpu_eq="2")


def allocation_of(user: User, tenant: Tenant, offering: Offering, count: int = 1) -> GpuRequest:
    return gpu_request_submit(actor=user, tenant=tenant, offering=offering, count=count)


def launch(user: User, allocation: GpuRequest, **overrides: Any) -> Notebook:
    values: dict[str, Any] = {
        "actor": user,
        "allocation_id": allocation.pk,
        "image": "minimal-python",
        "cpu_cores": "2",
        "memory_gib": 8,
        "workspace_gib": 10,
    }
    return notebook_launch(**(values | overrides))


@pytest.fixture
def dry_cluster(db: None) -> Cluster:
    """A dry-run cluster publishing notebooks on a host: runs render, notebooks 'run'."""
    return cluster_create(
        actor=None, name="demo", notebook_host_pattern="{name}.{tenant}.nb.example.org"
    )
