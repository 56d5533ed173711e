from fractions import Fraction

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.catalog.models import GpuModel, GpuPool, Offering, SharingBackend
from portal.catalog.presets import catalog_presets_load
from portal.catalog.services import gpu_pool_create, offering_create
from portal.cluster.services import cluster_create

PAGES = [
    "/manage/catalog/",
    "/manage/catalog/models/new/",
    "/manage/catalog/models/t4/edit/",
    "/manage/catalog/backends/new/",
    "/manage/catalog/offerings/new/",
    "/manage/catalog/offerings/t4-whole/edit/",
    "/manage/catalog/pools/new/",
]
FORM_PAGES = PAGES[1:]

# The most queries the overview may run, however big the catalog: session, user, the navigation's
# pending approvals and extensions (2), GPU models, sharing backends, offerings (with model and
# backend), pools (with model and backend), notebook images.
OVERVIEW_QUERIES = 9


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
    rows_before = Offering.objects.count(), GpuModel.objects.count(), GpuPool.objects.count()

    for page in PAGES:
        assert client.get(page).status_code == 404, page
    for page in FORM_PAGES:
        assert client.post(page, offering_form()).status_code == 404, page

    assert not Offering.objects.filter(slug="t4-ts-1-8").exists()
    assert (Offering.objects.count(), GpuModel.objects.count(), GpuPool.objects.count()) == (
        rows_before
    )


def test_admin_gets_404_for_a_catalog_entry_that_does_not_exist(client_for, admin_user) -> None:
    client = client_for(admin_user)

    assert client.get("/manage/catalog/models/nope/edit/").status_code == 404
    assert client.get("/manage/catalog/offerings/nope/edit/").status_code == 404


def test_admin_adds_an_offering_from_the_form(client_for, admin_user, presets) -> None:
    client = client_for(admin_user)

    response = client.post("/manage/catalog/offerings/new/", offering_form())

    assert response.status_code == 302
    assert response["Location"] == "/manage/catalog/"
    overview = client.get("/manage/catalog/").text
    assert 'data-testid="offering-t4-ts-1-8"' in overview
    assert "New offering: T4, 1/8 share is saved." in overview
    row = overview.split('data-testid="offering-t4-ts-1-8"')[1].split("</tr>")[0]
    assert "0.13" in row
    assert "(1/8)" in row
    offering = Offering.objects.get(slug="t4-ts-1-8")
    assert offering.gpu_eq == Fraction(1, 8)
    assert offering.resources == {"nvidia.com/gpu.shared": "1"}
    assert offering.max_units_per_workload == 1


def test_the_overview_shows_gpu_eq_rounded_and_exact(client_for, admin_user, presets) -> None:
    text = client_for(admin_user).get("/manage/catalog/").text

    row = text.split('data-testid="offering-a100-80gb-mig-1g-10gb"')[1].split("</tr>")[0]
    assert "0.14" in row
    assert "(1/7)" in row
    assert "nvidia.com/mig-1g.10gb: 1" in row


@pytest.mark.parametrize(
    ("overrides", "shown"),
    [
        ({"resources": "nvidia gpu=1"}, "Resources: resource name"),
        ({"resources": "kubernetes.io/gpu=1"}, "reserved"),
        ({"resources": "nvidia.com/gpu.shared=two"}, "not a Kubernetes quantity"),
        ({"resources": "just-a-name"}, "Resources: Line 1 is not name=value"),
        ({"resources": "a.io/x=1\na.io/x=2"}, "Resources: Line 2 repeats"),
        ({"resources": ""}, "Resources: This field is required."),
        ({"annotations": "no value="}, "Annotations: Line 1 is not name=value"),
        ({"gpu_eq": "0"}, "GPU-eq per unit: A fractional offering counts more than 0"),
        ({"gpu_eq": "3/2"}, "GPU-eq per unit: A fractional offering counts more than 0"),
        ({"gpu_eq": "a lot"}, "GPU-eq per unit: "),
        ({"gpu_model": "nope"}, "GPU model: Select a valid choice."),
        ({"slug": "t4-whole"}, "Slug: Offering with this Slug already exists."),
    ],
)
def test_bad_offering_input_names_the_field(
    client_for, admin_user, presets, overrides, shown
) -> None:
    count = Offering.objects.count()

    response = client_for(admin_user).post(
        "/manage/catalog/offerings/new/", offering_form(**overrides)
    )

    assert response.status_code == 400
    assert shown in response.text
    assert Offering.objects.count() == count


def test_an_empty_post_shows_every_required_field(client_for, admin_user, presets) -> None:
    response = client_for(admin_user).post("/manage/catalog/offerings/new/", {})

    assert response.status_code == 400
    assert "Slug: This field is required." in response.text
    assert "GPU-eq per unit: This field is required." in response.text


