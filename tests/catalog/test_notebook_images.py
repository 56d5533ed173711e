"""Notebook images: the admin-curated list of Jupyter images developers launch notebooks from."""

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from portal.catalog.models import NotebookImage
from portal.catalog.presets import IMAGES, catalog_presets_load
from portal.catalog.services import notebook_image_create, notebook_image_update
from portal.core.errors import ValidationFailed
from portal.core.models import AuditEvent

PYTORCH = "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-17"
NON_ADMINS = ["developer", "lead", "outsider", "finance_user"]


def make_image(actor: Any, **overrides: Any) -> NotebookImage:
    fields = {
        "slug": "pytorch", "name": "PyTorch", "image": PYTORCH, "vendors": ["NVIDIA"],
        **overrides,
    }  # fmt: skip
    return notebook_image_create(actor=actor, **fields)


def image_form(**overrides: str) -> dict[str, str]:
    return {
        "slug": "jax-cuda", "name": "JAX (CUDA)", "image": "ghcr.io/example/jax-notebook:0.4.35",
        "description": "JAX on CUDA 12", "vendors": "NVIDIA", "enabled": "on", **overrides,
    }  # fmt: skip


# Services


def test_a_valid_image_is_created_and_audited(admin_user) -> None:
    image = make_image(admin_user, description="PyTorch on CUDA 12")

    assert (image.slug, image.image, image.vendors, image.enabled) == (
        "pytorch",
        PYTORCH,
        ["NVIDIA"],
        True,
    )
    event = AuditEvent.objects.get(action="notebook_image.create")
    assert event.actor == admin_user
    assert (event.target_type, event.target_id) == ("catalog.notebookimage", str(image.pk))
    assert event.changes["image"] == [None, PYTORCH]


@pytest.mark.parametrize(
    ("vendors", "stored"),
    [
        ("NVIDIA, AMD", ["NVIDIA", "AMD"]),
        (" NVIDIA ,, nvidia, ", ["NVIDIA"]),
        ([" AMD ", "", "amd"], ["AMD"]),
        (("NVIDIA",), ["NVIDIA"]),
        ("", []),
        (" , ", []),
        ([], []),
    ],
)
def test_vendors_are_stored_as_a_list_of_names(admin_user, vendors, stored) -> None:
    assert make_image(admin_user, vendors=vendors).vendors == stored


