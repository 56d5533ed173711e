from fractions import Fraction
from typing import Any

import pytest

from portal.accounts.models import User
from portal.catalog.models import GpuModel, GpuPool, Offering, SharingBackend
from portal.catalog.services import (
    gpu_model_create,
    gpu_model_update,
    gpu_pool_create,
    offering_create,
    offering_update,
    sharing_backend_create,
)
from portal.cluster.services import cluster_create
from portal.core.errors import Conflict, ValidationFailed
from portal.core.models import AuditEvent
from tests.tenants.factories import a100, mig_backend


@pytest.fixture
def catalog(admin_user):
    return a100(admin_user), mig_backend(admin_user)


def make_offering(
    admin_user: User, catalog: tuple[GpuModel, SharingBackend], **overrides: Any
) -> Offering:
    model, backend = catalog
    fields = {
        "slug": "a100-mig-1g",
        "name": "A100 1g.10gb",
        "gpu_model": model,
        "backend": backend,
        "size": "1g.10gb",
        "resources": {"nvidia.com/mig-1g.10gb": "1"},
        "gpu_eq": "1/7",
    }
    return offering_create(actor=admin_user, **{**fields, **overrides})


def test_a_valid_offering_is_created_exactly_and_audited(admin_user, catalog) -> None:
    offering = make_offering(admin_user, catalog)

    assert offering.gpu_eq == Fraction(1, 7)
    assert (offering.gpu_eq_num, offering.gpu_eq_den) == (1, 7)
    event = AuditEvent.objects.get(action="offering.create")
    assert event.actor == admin_user
    assert event.target_id == str(offering.pk)
    assert event.changes["gpu_eq"] == [None, "1/7"]


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"resources": {"nvidia gpu": "1"}}, "resources", "needs a domain prefix"),
        ({"resources": {"kubernetes.io/gpu": "1"}}, "resources", "reserved"),
        (
            {"resources": {"nvidia.com/mig-1g.10gb": "two"}},
            "resources",
            "not a Kubernetes quantity",
        ),
        ({"resources": {"nvidia.com/mig-1g.10gb": "500m"}}, "resources", "whole units"),
        ({"resources": {}}, "resources", "cannot be blank"),
        ({"gpu_eq": "0"}, "gpu_eq", "more than 0 and at most 1"),
        ({"gpu_eq": "3/2"}, "gpu_eq", "more than 0 and at most 1"),
        ({"gpu_eq": "lots"}, "gpu_eq", "not a number"),
        ({"gpu_eq": 0.5}, "gpu_eq", "exact"),
        ({"gpu_eq": "1/2", "whole": True}, "gpu_eq", "positive whole number"),
        ({"slug": "Bad Slug"}, "slug", "lowercase letters"),
        ({"annotations": {"bad key!": "x"}}, "annotations", "annotation key"),
    ],
)
def test_invalid_catalog_data_is_refused_naming_the_field(
    admin_user, catalog, overrides, field, message
) -> None:
    with pytest.raises(ValidationFailed) as refused:
        make_offering(admin_user, catalog, **overrides)

    assert field in refused.value.fields
    assert message in " ".join(refused.value.fields[field])
    assert field in refused.value.message
    assert not Offering.objects.exists()
    assert not AuditEvent.objects.filter(action="offering.create").exists()


def test_every_bad_field_is_named_at_once(admin_user, catalog) -> None:
    with pytest.raises(ValidationFailed) as refused:
        make_offering(admin_user, catalog, resources={"nvidia gpu": "1"}, gpu_eq="0")

    assert {"resources", "gpu_eq"} <= set(refused.value.fields)


def test_an_offering_needs_a_gpu_eq(admin_user, catalog) -> None:
    model, backend = catalog

    with pytest.raises(ValidationFailed) as refused:
        offering_create(
            actor=admin_user, slug="x", name="X", gpu_model=model, backend=backend,
            size="1", resources={"nvidia.com/gpu": "1"},
        )  # fmt: skip

    assert "gpu_eq" in refused.value.fields