def test_the_edit_form_shows_the_offering_as_entered(client_for, admin_user, presets) -> None:
    text = (
        client_for(admin_user).get("/manage/catalog/offerings/a100-80gb-hami-20480mib/edit/").text
    )

    assert "nvidia.com/gpumem=20480" in text
    assert "nvidia.com/use-gputype=NVIDIA A100-SXM4-80GB" in text
    assert 'value="1/4"' in text


def test_admin_edits_an_offering(client_for, admin_user, presets) -> None:
    offering = Offering.objects.get(slug="t4-time-slicing-1-4")
    form = offering_form(slug=offering.slug, name="T4 quarter", gpu_eq="0.25")
    del form["enabled"]

    response = client_for(admin_user).post(f"/manage/catalog/offerings/{offering.slug}/edit/", form)

    assert response.status_code == 302
    offering.refresh_from_db()
    assert offering.name == "T4 quarter"
    assert offering.gpu_eq == Fraction(1, 4)
    assert offering.enabled is False


def test_admin_adds_and_edits_a_gpu_model(client_for, admin_user, db) -> None:
    client = client_for(admin_user)
    form = {
        "slug": "l4", "name": "NVIDIA L4", "vendor": "NVIDIA", "memory_mib": "23034",
        "node_label_key": "nvidia.com/gpu.product", "node_label_value": "NVIDIA-L4",
        "enabled": "on",
    }  # fmt: skip

    created = client.post("/manage/catalog/models/new/", form)
    refused = client.post("/manage/catalog/models/l4/edit/", {**form, "node_label_value": "L 4"})
    edited = client.post("/manage/catalog/models/l4/edit/", {**form, "memory_mib": "23040"})

    assert (created.status_code, refused.status_code, edited.status_code) == (302, 400, 302)
    assert "Node label value: Not a valid label value" in refused.text
    assert GpuModel.objects.get(slug="l4").memory_mib == 23040


def test_admin_adds_a_sharing_backend(client_for, admin_user, db) -> None:
    form = {"slug": "fake-share", "name": "Fake share", "description": "", "memory_isolation": ""}

    response = client_for(admin_user).post("/manage/catalog/backends/new/", form)

    assert response.status_code == 302
    assert SharingBackend.objects.get(slug="fake-share").memory_isolation is False


def test_admin_adds_a_pool_and_a_taken_name_is_a_conflict(client_for, admin_user, presets) -> None:
    cluster_create(actor=None, name="prod")
    client = client_for(admin_user)
    form = {"cluster": "prod", "name": "t4-ts", "gpu_model": "t4", "backend": "time-slicing",
            "node_count": "3", "gpus_per_node": "4"}  # fmt: skip

    created = client.post("/manage/catalog/pools/new/", form)
    again = client.post("/manage/catalog/pools/new/", form)

    assert created.status_code == 302
    assert again.status_code == 409
    assert "exists already" in again.text
    assert GpuPool.objects.get(cluster="prod", name="t4-ts").node_count == 3


def _add_to_catalog(admin_user, *, prefix: str, number: int) -> None:
    """`number` more offerings (T4 time-slicing shares) and as many pools."""
    model = GpuModel.objects.get(slug="t4")
    backend = SharingBackend.objects.get(slug="time-slicing")
    cluster_create(actor=None, name=prefix)
    for index in range(number):
        offering_create(
            actor=admin_user, slug=f"{prefix}-{index}", name=f"Extra {index}", gpu_model=model,
            backend=backend, size=f"1/{index + 2}", resources={"nvidia.com/gpu.shared": "1"},
            gpu_eq=Fraction(1, index + 2),
        )  # fmt: skip
        gpu_pool_create(
            actor=admin_user, cluster=prefix, name=f"pool-{index}", gpu_model=model,
            backend=backend,
        )  # fmt: skip


def _overview(client) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/manage/catalog/")
    assert response.status_code == 200
    return len(queries), response.text


def test_the_overview_runs_the_same_few_queries_however_big_the_catalog(
    client_for, admin_user, django_assert_max_num_queries, presets
) -> None:
    client = client_for(admin_user)
    _add_to_catalog(admin_user, prefix="small", number=1)
    small, _ = _overview(client)

    _add_to_catalog(admin_user, prefix="large", number=60)
    with django_assert_max_num_queries(OVERVIEW_QUERIES):
        large, text = _overview(client)

    assert small == large <= OVERVIEW_QUERIES
    assert text.count('data-testid="offering-') == Offering.objects.count()
    assert text.count('data-testid="pool-') == GpuPool.objects.count() == 61


def test_pools_show_the_offerings_they_serve(client_for, admin_user, presets) -> None:
    cluster_create(actor=None, name="prod")
    gpu_pool_create(
        actor=admin_user, cluster="prod", name="a100-mig",
        gpu_model=GpuModel.objects.get(slug="a100-80gb"),
        backend=SharingBackend.objects.get(slug="mig"),
    )  # fmt: skip

    response = client_for(admin_user).get("/manage/catalog/")

    row = response.text.split('data-testid="pool-a100-mig"')[1].split("</tr>")[0]
    assert "1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb" in row