def test_an_image_without_vendors_suits_every_vendor(admin_user) -> None:
    every = make_image(admin_user, slug="minimal", name="Minimal", vendors="")
    nvidia = make_image(admin_user, vendors="NVIDIA")

    assert every.suits("AMD")
    assert every.suits("NVIDIA")
    assert nvidia.suits("nvidia")
    assert not nvidia.suits("AMD")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"image": "Not An Image"}, "image"),
        ({"image": "quay.io/jupyter/pytorch-notebook:"}, "image"),
        ({"image": "quay.io/Jupyter/pytorch-notebook:latest"}, "image"),
        ({"image": ""}, "image"),
        ({"vendors": ["NVIDIA", 3]}, "vendors"),
        ({"vendors": [None]}, "vendors"),
        ({"vendors": {"NVIDIA": True}}, "vendors"),
        ({"vendors": 1}, "vendors"),
        ({"slug": "Not A Slug"}, "slug"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_image_data_is_refused_naming_the_field(admin_user, overrides, field) -> None:
    with pytest.raises(ValidationFailed) as refused:
        make_image(admin_user, **overrides)

    assert set(refused.value.fields) == {field}
    assert field in refused.value.message
    assert not NotebookImage.objects.exists()
    assert not AuditEvent.objects.filter(action="notebook_image.create").exists()


def test_every_bad_field_is_named_at_once(admin_user) -> None:
    with pytest.raises(ValidationFailed) as refused:
        make_image(admin_user, image="Not An Image", vendors=[3], slug="Bad Slug")

    assert set(refused.value.fields) == {"image", "vendors", "slug"}


@pytest.mark.parametrize("field", ["slug", "name"])
def test_a_taken_slug_or_name_is_refused_naming_it(admin_user, field) -> None:
    make_image(admin_user)
    other = {"slug": "pytorch-2", "name": "PyTorch 2"}
    other.pop(field)  # keep the first image's value for this field

    # As for GPU models and offerings: the unique check runs with the others, as bad input
    # naming the field (400); a Conflict (409) is left for a concurrent duplicate.
    with pytest.raises(ValidationFailed) as refused:
        make_image(admin_user, **other)

    assert "already exists" in " ".join(refused.value.fields[field])
    assert NotebookImage.objects.count() == 1


def test_an_update_records_before_and_after(admin_user) -> None:
    image = make_image(admin_user)

    notebook_image_update(
        actor=admin_user, notebook_image=image, vendors="NVIDIA, AMD", enabled=False
    )

    image.refresh_from_db()
    assert (image.vendors, image.enabled) == (["NVIDIA", "AMD"], False)
    event = AuditEvent.objects.get(action="notebook_image.update")
    assert event.actor == admin_user
    assert set(event.changes) == {"vendors", "enabled"}
    assert event.changes["enabled"] == [True, False]


def test_a_refused_update_keeps_the_old_values(admin_user) -> None:
    image = make_image(admin_user)

    with pytest.raises(ValidationFailed) as refused:
        notebook_image_update(actor=admin_user, notebook_image=image, image="no good!")

    assert "image" in refused.value.fields
    image.refresh_from_db()
    assert image.image == PYTORCH
    assert not AuditEvent.objects.filter(action="notebook_image.update").exists()


# Pages


def test_admin_adds_an_image_from_the_form(client_for, admin_user, db) -> None:
    client = client_for(admin_user)

    response = client.post("/manage/catalog/images/new/", image_form(vendors=" NVIDIA, AMD "))

    assert response.status_code == 302
    assert response["Location"] == "/manage/catalog/"
    image = NotebookImage.objects.get(slug="jax-cuda")
    assert (image.image, image.vendors, image.enabled) == (
        "ghcr.io/example/jax-notebook:0.4.35",
        ["NVIDIA", "AMD"],
        True,
    )
    overview = client.get("/manage/catalog/").text
    assert "New notebook image: JAX (CUDA) is saved." in overview
    row = overview.split('data-testid="image-jax-cuda"')[1].split("</tr>")[0]
    assert "ghcr.io/example/jax-notebook:0.4.35" in row
    assert "NVIDIA, AMD" in row
    assert "/manage/catalog/images/jax-cuda/edit/" in row


def test_admin_edits_an_image_from_the_form(client_for, admin_user, catalog) -> None:
    client = client_for(admin_user)

    shown = client.get("/manage/catalog/images/pytorch-cuda12/edit/")
    form = image_form(
        slug="pytorch-cuda12", name="PyTorch (CUDA 12.8)",
        image="quay.io/jupyter/pytorch-notebook:cuda12-2025-12-01", vendors="",
    )  # fmt: skip
    del form["enabled"]
    saved = client.post("/manage/catalog/images/pytorch-cuda12/edit/", form)

    assert shown.status_code == 200
    assert 'value="NVIDIA"' in shown.text
    assert PYTORCH in shown.text
    assert saved.status_code == 302
    image = NotebookImage.objects.get(slug="pytorch-cuda12")
    assert (image.name, image.image, image.vendors, image.enabled) == (
        "PyTorch (CUDA 12.8)",
        "quay.io/jupyter/pytorch-notebook:cuda12-2025-12-01",
        [],
        False,
    )
    row = client.get("/manage/catalog/").text.split('data-testid="image-pytorch-cuda12"')[1]
    assert "every vendor" in row.split("</tr>")[0]
    assert AuditEvent.objects.filter(action="notebook_image.update", actor=admin_user).exists()


@pytest.mark.parametrize(
    ("overrides", "status", "shown"),
    [
        ({"image": "Not An Image"}, 400, "Image: An image reference such as"),
        ({"image": ""}, 400, "Image: This field is required."),
        ({"slug": "pytorch-cuda12"}, 400, "Slug: Notebook image with this Slug already exists."),
        ({"name": "Minimal Python"}, 400, "Name: Notebook image with this Name already exists."),
    ],
)
def test_bad_image_input_names_the_field(
    client_for, admin_user, catalog, overrides, status, shown
) -> None:
    count = NotebookImage.objects.count()

    response = client_for(admin_user).post("/manage/catalog/images/new/", image_form(**overrides))

    assert response.status_code == status
    assert shown in response.text
    assert NotebookImage.objects.count() == count


@pytest.mark.parametrize("persona", NON_ADMINS)
def test_other_personas_get_404_on_the_image_pages(
    request: pytest.FixtureRequest, client_for, catalog, persona
) -> None:
    client = client_for(request.getfixturevalue(persona))
    pages = ["/manage/catalog/images/new/", "/manage/catalog/images/pytorch-cuda12/edit/"]

    for page in ["/manage/catalog/", *pages]:
        assert client.get(page).status_code == 404, page
    for page in pages:
        assert client.post(page, image_form(slug="pytorch-cuda12")).status_code == 404, page

    assert not NotebookImage.objects.filter(slug="jax-cuda").exists()
    assert NotebookImage.objects.get(slug="pytorch-cuda12").name == "PyTorch (CUDA 12)"


def test_admin_gets_404_for_an_image_that_does_not_exist(client_for, admin_user, db) -> None:
    assert client_for(admin_user).get("/manage/catalog/images/nope/edit/").status_code == 404


# API


def _slugs(response: Any) -> set[str]:
    assert response.status_code == 200, response.json()
    return {image["slug"] for image in response.json()["results"]}


ENABLED_PRESETS = {image.slug for image in IMAGES if image.enabled}


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/api/v1/notebook-images/"),
        ("post", "/api/v1/notebook-images/"),
        ("get", "/api/v1/notebook-images/pytorch-cuda12/"),
        ("patch", "/api/v1/notebook-images/pytorch-cuda12/"),
    ],
)
def test_anonymous_callers_get_401(client, catalog, method, url) -> None:
    response = getattr(client, method)(url, {}, content_type="application/json")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("persona", NON_ADMINS)
