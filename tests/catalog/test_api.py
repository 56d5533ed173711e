import pytest
from django.core.management import call_command

from portal.catalog.models import GpuModel, Offering
from portal.catalog.presets import catalog_presets_load
from portal.catalog.services import offering_create, offering_update
from tests.tenants.factories import a100, mig_backend


@pytest.fixture
def presets(db) -> None:
    catalog_presets_load(actor=None)


CATALOG_ENDPOINTS = [
    ("get", "/api/v1/gpu-models/"),
    ("post", "/api/v1/gpu-models/"),
    ("get", "/api/v1/gpu-models/a100-80gb/"),
    ("patch", "/api/v1/gpu-models/a100-80gb/"),
    ("get", "/api/v1/offerings/"),
    ("post", "/api/v1/offerings/"),
    ("get", "/api/v1/offerings/t4-whole/"),
    ("patch", "/api/v1/offerings/t4-whole/"),
    ("get", "/api/v1/pools/"),
    ("post", "/api/v1/pools/"),
    ("get", "/api/v1/pools/lab/a100/"),
    ("patch", "/api/v1/pools/lab/a100/"),
    ("delete", "/api/v1/pools/lab/a100/"),
]

PERSONAS = ["developer", "lead", "outsider", "finance_user", "admin_user"]
NON_ADMINS = ["developer", "lead", "outsider", "finance_user"]

NEW_MODEL = {
    "slug": "h200", "name": "NVIDIA H200", "vendor": "NVIDIA", "memory_mib": 143360,
    "node_label_value": "NVIDIA-H200",
}  # fmt: skip


@pytest.mark.parametrize(("method", "url"), CATALOG_ENDPOINTS)
def test_anonymous_callers_get_401(client, presets, method, url) -> None:
    response = getattr(client, method)(url, {}, content_type="application/json")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("persona", PERSONAS)
def test_everyone_signed_in_reads_the_catalog(request, client_for, presets, persona) -> None:
    client = client_for(request.getfixturevalue(persona))

    models = client.get("/api/v1/gpu-models/").json()
    model = client.get("/api/v1/gpu-models/a100-80gb/")
    offerings = client.get("/api/v1/offerings/").json()
    offering = client.get("/api/v1/offerings/t4-whole/")

    assert "a100-80gb" in [model["slug"] for model in models["results"]]
    assert model.status_code == 200
    assert model.json()["node_label_key"] == "nvidia.com/gpu.product"
    assert model.json()["node_label_value"] == "NVIDIA-A100-SXM4-80GB"
    assert offerings["count"] == Offering.objects.count()
    assert offering.status_code == 200
    assert offering.json()["gpu_eq"] == "1"


@pytest.mark.parametrize("persona", NON_ADMINS)
def test_only_admins_change_the_catalog(request, client_for, presets, persona) -> None:
    client = client_for(request.getfixturevalue(persona))

    statuses = [
        client.post("/api/v1/gpu-models/", NEW_MODEL, content_type="application/json"),
        client.patch("/api/v1/gpu-models/t4/", {"enabled": False}, content_type="application/json"),
        client.post("/api/v1/offerings/", {}, content_type="application/json"),
        client.patch(
            "/api/v1/offerings/t4-whole/", {"enabled": False}, content_type="application/json"
        ),
    ]

    assert [response.status_code for response in statuses] == [403] * 4
    assert not GpuModel.objects.filter(slug="h200").exists()
    assert GpuModel.objects.get(slug="t4").enabled
    assert Offering.objects.get(slug="t4-whole").enabled


def test_admin_adds_and_changes_a_gpu_model(client_for, admin_user, presets) -> None:
    client = client_for(admin_user)

    created = client.post("/api/v1/gpu-models/", NEW_MODEL, content_type="application/json")
    changed = client.patch(
        "/api/v1/gpu-models/h200/", {"memory_mib": 144384}, content_type="application/json"
    )

    assert created.status_code == 201
    assert created.json()["node_label_key"] == "nvidia.com/gpu.product"
    assert changed.status_code == 200
    assert changed.json()["memory_mib"] == 144384
    assert changed.json()["name"] == "NVIDIA H200"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"memory_mib": "lots"}, "memory_mib"),
        ({"node_label_value": "not a label!"}, "node_label_value"),
        ({"slug": "Not A Slug"}, "slug"),
        ({"slug": "a100-80gb"}, "slug"),
    ],
)
def test_bad_gpu_models_are_refused_naming_the_field(
    client_for, admin_user, presets, change, field
) -> None:
    response = client_for(admin_user).post(
        "/api/v1/gpu-models/", {**NEW_MODEL, **change}, content_type="application/json"
    )

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not GpuModel.objects.filter(name="NVIDIA H200").exists()


