"""Notebook pages and the notebooks/ API: the same services behind both, errors on the named
field, 404 for whoever may not see a notebook, 409 for actions its state does not allow, and a
bounded number of queries whatever the number of notebooks."""

from typing import Any

import pytest

from portal.allocations.models import RequestState
from portal.cluster.models import RunKind
from portal.core.models import AuditEvent
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.serializers import NotebookSerializer
from tests.cluster.fixtures import run_queued
from tests.workloads.conftest import allocation_of, launch


def launch_form(**overrides: Any) -> dict[str, Any]:
    base = {
        "allocation": "",
        "tenant": "",
        "offering": "",
        "count": "",
        "duration_hours": "",
        "justification": "",
        "image": "pytorch-cuda12",
        "name": "",
        "cpu_cores": "2",
        "memory_gib": "8",
        "workspace_gib": "10",
    }
    return base | overrides


# Pages


def test_a_developer_launches_on_an_allocation_and_sees_it_running(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-mig-1g-10gb"])
    client = client_for(developer)
    response = client.post(
        "/notebooks/new/", launch_form(allocation=str(allocation.pk), name="thesis"), follow=True
    )
    notebook = Notebook.objects.get()
    assert response.redirect_chain[-1][0] == f"/notebooks/{notebook.pk}/"
    assert "is launching" in response.text
    run_queued(gpu_tenant)
    page = client.get(f"/notebooks/{notebook.pk}/")
    assert 'data-testid="notebook-state">running' in page.text
    host = f"{notebook.kubernetes_name}.vision.nb.example.org"
    assert f"https://{host}/lab?token={notebook.token}" in page.text  # the owner's link
    listing = client.get("/notebooks/")
    assert "thesis" in listing.text
    assert "NVIDIA A100-SXM4-80GB, MIG 1g.10gb" in listing.text


def test_the_lead_sees_the_tenants_notebook_without_its_token_and_may_stop_it(
    client_for, developer, lead, gpu_tenant, catalog, dry_cluster
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    client = client_for(lead)
    page = client.get(f"/notebooks/{notebook.pk}/")
    assert page.status_code == 200
    assert notebook.token not in page.text
    assert "the owner opens it with their token" in page.text
    asked = client.post(f"/notebooks/{notebook.pk}/stop/")
    assert asked.status_code == 200
    assert f"Stop notebook {notebook.name}?" in asked.text
    assert Notebook.objects.get().desired == Desired.RUNNING
    response = client.post(f"/notebooks/{notebook.pk}/stop/", {"confirmed": "yes"})
    again = client.post(f"/notebooks/{notebook.pk}/stop/", {"confirmed": "yes"})
    assert (response.status_code, again.status_code) == (302, 302)
    assert Notebook.objects.get().desired == Desired.STOPPED
    assert AuditEvent.objects.filter(action="notebook.stop").count() == 1
    assert AuditEvent.objects.filter(action="notebook.stop", actor=lead).exists()


def test_the_state_fragment_polls_while_moving_and_stops_with_286(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    client = client_for(developer)
    moving = client.get(f"/notebooks/{notebook.pk}/", headers={"HX-Request": "true"})
    assert moving.status_code == 200
    assert "every 2s" in moving.text
    assert client.get("/notebooks/", headers={"HX-Request": "true"}).status_code == 200
    run_queued(gpu_tenant)
    settled = client.get(f"/notebooks/{notebook.pk}/", headers={"HX-Request": "true"})
    assert settled.status_code == 286
    assert "every 2s" not in settled.text
    assert client.get("/notebooks/", headers={"HX-Request": "true"}).status_code == 286


@pytest.mark.parametrize(
    ("overrides", "shown", "status"),
    [
        ({"image": "no-such-image"}, "Select a valid choice", 400),
        ({"cpu_cores": "64"}, "At most 16 cores per notebook here.", 400),
        ({"memory_gib": "100000"}, "Between 1 and 128 GiB here.", 400),
        ({"allocation": ""}, "Pick an allocation, or an offering to request.", 400),
        ({"allocation": "", "offering": "a100-80gb-whole", "tenant": ""}, "Pick the tenant", 400),
    ],
)
def test_bad_launch_input_is_shown_on_the_field(
    client_for, developer, gpu_tenant, catalog, dry_cluster, overrides, shown, status
):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    data = launch_form(allocation=str(allocation.pk)) | overrides
    response = client_for(developer).post("/notebooks/new/", data)
    assert response.status_code == status
    assert shown in response.text
    assert not Notebook.objects.exists()


def test_another_users_allocation_cannot_be_launched_on(
    client_for, developer, lead, gpu_tenant, catalog, dry_cluster
):
    leads = allocation_of(lead, gpu_tenant, catalog["a100-80gb-whole"])
    response = client_for(developer).post("/notebooks/new/", launch_form(allocation=str(leads.pk)))
    # Not among the developer's choices: the form refuses it as an unknown choice.
    assert response.status_code == 400
    assert not Notebook.objects.exists()
    preview = client_for(developer).get(f"/notebooks/new/preview/?allocation={leads.pk}")
    assert f"allocation #{leads.pk}" not in preview.text


def test_request_and_launch_in_one_form_waits_for_the_lead(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    data = launch_form(tenant="vision", offering="a100-80gb-whole", count="4")
    response = client_for(developer).post("/notebooks/new/", data, follow=True)
    notebook = Notebook.objects.get()
    assert notebook.allocation.state == RequestState.PENDING
    assert 'data-testid="notebook-state">waiting for approval' in response.text
    preview = client_for(developer).get(
        "/notebooks/new/preview/?tenant=vision&offering=a100-80gb-whole&count=4"
    )
    assert "Needs a lead" in preview.text


def test_delete_asks_about_the_workspace_first(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    run_queued(gpu_tenant)
    client = client_for(developer)
    assert "Keep the workspace volume" in client.get(f"/notebooks/{notebook.pk}/delete/").text
    refused = client.post(f"/notebooks/{notebook.pk}/delete/", {})
    assert refused.status_code == 400
    assert "keep_workspace: Say whether to keep the workspace." in refused.text
    assert Notebook.objects.get().desired == Desired.RUNNING
    client.post(f"/notebooks/{notebook.pk}/delete/", {"keep_workspace": "no"})
    notebook = Notebook.objects.get()
    assert (notebook.desired, notebook.keep_workspace) == (Desired.DELETED, False)
    assert notebook.state == NotebookState.DELETING


def test_outsiders_and_finance_get_404_everywhere(
    client_for, developer, outsider, finance_user, gpu_tenant, catalog, dry_cluster
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    for user in (outsider, finance_user):
        client = client_for(user)
        assert client.get(f"/notebooks/{notebook.pk}/").status_code == 404
        assert client.get(f"/notebooks/{notebook.pk}/delete/").status_code == 404
        assert client.post(f"/notebooks/{notebook.pk}/stop/").status_code == 404
        assert notebook.name not in client.get("/notebooks/").text
        assert client.get(f"/api/v1/notebooks/{notebook.pk}/").status_code == 404
        assert client.delete(f"/api/v1/notebooks/{notebook.pk}/").status_code == 404
        assert client.get("/api/v1/notebooks/").json()["count"] == 0
    assert Notebook.objects.get().desired == Desired.RUNNING


def test_the_list_runs_a_bounded_number_of_queries(
    client_for, developer, gpu_tenant, catalog, dry_cluster, django_assert_max_num_queries
):
    for _ in range(12):
        launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-mig-1g-10gb"]))
    client = client_for(developer)
    with django_assert_max_num_queries(12):
        assert client.get("/notebooks/").status_code == 200
    with django_assert_max_num_queries(12):
        assert client.get("/api/v1/notebooks/").json()["count"] == 12


# API


def test_the_api_list_s_rows_are_the_serializer_s_from_joined_rows(
    client_for, developer, lead, gpu_tenant, catalog, dry_cluster
):
    """The list reads the tenant's slug and the owner's name as values (`names_listed`): the
    same JSON as `NotebookSerializer` writes from joined rows, for the owner and their lead."""
    for offering in ("a100-80gb-whole", "a100-80gb-mig-1g-10gb"):
        launch(developer, allocation_of(developer, gpu_tenant, catalog[offering]))
    joined = Notebook.objects.select_related("tenant", "owner", "allocation__offering__gpu_model")
    expected = NotebookSerializer(joined.order_by("-created_at", "-id"), many=True).data

    for user in (developer, lead):
        listed = client_for(user).get("/api/v1/notebooks/").json()["results"]
        assert listed == expected
        assert {row["owner"] for row in listed} == {developer.username}
        assert {row["tenant"] for row in listed} == {gpu_tenant.slug}


def test_the_api_launches_on_an_allocation_and_answers_201(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    client = client_for(developer)
    response = client.post(
        "/api/v1/notebooks/",
        {"allocation": allocation.pk, "image": "pytorch-cuda12", "cpu_cores": "2"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "pending"
    assert body["offering"] == "a100-80gb-whole"
    assert body["cpu_cores"] == "2.000"
    assert body["token"] == Notebook.objects.get().token
    assert body["provisioning_runs"][0]["kind"] == RunKind.NOTEBOOK


def test_the_api_names_the_field_of_bad_input(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    response = client_for(developer).post(
        "/api/v1/notebooks/",
        {"allocation": allocation.pk, "image": "no-such-image"},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["image"] == [
        "'no-such-image' is not on the list of notebook images."
    ]


def test_the_api_answers_404_for_another_users_allocation(
    client_for, developer, lead, gpu_tenant, catalog, dry_cluster
):
    leads = allocation_of(lead, gpu_tenant, catalog["a100-80gb-whole"])
    response = client_for(developer).post(
        "/api/v1/notebooks/",
        {"allocation": leads.pk, "image": "pytorch-cuda12"},
        content_type="application/json",
    )
    assert response.status_code == 404
    assert not Notebook.objects.exists()


def test_a_retried_launch_with_the_same_key_makes_one_notebook(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    client = client_for(developer)
    payload = {"tenant": "vision", "offering": "a100-80gb-whole", "image": "pytorch-cuda12"}
    first = client.post(
        "/api/v1/notebooks/",
        payload,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="launch-1",
    )
    again = client.post(
        "/api/v1/notebooks/",
        payload,
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="launch-1",
    )
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert Notebook.objects.count() == 1


def test_api_actions_answer_409_when_the_state_does_not_allow_them(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    client = client_for(developer)
    assert client.post(f"/api/v1/notebooks/{notebook.pk}/start").status_code == 409
    stopped = client.post(f"/api/v1/notebooks/{notebook.pk}/stop")
    assert stopped.status_code == 200
    assert stopped.json()["desired"] == "stopped"
    conflict = client.post(f"/api/v1/notebooks/{notebook.pk}/stop")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "invalid_transition"
    run_queued(gpu_tenant)
    assert client.post(f"/api/v1/notebooks/{notebook.pk}/start").status_code == 200


def test_api_delete_keeps_the_workspace_unless_told(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    client = client_for(developer)
    bad = client.delete(f"/api/v1/notebooks/{notebook.pk}/?keep_workspace=maybe")
    assert bad.status_code == 400
    assert "keep_workspace" in bad.json()["error"]["fields"]
    gone = client.delete(f"/api/v1/notebooks/{notebook.pk}/?keep_workspace=false")
    assert gone.status_code == 202
    assert gone.json()["keep_workspace"] is False
    assert client.delete(f"/api/v1/notebooks/{notebook.pk}/").status_code == 409


def test_the_api_shows_the_token_to_the_owner_only(
    client_for, developer, lead, gpu_tenant, catalog, dry_cluster
):
    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    assert client_for(developer).get(f"/api/v1/notebooks/{notebook.pk}/").json()["token"]
    assert client_for(lead).get(f"/api/v1/notebooks/{notebook.pk}/").json()["token"] is None


def test_my_requests_links_an_allocation_to_the_launch_form_with_it_chosen(
    client_for, developer, gpu_tenant, catalog, dry_cluster
):
    allocation = allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"])
    client = client_for(developer)
    link = f"/notebooks/new/?allocation={allocation.pk}"
    assert link in client.get("/requests/").text
    form = client.get(link).text
    assert f'<option value="{allocation.pk}" selected>' in form
