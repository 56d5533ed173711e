from fractions import Fraction
from typing import Any

import pytest

from portal.accounts.models import User
from portal.catalog.models import GpuModel, Offering, SharingBackend
from portal.catalog.services import offering_create, offering_update
from portal.core.errors import ValidationFailed
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
    assert offering.gpu_eq_num == 1
    assert offering.gpu_eq_den == 7


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


def test_an_update_is_validated_too(admin_user, catalog) -> None:
    offering = make_offering(admin_user, catalog)

    with pytest.raises(ValidationFailed) as refused:
        offering_update(actor=admin_user, offering=offering, gpu_eq="0")

    assert "gpu_eq" in refused.value.fields
    offering.refresh_from_db()
    assert offering.gpu_eq == Fraction(1, 7)


def test_a_bad_node_label_value_is_refused(admin_user) -> None:
    from portal.catalog.services import gpu_model_create  # noqa: PLC0415

    with pytest.raises(ValidationFailed) as refused:
        gpu_model_create(
            actor=admin_user, slug="x", name="X", vendor="NVIDIA", memory_mib=1,
            node_label_value="has spaces",
        )  # fmt: skip

    assert "node_label_value" in refused.value.fields