def test_a_whole_offering_may_count_several_gpus(admin_user, catalog) -> None:
    offering = make_offering(
        admin_user, catalog, slug="a100-x2", whole=True,
        resources={"nvidia.com/gpu": "2"}, gpu_eq="2",
    )  # fmt: skip

    assert offering.gpu_eq == 2


def test_an_update_is_validated_too(admin_user, catalog) -> None:
    offering = make_offering(admin_user, catalog)

    with pytest.raises(ValidationFailed) as refused:
        offering_update(actor=admin_user, offering=offering, gpu_eq="0")

    assert "gpu_eq" in refused.value.fields
    offering.refresh_from_db()
    assert offering.gpu_eq == Fraction(1, 7)


def test_an_update_records_before_and_after(admin_user, catalog) -> None:
    offering = make_offering(admin_user, catalog)

    offering_update(actor=admin_user, offering=offering, gpu_eq="2/7", size="2g.20gb")

    event = AuditEvent.objects.get(action="offering.update")
    assert event.changes == {"size": ["1g.10gb", "2g.20gb"], "gpu_eq": ["1/7", "2/7"]}


def test_a_taken_slug_is_refused_naming_the_slug(admin_user, catalog) -> None:
    make_offering(admin_user, catalog)

    with pytest.raises(ValidationFailed) as refused:
        make_offering(admin_user, catalog)

    assert "already exists" in " ".join(refused.value.fields["slug"])
    assert Offering.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"node_label_value": "has spaces"}, "node_label_value"),
        ({"node_label_value": "NVIDIA A100-SXM4-80GB"}, "node_label_value"),
        ({"node_label_key": "bad key"}, "node_label_key"),
        ({"slug": "Not A Slug"}, "slug"),
        ({"name": ""}, "name"),
    ],
)
def test_a_bad_gpu_model_is_refused_naming_the_field(admin_user, overrides, field) -> None:
    fields = {
        "slug": "x", "name": "X", "vendor": "NVIDIA", "memory_mib": 1024,
        "node_label_value": "X", **overrides,
    }  # fmt: skip

    with pytest.raises(ValidationFailed) as refused:
        gpu_model_create(actor=admin_user, **fields)

    assert field in refused.value.fields
    assert not GpuModel.objects.exists()


def test_a_gpu_model_update_keeps_the_old_values_when_refused(admin_user, catalog) -> None:
    model, _ = catalog

    with pytest.raises(ValidationFailed):
        gpu_model_update(actor=admin_user, gpu_model=model, node_label_value="not valid")

    model.refresh_from_db()
    assert model.node_label_value == "NVIDIA-A100-SXM4-80GB"


def test_a_backend_name_is_unique(admin_user, catalog) -> None:
    with pytest.raises(ValidationFailed) as refused:
        sharing_backend_create(actor=admin_user, slug="mig-2", name="NVIDIA MIG (mixed)")

    assert "name" in refused.value.fields


def test_a_pool_name_is_unique_per_cluster(admin_user, catalog) -> None:
    model, backend = catalog
    for name in ("prod", "lab"):
        cluster_create(actor=None, name=name)
    pool = gpu_pool_create(
        actor=admin_user, cluster="prod", name="a100", gpu_model=model, backend=backend
    )
    gpu_pool_create(actor=admin_user, cluster="lab", name="a100", gpu_model=model, backend=backend)

    with pytest.raises(Conflict):
        gpu_pool_create(
            actor=admin_user, cluster="prod", name="a100", gpu_model=model, backend=backend
        )

    assert str(pool) == "prod/a100"
    assert GpuPool.objects.count() == 2


def test_a_pool_in_a_cluster_nobody_registered_is_refused(admin_user, catalog) -> None:
    model, backend = catalog

    with pytest.raises(ValidationFailed) as refused:
        gpu_pool_create(
            actor=admin_user, cluster="default", name="a100", gpu_model=model, backend=backend
        )

    assert list(refused.value.fields) == ["cluster"]
    assert not GpuPool.objects.exists()
