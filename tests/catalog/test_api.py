import pytest

from portal.catalog.models import Offering
from portal.catalog.presets import catalog_presets_load


@pytest.fixture
def presets(db) -> None:
    catalog_presets_load(actor=None)


def test_everyone_signed_in_reads_the_catalog(client_for, developer, outsider, presets) -> None:
    for user in (developer, outsider):
        models = client_for(user).get("/api/v1/gpu-models/").json()
        assert "a100-80gb" in [model["slug"] for model in models["results"]]


def test_offerings_show_resources_and_exact_gpu_eq(client_for, developer, presets) -> None:
    body = client_for(developer).get("/api/v1/offerings/a100-80gb-mig-1g-10gb/").json()

    assert body["resources"] == {"nvidia.com/mig-1g.10gb": "1"}
    assert body["gpu_eq"] == "1/7"
    assert body["gpu_eq_display"] == "0.14"
    assert body["gpu_model"] == "a100-80gb"
    assert body["backend"] == "mig"


def test_offerings_filter_by_model(client_for, developer, presets) -> None:
    body = client_for(developer).get("/api/v1/offerings/?gpu_model=t4&page_size=100").json()

    assert body["count"] == Offering.objects.filter(gpu_model__slug="t4").count()
    assert {offering["gpu_model"] for offering in body["results"]} == {"t4"}


def test_admin_adds_an_offering_and_others_may_not(client_for, admin_user, lead, presets) -> None:
    offering = {
        "slug": "t4-ts-1-8", "name": "T4 eighth", "gpu_model": "t4", "backend": "time-slicing",
        "size": "1/8", "resources": {"nvidia.com/gpu.shared": "1"}, "gpu_eq": "1/8",
    }  # fmt: skip

    refused = client_for(lead).post("/api/v1/offerings/", offering, content_type="application/json")
    created = client_for(admin_user).post(
        "/api/v1/offerings/", offering, content_type="application/json"
    )

    assert refused.status_code == 403
    assert created.status_code == 201
    assert created.json()["gpu_eq"] == "1/8"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"resources": {"nvidia gpu": "1"}}, "resources"),
        ({"resources": {"nvidia.com/gpu.shared": "two"}}, "resources"),
        ({"gpu_eq": "0"}, "gpu_eq"),
        ({"gpu_eq": 0.5}, "gpu_eq"),
        ({"gpu_model": "no-such-gpu"}, "gpu_model"),
    ],
)
def test_bad_offerings_are_refused_naming_the_field(
    client_for, admin_user, presets, change, field
) -> None:
    offering = {
        "slug": "t4-new", "name": "T4 new", "gpu_model": "t4", "backend": "time-slicing",
        "size": "1/8", "resources": {"nvidia.com/gpu.shared": "1"}, "gpu_eq": "1/8", **change,
    }  # fmt: skip

    response = client_for(admin_user).post(
        "/api/v1/offerings/", offering, content_type="application/json"
    )

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Offering.objects.filter(slug="t4-new").exists()


def test_admin_disables_an_offering(client_for, admin_user, presets) -> None:
    response = client_for(admin_user).patch(
        "/api/v1/offerings/t4-whole/", {"enabled": False}, content_type="application/json"
    )

    assert response.status_code == 200
    assert Offering.objects.get(slug="t4-whole").enabled is False


def test_unknown_offering_is_404(client_for, developer, presets) -> None:
    assert client_for(developer).get("/api/v1/offerings/nope/").status_code == 404


def test_the_schema_generates_without_warnings(db) -> None:
    from django.core.management import call_command  # noqa: PLC0415

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")
