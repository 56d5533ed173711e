"""The request form offers only what can work: the offerings of the GPU models the tenant has
quota for, grouped by model with the model in each label, those no GPU pool serves marked, and
a select that follows the tenant."""

import re

import pytest

from portal.allocations.models import GpuRequest
from portal.catalog.models import Offering
from portal.catalog.services import gpu_pool_create
from portal.cluster.services import cluster_create
from tenants.models import MemberRole
from tenants.services import membership_set, quota_set

WHOLE, MIG, H100 = "a100-80gb-whole", "a100-80gb-mig-3g-40gb", "h100-80gb-whole"


def options(page: str) -> list[str]:
    select = re.search(r'<select name="offering".*?</select>', page, re.S)
    assert select, "no offering select"
    return re.findall(r'<option value="([^"]+)"', select.group(0))


def groups(page: str) -> list[str]:
    return re.findall(r'<optgroup label="([^"]+)"', page)


def option_label(page: str, slug: str) -> str:
    match = re.search(rf'<option value="{slug}"[^>]*>([^<]*)</option>', page)
    assert match, f"no option {slug}"
    return " ".join(match.group(1).split())


@pytest.fixture
def a100_and_t4_tenant(admin_user, a100_tenant, catalog):
    quota_set(
        actor=admin_user, tenant=a100_tenant, gpu_model=catalog["t4-whole"].gpu_model, gpu_eq=2
    )
    return a100_tenant


def test_the_form_lists_only_the_tenants_models_grouped_by_model(
    client_for, developer, a100_and_t4_tenant, catalog
) -> None:
    page = client_for(developer).get("/requests/new/").text

    listed = options(page)
    a100 = catalog[WHOLE].gpu_model
    t4 = catalog["t4-whole"].gpu_model
    expected = Offering.objects.filter(enabled=True, gpu_model__in=[a100, t4])
    assert sorted(listed) == sorted(expected.values_list("slug", flat=True))
    assert H100 not in listed
    assert len(listed) < Offering.objects.filter(enabled=True).count()
    assert groups(page) == sorted([a100.name, t4.name])
    label = option_label(page, WHOLE)
    assert label.startswith(f"{a100.name} · {catalog[WHOLE].size} · {catalog[WHOLE].backend.name}")


def test_offerings_no_pool_serves_are_marked_in_their_label(
    client_for, developer, admin_user, a100_tenant, catalog
) -> None:
    cluster_create(actor=admin_user, name="lab")
    whole = catalog[WHOLE]
    gpu_pool_create(
        actor=admin_user, cluster="lab", name="a100", gpu_model=whole.gpu_model,
        backend=whole.backend, node_count=1,
    )  # fmt: skip

    page = client_for(developer).get("/requests/new/").text

    assert "no pool serves this" not in option_label(page, WHOLE)
    assert option_label(page, MIG).endswith("— no pool serves this")
    assert re.search(rf'<option value="{MIG}"[^>]*data-unserved', page)


def test_the_preview_says_no_pool_serves_before_the_request(
    client_for, developer, admin_user, a100_tenant, catalog
) -> None:
    cluster_create(actor=admin_user, name="lab")
    whole = catalog[WHOLE]
    gpu_pool_create(
        actor=admin_user, cluster="lab", name="a100", gpu_model=whole.gpu_model,
        backend=whole.backend, node_count=1,
    )  # fmt: skip
    body = {"tenant": "vision", "offering": MIG, "count": 1, "duration_hours": ""}

    fragment = client_for(developer).get("/requests/preview/", body, HTTP_HX_REQUEST="true").text

    assert 'data-testid="unserved"' in fragment
    assert "No pool serves this offering" in fragment


def test_the_select_follows_the_tenant(
    client_for, developer, admin_user, a100_tenant, tenant_b, catalog
) -> None:
    membership_set(actor=None, tenant=tenant_b, user=developer, role=MemberRole.DEVELOPER)
    quota_set(actor=admin_user, tenant=tenant_b, gpu_model=catalog[H100].gpu_model, gpu_eq=4)
    client = client_for(developer)

    nlp = client.get("/requests/offerings/", {"tenant": "nlp", "offering": WHOLE})
    vision = client.get("/requests/offerings/", {"tenant": "vision", "offering": WHOLE})
    reloaded = client.get("/requests/new/", {"tenant": "nlp"}).text  # without JavaScript

    assert nlp.status_code == 200
    assert H100 in options(f'<select name="offering">{nlp.text}</select>')
    assert WHOLE not in nlp.text
    assert groups(nlp.text) == [catalog[H100].gpu_model.name]
    assert '"change"' in nlp["HX-Trigger-After-Swap"]
    assert f'<option value="{WHOLE}" selected' in vision.text  # still valid: kept
    assert H100 in options(reloaded)
    assert WHOLE not in options(reloaded)
    assert 'hx-get="/requests/offerings/"' in reloaded


def test_the_select_for_another_tenant_is_not_found(
    client_for, developer, outsider, a100_tenant, finance_user
) -> None:
    assert client_for(outsider).get("/requests/offerings/", {"tenant": "vision"}).status_code == 404
    assert client_for(developer).get("/requests/offerings/", {"tenant": "nlp"}).status_code == 404
    assert client_for(finance_user).get("/requests/offerings/").status_code == 404


def test_an_offering_outside_the_tenants_models_is_refused_on_the_field(
    client_for, developer, a100_tenant
) -> None:
    body = {"tenant": "vision", "offering": H100, "count": 1, "purpose": "notebook"}

    page = client_for(developer).post("/requests/new/", body)
    api = client_for(developer).post("/api/v1/requests/", body, content_type="application/json")

    assert page.status_code == 400
    assert "GPU and size: Tenant vision has no quota for NVIDIA H100" in page.text
    assert api.status_code == 400
    assert list(api.json()["error"]["fields"]) == ["offering"]
    assert "has no quota" in api.json()["error"]["fields"]["offering"][0]
    assert not GpuRequest.objects.exists()


def test_a_tenant_without_any_quota_says_so_in_the_select(
    client_for, developer, tenant_a, catalog
) -> None:
    page = client_for(developer).get("/requests/new/").text

    assert options(page) == []
    assert "vision has no quota for any GPU model" in page


def test_the_form_lists_offerings_in_bounded_queries(
    client_for, developer, a100_and_t4_tenant, django_assert_max_num_queries
) -> None:
    client = client_for(developer)
    with django_assert_max_num_queries(14):
        assert client.get("/requests/new/").status_code == 200
    with django_assert_max_num_queries(10):
        assert client.get("/requests/offerings/", {"tenant": "vision"}).status_code == 200
