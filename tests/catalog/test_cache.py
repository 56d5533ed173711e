"""The lists' offerings and GPU models from the process's catalog rows (portal/catalog/cache.py):
no catalog query once read, never stale after a change, each list its own copies, and Django's
prefetch queries whenever the rows cannot be trusted (no shared cache, Redis down, an offering
the process has not read)."""

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.allocations import services
from portal.allocations.models import GpuRequest
from portal.allocations.selectors import extensions_for, gpu_requests_for
from portal.catalog.cache import gpu_models_by_id, offering_by_slug
from portal.catalog.models import GpuModel, Offering
from portal.catalog.services import gpu_model_update, offering_update

WHOLE = "a100-80gb-whole"


@pytest.fixture
def requests_(developer, a100_tenant, catalog) -> list[GpuRequest]:
    asked = [
        services.gpu_request_submit(
            actor=developer, tenant=a100_tenant, offering=catalog[WHOLE], count=count
        )
        for count in (1, 2)
    ]
    services.gpu_request_extend(
        actor=developer, gpu_request=asked[0], hours=100, reason="a longer run"
    )
    return asked


def listed(user) -> tuple[list[GpuRequest], list[str]]:
    """The user's requests with their offerings and models read, and the SQL it took."""
    with CaptureQueriesContext(connection) as queries:
        rows = list(gpu_requests_for(user).order_by("id"))
        for row in rows:
            assert row.offering.slug  # read: never a query of its own
            assert row.gpu_model.slug
    return rows, [query["sql"] for query in queries.captured_queries]


def reads_catalog(statements: list[str]) -> bool:
    return any('"catalog_offering"' in sql or '"catalog_gpumodel"' in sql for sql in statements)


def test_once_read_the_catalog_takes_no_query(developer, requests_) -> None:
    listed(developer)
    rows, statements = listed(developer)

    assert len(statements) == 1
    assert not reads_catalog(statements)
    assert [row.offering.slug for row in rows] == [WHOLE, WHOLE]
    assert rows[0].gpu_model.name == "NVIDIA A100-SXM4-80GB"
    # Extensions reach the offering through their request.
    extensions = list(extensions_for(developer))
    assert [extension.request.offering.slug for extension in extensions] == [WHOLE]


def test_a_change_to_an_offering_or_a_model_is_seen_by_the_next_list(
    developer, admin_user, requests_, catalog
) -> None:
    listed(developer)
    offering_update(actor=admin_user, offering=catalog[WHOLE], name="A100 (renamed)")
    gpu_model_update(actor=admin_user, gpu_model=catalog[WHOLE].gpu_model, name="A100 renamed")

    rows, statements = listed(developer)

    assert reads_catalog(statements)  # read again: the version moved
    assert {row.offering.name for row in rows} == {"A100 (renamed)"}
    assert {row.gpu_model.name for row in rows} == {"A100 renamed"}


def test_each_list_has_its_own_copies(developer, requests_) -> None:
    first, _ = listed(developer)
    first[0].offering.name = "changed by one list"

    second, statements = listed(developer)

    assert not reads_catalog(statements)
    assert first[1].offering is first[0].offering  # one copy per list, shared by its rows
    assert second[0].offering.name != "changed by one list"


def test_an_offering_the_process_has_not_read_is_read_then(
    developer, a100_tenant, requests_, catalog
) -> None:
    listed(developer)
    # Written without signals (no new version): the next list meets an offering it lacks.
    template = catalog[WHOLE]
    (unseen,) = Offering.objects.bulk_create(
        [
            Offering(
                slug="a100-80gb-unseen", name="Unseen", gpu_model=template.gpu_model,
                backend=template.backend, size=template.size, whole=True,
                resources=template.resources, gpu_eq_num=1, gpu_eq_den=1,
            )
        ]
    )  # fmt: skip
    GpuRequest.objects.filter(pk=requests_[1].pk).update(offering=unseen)

    rows, statements = listed(developer)

    assert reads_catalog(statements)
    assert [row.offering.slug for row in rows] == [WHOLE, "a100-80gb-unseen"]