def test_non_admins_list_and_read_only_the_enabled_images(
    request: pytest.FixtureRequest, client_for, catalog, persona
) -> None:
    client = client_for(request.getfixturevalue(persona))

    listed = client.get("/api/v1/notebook-images/")
    asked_for_disabled = client.get("/api/v1/notebook-images/?enabled=false")
    enabled = client.get("/api/v1/notebook-images/pytorch-cuda12/")
    disabled = client.get("/api/v1/notebook-images/pytorch-rocm/")

    assert "pytorch-rocm" not in ENABLED_PRESETS
    assert _slugs(listed) == ENABLED_PRESETS
    assert _slugs(asked_for_disabled) == set()
    assert enabled.json() == {
        "slug": "pytorch-cuda12", "name": "PyTorch (CUDA 12)", "image": PYTORCH,
        "description": enabled.json()["description"], "vendors": ["NVIDIA"], "enabled": True,
    }  # fmt: skip
    assert disabled.status_code == 404
    assert disabled.json()["error"]["code"] == "not_found"


def test_admins_list_every_image_and_filter_by_enabled(client_for, admin_user, catalog) -> None:
    client = client_for(admin_user)

    assert _slugs(client.get("/api/v1/notebook-images/")) == {image.slug for image in IMAGES}
    assert _slugs(client.get("/api/v1/notebook-images/?enabled=true")) == ENABLED_PRESETS
    assert _slugs(client.get("/api/v1/notebook-images/?enabled=false")) == {"pytorch-rocm"}
    assert client.get("/api/v1/notebook-images/pytorch-rocm/").json()["enabled"] is False