def test_unknown_gpu_model_is_404(client_for, developer, presets) -> None:
    response = client_for(developer).get("/api/v1/gpu-models/nope/")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


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


def test_offerings_filter_by_enabled_and_backend(client_for, developer, presets) -> None:
    offering_update(actor=None, offering=Offering.objects.get(slug="t4-whole"), enabled=False)
    client = client_for(developer)

    def slugs(query: str) -> set[str]:
        body = client.get(f"/api/v1/offerings/?page_size=500&{query}").json()
        return {offering["slug"] for offering in body["results"]}

    assert "t4-whole" not in slugs("enabled=true")
    assert slugs("enabled=false") == {"t4-whole"}
    assert len(slugs("")) == Offering.objects.count()
    assert slugs("backend=mig") == set(
        Offering.objects.filter(backend__slug="mig").values_list("slug", flat=True)
    )


def test_a_bad_enabled_filter_is_bad_input_naming_it(client_for, developer, presets) -> None:
    response = client_for(developer).get("/api/v1/offerings/?enabled=maybe")

    assert response.status_code == 400
    assert "enabled" in response.json()["error"]["fields"]


def test_offering_gpu_eq_is_written_as_a_whole_number_or_a_decimal_string(
    client_for, admin_user, presets
) -> None:
    client = client_for(admin_user)
    base = {"gpu_model": "t4", "resources": {"nvidia.com/gpu": "2"}, "size": "2 GPUs"}

    whole = client.post(
        "/api/v1/offerings/",
        {**base, "slug": "t4-two", "name": "T4 x2", "backend": "whole", "whole": True,
         "gpu_eq": 2},
        content_type="application/json",
    )  # fmt: skip
    eighth = client.post(
        "/api/v1/offerings/",
        {**base, "slug": "t4-ts-1-8", "name": "T4 eighth", "backend": "time-slicing",
         "size": "1/8", "resources": {"nvidia.com/gpu.shared": "1"}, "gpu_eq": "0.125"},
        content_type="application/json",
    )  # fmt: skip

    assert whole.status_code == 201, whole.json()
    assert (whole.json()["gpu_eq"], whole.json()["gpu_eq_display"]) == ("2", "2")
    assert eighth.status_code == 201, eighth.json()
    assert (eighth.json()["gpu_eq"], eighth.json()["gpu_eq_display"]) == ("1/8", "0.13")


@pytest.mark.parametrize("count", [3, 30])
def test_offering_list_queries_do_not_grow_with_offerings(
    client_for, admin_user, django_assert_num_queries, count
) -> None:
    model, backend = a100(admin_user), mig_backend(admin_user)
    for number in range(count):
        offering_create(
            actor=admin_user, slug=f"a100-share-{number}", name=f"A100 share {number}",
            gpu_model=model, backend=backend, size="1g.10gb",
            resources={"nvidia.com/mig-1g.10gb": "1"}, gpu_eq="1/7",
        )  # fmt: skip
    client = client_for(admin_user)

    # session, user, page (with models and backends joined; shorter than a page: counted from
    # its rows)
    with django_assert_num_queries(3):
        response = client.get("/api/v1/offerings/?page_size=50")

    assert len(response.json()["results"]) == count


def test_admin_disables_an_offering(client_for, admin_user, presets) -> None:
    response = client_for(admin_user).patch(
        "/api/v1/offerings/t4-whole/", {"enabled": False}, content_type="application/json"
    )

    assert response.status_code == 200
    assert Offering.objects.get(slug="t4-whole").enabled is False


def test_unknown_offering_is_404(client_for, developer, presets) -> None:
    assert client_for(developer).get("/api/v1/offerings/nope/").status_code == 404


def test_the_schema_generates_without_warnings(db) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


NEW_POOL = {"cluster": "lab", "name": "a100-mig", "gpu_model": "a100-80gb", "backend": "mig"}


@pytest.fixture
def lab(presets):
    from portal.cluster.services import cluster_create  # noqa: PLC0415

    return cluster_create(actor=None, name="lab")


