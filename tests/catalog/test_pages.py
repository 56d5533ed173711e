from fractions import Fraction

import pytest

from portal.catalog.models import Offering
from portal.catalog.presets import catalog_presets_load

PAGES = [
    "/manage/catalog/",
    "/manage/catalog/models/new/",
    "/manage/catalog/models/t4/edit/",
    "/manage/catalog/backends/new/",
    "/manage/catalog/offerings/new/",
    "/manage/catalog/offerings/t4-whole/edit/",
    "/manage/catalog/pools/new/",
]


@pytest.fixture
def presets(db) -> None:
    catalog_presets_load(actor=None)


def offering_form(**overrides: str) -> dict[str, str]:
    return {
        "slug": "t4-ts-1-8", "name": "T4, 1/8 share", "gpu_model": "t4",
        "backend": "time-slicing", "size": "1/8", "resources": "nvidia.com/gpu.shared=1",
        "annotations": "", "gpu_eq": "1/8", "max_units_per_workload": "1", "enabled": "on",
        **overrides,
    }  # fmt: skip


def test_admin_sees_every_catalog_page(client_for, admin_user, presets) -> None:
    client = client_for(admin_user)

    for page in PAGES:
        assert client.get(page).status_code == 200, page


@pytest.mark.parametrize("persona", ["developer", "lead", "outsider", "finance_user"])
def test_other_personas_get_404_on_every_catalog_page(
    request: pytest.FixtureRequest, client_for, presets, persona
) -> None:
    client = client_for(request.getfixturevalue(persona))

    for page in PAGES:
        assert client.get(page).status_code == 404, page
    assert client.post("/manage/catalog/offerings/new/", offering_form()).status_code == 404
    assert not Offering.objects.filter(slug="t4-ts-1-8").exists()


def test_admin_adds_an_offering_from_the_form(client_for, admin_user, presets) -> None:
    client = client_for(admin_user)

    response = client.post("/manage/catalog/offerings/new/", offering_form(), follow=True)

    assert response.redirect_chain[-1][0] == "/manage/catalog/"
    assert 'data-testid="offering-t4-ts-1-8"' in response.text
    offering = Offering.objects.get(slug="t4-ts-1-8")
    assert offering.gpu_eq == Fraction(1, 8)
    assert offering.resources == {"nvidia.com/gpu.shared": "1"}


@pytest.mark.parametrize(
    ("overrides", "shown"),
    [
        ({"resources": "nvidia gpu=1"}, "Resources: resource name"),
        ({"resources": "nvidia.com/gpu.shared=two"}, "not a Kubernetes quantity"),
        ({"resources": "just-a-name"}, "Resources: Line 1 is not name=value"),
        ({"gpu_eq": "0"}, "GPU-eq per unit: A fractional offering counts more than 0"),
    ],
)
def test_bad_offering_input_names_the_field(
    client_for, admin_user, presets, overrides, shown
) -> None:
    response = client_for(admin_user).post(
        "/manage/catalog/offerings/new/", offering_form(**overrides)
    )

    assert response.status_code == 400
    assert shown in response.text
    assert not Offering.objects.filter(slug="t4-ts-1-8").exists()


def test_admin_edits_an_offering(client_for, admin_user, presets) -> None:
    offering = Offering.objects.get(slug="t4-time-slicing-1-4")
    form = offering_form(slug=offering.slug, name="T4 quarter", gpu_eq="1/4", enabled="")
    del form["enabled"]

    response = client_for(admin_user).post(f"/manage/catalog/offerings/{offering.slug}/edit/", form)

    assert response.status_code == 302
    offering.refresh_from_db()
    assert offering.name == "T4 quarter"
    assert offering.enabled is False


def test_the_overview_runs_a_bounded_number_of_queries(
    client_for, admin_user, django_assert_max_num_queries, db
) -> None:
    client = client_for(admin_user)
    with django_assert_max_num_queries(8):
        empty = client.get("/manage/catalog/")
    catalog_presets_load(actor=None)

    with django_assert_max_num_queries(8):
        full = client.get("/manage/catalog/")

    assert empty.status_code == full.status_code == 200
    assert full.text.count('data-testid="offering-') == Offering.objects.count()


def test_pools_show_the_offerings_they_serve(client_for, admin_user, presets) -> None:
    from portal.catalog.models import GpuModel, SharingBackend  # noqa: PLC0415
    from portal.catalog.services import gpu_pool_create  # noqa: PLC0415

    gpu_pool_create(
        actor=admin_user, cluster="prod", name="a100-mig",
        gpu_model=GpuModel.objects.get(slug="a100-80gb"),
        backend=SharingBackend.objects.get(slug="mig"),
    )  # fmt: skip

    response = client_for(admin_user).get("/manage/catalog/")

    row = response.text.split('data-testid="pool-a100-mig"')[1].split("</tr>")[0]
    assert "1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb" in row