def test_a_bad_enabled_filter_is_bad_input_naming_it(client_for, developer, catalog) -> None:
    response = client_for(developer).get("/api/v1/notebook-images/?enabled=maybe")

    assert response.status_code == 400
    assert "enabled" in response.json()["error"]["fields"]


def test_admin_adds_an_image(client_for, admin_user, db) -> None:
    body = {
        "slug": "jax-cuda", "name": "JAX (CUDA)", "image": "ghcr.io/example/jax-notebook:0.4.35",
        "vendors": [" NVIDIA "],
    }  # fmt: skip

    response = client_for(admin_user).post(
        "/api/v1/notebook-images/", body, content_type="application/json"
    )

    assert response.status_code == 201, response.json()
    assert response.json() == {**body, "description": "", "vendors": ["NVIDIA"], "enabled": True}
    assert NotebookImage.objects.get(slug="jax-cuda").vendors == ["NVIDIA"]
    assert AuditEvent.objects.filter(action="notebook_image.create", actor=admin_user).exists()


@pytest.mark.parametrize("persona", NON_ADMINS)
def test_only_admins_change_the_images(
    request: pytest.FixtureRequest, client_for, catalog, persona
) -> None:
    client = client_for(request.getfixturevalue(persona))
    body = {"slug": "jax-cuda", "name": "JAX", "image": "ghcr.io/example/jax-notebook:0.4.35"}

    created = client.post("/api/v1/notebook-images/", body, content_type="application/json")
    changed = client.patch(
        "/api/v1/notebook-images/pytorch-cuda12/", {"enabled": False},
        content_type="application/json",
    )  # fmt: skip
    # A disabled image is not theirs to see, let alone change.
    hidden = client.patch(
        "/api/v1/notebook-images/pytorch-rocm/", {"enabled": True},
        content_type="application/json",
    )  # fmt: skip

    assert (created.status_code, changed.status_code, hidden.status_code) == (403, 403, 404)
    assert created.json()["error"]["code"] == "forbidden"
    assert not NotebookImage.objects.filter(slug="jax-cuda").exists()
    assert NotebookImage.objects.get(slug="pytorch-cuda12").enabled is True
    assert NotebookImage.objects.get(slug="pytorch-rocm").enabled is False