def test_admin_adds_changes_and_removes_a_pool_audited(client_for, admin_user, lab) -> None:
    from portal.catalog.models import GpuPool  # noqa: PLC0415
    from portal.core.models import AuditEvent  # noqa: PLC0415

    client = client_for(admin_user)

    created = client.post(
        "/api/v1/pools/", NEW_POOL | {"node_count": 4}, content_type="application/json"
    )
    changed = client.patch(
        "/api/v1/pools/lab/a100-mig/", {"gpus_per_node": 4}, content_type="application/json"
    )
    listed = client.get("/api/v1/pools/", {"cluster": "lab"}).json()
    removed = client.delete("/api/v1/pools/lab/a100-mig/")

    assert created.status_code == 201, created.content
    assert created.json() == NEW_POOL | {"node_count": 4, "gpus_per_node": 8}
    assert changed.status_code == 200, changed.content
    assert changed.json()["gpus_per_node"] == 4
    assert listed["count"] == 1
    assert listed["results"][0]["gpus_per_node"] == 4
    assert removed.status_code == 204
    assert not GpuPool.objects.exists()
    assert client.get("/api/v1/pools/lab/a100-mig/").status_code == 404
    events = AuditEvent.objects.filter(action__startswith="gpu_pool.").order_by("pk")
    assert [(event.action, event.actor) for event in events] == [
        ("gpu_pool.create", admin_user),
        ("gpu_pool.update", admin_user),
        ("gpu_pool.delete", admin_user),
    ]
    created_event, updated_event, deleted_event = events
    assert created_event.changes["cluster"] == [None, "lab"]
    assert updated_event.changes == {"gpus_per_node": [8, 4]}
    assert deleted_event.changes["name"] == ["a100-mig", None]
    assert deleted_event.changes["gpus_per_node"] == [4, None]


def test_a_pool_must_name_a_registered_cluster(client_for, admin_user, lab) -> None:
    client = client_for(admin_user)

    refused = client.post(
        "/api/v1/pools/", NEW_POOL | {"cluster": "nowhere"}, content_type="application/json"
    )
    client.post("/api/v1/pools/", NEW_POOL, content_type="application/json")
    moved = client.patch(
        "/api/v1/pools/lab/a100-mig/", {"cluster": "gone"}, content_type="application/json"
    )
    again = client.post("/api/v1/pools/", NEW_POOL, content_type="application/json")
    unknown_model = client.post(
        "/api/v1/pools/", NEW_POOL | {"gpu_model": "z9"}, content_type="application/json"
    )

    assert refused.status_code == 400
    assert list(refused.json()["error"]["fields"]) == ["cluster"]
    assert "nowhere" in refused.json()["error"]["fields"]["cluster"][0]
    assert moved.status_code == 400
    assert list(moved.json()["error"]["fields"]) == ["cluster"]
    assert again.status_code == 409
    assert unknown_model.status_code == 400
    assert list(unknown_model.json()["error"]["fields"]) == ["gpu_model"]


@pytest.mark.parametrize("persona", NON_ADMINS)
def test_everyone_reads_pools_and_only_admins_write_them(
    request, client_for, admin_user, lab, persona
) -> None:
    client_for(admin_user).post("/api/v1/pools/", NEW_POOL, content_type="application/json")
    client = client_for(request.getfixturevalue(persona))

    read = client.get("/api/v1/pools/")
    one = client.get("/api/v1/pools/lab/a100-mig/")
    writes = [
        client.post("/api/v1/pools/", NEW_POOL | {"name": "x"}, content_type="application/json"),
        client.patch("/api/v1/pools/lab/a100-mig/", {}, content_type="application/json"),
        client.delete("/api/v1/pools/lab/a100-mig/"),
    ]

    assert [row["name"] for row in read.json()["results"]] == ["a100-mig"]
    assert one.json()["backend"] == "mig"
    assert [response.status_code for response in writes] == [403] * 3
    assert writes[0].json()["error"]["code"] == "forbidden"


def test_the_pool_page_refuses_an_unknown_cluster(client_for, admin_user, lab) -> None:
    from portal.catalog.models import GpuPool  # noqa: PLC0415

    form = NEW_POOL | {"node_count": 0, "gpus_per_node": 8}
    refused = client_for(admin_user).post("/manage/catalog/pools/new/", form | {"cluster": "x"})
    saved = client_for(admin_user).post("/manage/catalog/pools/new/", form)

    assert refused.status_code == 400
    assert "There is no cluster" in refused.text
    assert not GpuPool.objects.filter(cluster="x").exists()
    assert saved.status_code == 302
    assert GpuPool.objects.filter(cluster="lab", name="a100-mig").exists()