@pytest.mark.parametrize(
    "caches",
    [
        pytest.param(
            {
                "BACKEND": "portal.core.cache.PortalRedisCache",
                "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
            },
            id="Redis down",
        ),
        pytest.param(
            {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
            id="no shared cache",
        ),
    ],
)
def test_without_a_shared_cache_to_trust_the_lists_prefetch_as_before(
    developer, requests_, settings, caches: dict[str, Any]
) -> None:
    settings.CACHES = {"default": caches}

    listed(developer)
    rows, statements = listed(developer)

    assert len(statements) == 3  # the requests, their offerings, their models
    assert reads_catalog(statements)
    assert [row.offering.slug for row in rows] == [WHOLE, WHOLE]


def test_a_decision_reads_its_offering_by_slug_from_the_process_rows(admin_user, catalog) -> None:
    offering_by_slug(WHOLE)  # read once
    with CaptureQueriesContext(connection) as queries:
        offering = offering_by_slug(WHOLE)
        assert offering is not None
        assert offering.gpu_model.name == "NVIDIA A100-SXM4-80GB"  # with it, no query
    assert not queries.captured_queries
    offering.name = "changed by one decision"
    again = offering_by_slug(WHOLE)
    assert again is not None
    assert again.name == catalog[WHOLE].name  # its own copy

    offering_update(actor=admin_user, offering=catalog[WHOLE], name="A100 (renamed)")

    renamed = offering_by_slug(WHOLE)
    assert renamed is not None
    assert renamed.name == "A100 (renamed)"  # the version moved
    assert offering_by_slug("no-such-offering") is None


def test_an_offering_by_slug_the_process_has_not_read_is_read_from_the_database(
    catalog,
) -> None:
    offering_by_slug(WHOLE)
    template = catalog[WHOLE]
    Offering.objects.bulk_create(  # no signals: no new version
        [
            Offering(
                slug="a100-80gb-unseen", name="Unseen", gpu_model=template.gpu_model,
                backend=template.backend, size=template.size, whole=True,
                resources=template.resources, gpu_eq_num=1, gpu_eq_den=1,
            )
        ]
    )  # fmt: skip

    unseen = offering_by_slug("a100-80gb-unseen")

    assert unseen is not None
    assert unseen.name == "Unseen"
    assert unseen.gpu_model.pk == template.gpu_model.pk


def test_without_a_shared_cache_an_offering_by_slug_is_read_from_the_database(
    catalog, settings
) -> None:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

    with CaptureQueriesContext(connection) as queries:
        offering = offering_by_slug(WHOLE)

    assert offering is not None
    assert offering.gpu_model.slug == catalog[WHOLE].gpu_model.slug
    assert reads_catalog([query["sql"] for query in queries.captured_queries])


def test_gpu_models_by_id_are_copies_of_the_process_rows_or_read_from_the_database(
    catalog, settings
) -> None:
    a100 = catalog[WHOLE].gpu_model
    gpu_models_by_id([a100.pk])  # read once

    with CaptureQueriesContext(connection) as kept_queries:
        kept = gpu_models_by_id([a100.pk])
    kept[a100.pk].name = "changed by one caller"
    again = gpu_models_by_id([a100.pk, a100.pk + 1000])  # one the rows lack: the database
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with CaptureQueriesContext(connection) as unshared_queries:
        unshared = gpu_models_by_id([a100.pk])

    assert not kept_queries.captured_queries
    assert again == {a100.pk: a100}
    assert again[a100.pk].name == a100.name  # its own copy
    assert unshared[a100.pk].name == a100.name
    assert reads_catalog([query["sql"] for query in unshared_queries.captured_queries])
    assert gpu_models_by_id([]) == {}


def test_a_gpu_model_select_is_written_from_the_kept_rows_and_follows_each_change(
    catalog, admin_user
) -> None:
    from django import forms  # noqa: PLC0415

    from portal.catalog.forms import EnabledGpuModelField  # noqa: PLC0415

    class Form(forms.Form):
        gpu_model = EnabledGpuModelField(label="GPU model")

    model = catalog[WHOLE].gpu_model
    str(Form()["gpu_model"])  # the process reads the catalog once
    with CaptureQueriesContext(connection) as queries:
        written = str(Form()["gpu_model"])
    assert queries.captured_queries == []
    assert f'<option value="{model.slug}">{model.name}</option>' in written
    assert written.count("<option") == 1 + GpuModel.objects.filter(enabled=True).count()

    gpu_model_update(actor=admin_user, gpu_model=model, enabled=False)

    assert f'value="{model.slug}"' not in str(Form()["gpu_model"])
    refused = Form({"gpu_model": model.slug})
    assert not refused.is_valid()
    assert "gpu_model" in refused.errors