def test_admin_changes_an_image(client_for, admin_user, catalog) -> None:
    response = client_for(admin_user).patch(
        "/api/v1/notebook-images/pytorch-rocm/",
        {"image": "registry.example.org/jupyter/rocm-pytorch:2.6.0", "enabled": True},
        content_type="application/json",
    )

    assert response.status_code == 200, response.json()
    assert response.json()["vendors"] == ["AMD"]
    image = NotebookImage.objects.get(slug="pytorch-rocm")
    assert (image.image, image.enabled) == ("registry.example.org/jupyter/rocm-pytorch:2.6.0", True)
    event = AuditEvent.objects.get(action="notebook_image.update")
    assert set(event.changes) == {"image", "enabled"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"image": "Not An Image"}, "image"),
        ({"vendors": "NVIDIA"}, "vendors"),
        ({"vendors": [""]}, "vendors"),
        ({"vendors": [["NVIDIA"]]}, "vendors"),
        ({"slug": "Not A Slug"}, "slug"),
        ({"slug": "pytorch-cuda12"}, "slug"),
        ({"name": "PyTorch (CUDA 12)"}, "name"),
    ],
)
def test_bad_images_are_refused_in_the_error_envelope_naming_the_field(
    client_for, admin_user, catalog, change, field
) -> None:
    body = {"slug": "jax-cuda", "name": "JAX", "image": "ghcr.io/example/jax-notebook:0.4.35"}

    response = client_for(admin_user).post(
        "/api/v1/notebook-images/", {**body, **change}, content_type="application/json"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"]
    assert field in error["message"]
    assert NotebookImage.objects.count() == len(IMAGES)


def test_a_refused_patch_names_the_field_and_changes_nothing(
    client_for, admin_user, catalog
) -> None:
    response = client_for(admin_user).patch(
        "/api/v1/notebook-images/pytorch-cuda12/",
        {"image": "Not An Image", "enabled": False},
        content_type="application/json",
    )

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["image"]
    image = NotebookImage.objects.get(slug="pytorch-cuda12")
    assert (image.image, image.enabled) == (PYTORCH, True)


def test_unknown_image_is_404(client_for, admin_user, db) -> None:
    response = client_for(admin_user).get("/api/v1/notebook-images/nope/")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("count", [3, 30])
def test_image_list_queries_do_not_grow_with_images(
    client_for, admin_user, developer, django_assert_max_num_queries, count
) -> None:
    for number in range(count):
        make_image(
            admin_user, slug=f"image-{number}", name=f"Image {number}",
            image=f"quay.io/jupyter/minimal-notebook:2025-11-{number % 28 + 1:02d}",
            enabled=number % 3 != 0,
        )  # fmt: skip

    for user, listed in [(admin_user, count), (developer, count - (count + 2) // 3)]:
        client = client_for(user)
        # session, user, count, page
        with django_assert_max_num_queries(4):
            response = client.get("/api/v1/notebook-images/?page_size=50")
        assert response.json()["count"] == listed
        assert len(response.json()["results"]) == listed


def test_the_image_list_paginates(client_for, developer, catalog) -> None:
    body = client_for(developer).get("/api/v1/notebook-images/?page_size=2").json()

    assert body["count"] == len(ENABLED_PRESETS)
    assert len(body["results"]) == 2
    assert body["next"] is not None


# Presets


def test_presets_create_the_images_once(db) -> None:
    first = catalog_presets_load(actor=None)
    events = AuditEvent.objects.filter(action="notebook_image.create").count()

    second = catalog_presets_load(actor=None)

    assert first["images"] == len(IMAGES) == NotebookImage.objects.count() == events
    assert second["images"] == 0
    assert NotebookImage.objects.count() == len(IMAGES)
    assert AuditEvent.objects.filter(action="notebook_image.create").count() == events


def test_preset_images_are_valid_and_suit_their_vendors(catalog) -> None:
    images = {image.slug: image for image in NotebookImage.objects.all()}

    for image in images.values():
        image.full_clean()
    assert images["pytorch-cuda12"].image == PYTORCH
    assert images["pytorch-cuda12"].suits("NVIDIA")
    assert not images["pytorch-cuda12"].suits("AMD")
    assert images["tensorflow-cuda"].vendors == ["NVIDIA"]
    assert images["pytorch-rocm"].suits("AMD")
    assert images["minimal-python"].vendors == []
    assert images["minimal-python"].suits("AMD")
    # Every enabled preset is a Jupyter Docker Stacks image, which starts as notebooks expect.
    for slug in ENABLED_PRESETS:
        assert images[slug].image.startswith("quay.io/jupyter/"), slug


def test_a_rerun_leaves_an_admins_image_edits_alone(admin_user, catalog) -> None:
    image = NotebookImage.objects.get(slug="pytorch-cuda12")
    notebook_image_update(
        actor=admin_user, notebook_image=image, slug="torch", enabled=False,
        image="quay.io/jupyter/pytorch-notebook:cuda12-2025-12-01",
    )  # fmt: skip
    NotebookImage.objects.filter(slug="minimal-python").delete()  # as a repair would

    again = catalog_presets_load(actor=None)

    # The renamed image is recognised by its name; the deleted one comes back.
    assert again["images"] == 1
    assert not NotebookImage.objects.filter(slug="pytorch-cuda12").exists()
    image.refresh_from_db()
    assert (image.slug, image.enabled) == ("torch", False)
    assert NotebookImage.objects.filter(slug="minimal-python").exists()


def test_the_command_and_the_demo_create_the_images(db) -> None:
    output = StringIO()

    call_command("catalog_presets", stdout=output)
    call_command("demo_data", stdout=StringIO())

    assert f"{len(IMAGES)} notebook images" in output.getvalue()
    assert NotebookImage.objects.count() == len(IMAGES)
