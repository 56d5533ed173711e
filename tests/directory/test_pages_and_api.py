"""The directory sync page and API: admins only (404 for everyone else), failed changes with
Retry, reports, Reconcile now, and bounded queries."""

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from portal.accounts.services import user_create
from portal.directory.models import DirectoryChange
from portal.directory.services import directory_member_queue, directory_reconcile
from tenants.services import tenant_create
from tests.directory.support import send

NOT_ADMINS = ("developer", "lead", "outsider", "finance_user")


@pytest.fixture
def failed_change(portal_decides, db) -> DirectoryChange:
    """rhea, unknown to Keycloak, made a lead: the change has failed."""
    directory_member_queue(tenant_slug="vision", username="rhea", role="lead", actor=None)
    send()
    return DirectoryChange.objects.get(state="failed")


def requests_of(change_pk: int) -> list[tuple[str, str]]:
    return [
        ("get", reverse("directory:status")),
        ("post", reverse("directory:retry", args=[change_pk])),
        ("post", reverse("directory:reconcile")),
        ("get", reverse("api:directory-changes")),
        ("post", reverse("api:directory-change-retry", args=[change_pk])),
        ("get", reverse("api:directory-reports")),
        ("post", reverse("api:directory-reconcile")),
    ]


@pytest.mark.parametrize("persona", NOT_ADMINS)
def test_nobody_but_admins_finds_the_pages_or_the_api(request, persona, client_for, failed_change):
    client = client_for(request.getfixturevalue(persona))
    for method, url in requests_of(failed_change.pk):
        response = getattr(client, method)(url)
        assert response.status_code == 404, (method, url)
    failed_change.refresh_from_db()
    assert failed_change.state == "failed"


def test_anonymous_is_sent_to_sign_in_or_answered_401(failed_change):
    client = Client()
    for method, url in requests_of(failed_change.pk):
        response = getattr(client, method)(url)
        expected = 401 if url.startswith("/api/") else 302
        assert response.status_code == expected, (method, url)


def test_the_page_says_how_to_turn_the_sync_on_when_it_is_off(client_for, admin_user):
    with override_settings(KEYCLOAK_SYNC=False):
        response = client_for(admin_user).get(reverse("directory:status"))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-testid="sync-off"' in html
    for variable in ("KEYCLOAK_ADMIN_CLIENT_ID", "KEYCLOAK_ADMIN_CLIENT_SECRET", "OIDC_ISSUER_URL"):
        assert variable in html
    assert "Reconcile now" not in html


def test_an_admin_sees_a_failed_change_and_retries_it_on_the_page(
    failed_change, client_for, admin_user
):
    client = client_for(admin_user)
    page = client.get(reverse("directory:status"))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="sync-state">on' in html
    row = html.split(f'data-testid="change-{failed_change.pk}"')[1].split("</tr>")[0]
    assert "failed" in row
    assert "rhea does not exist in Keycloak" in row
    assert reverse("directory:retry", args=[failed_change.pk]) in row
    assert 'data-testid="count-failed">1<' in html
    assert "the portal: its changes are sent to Keycloak" in html

    response = client.post(reverse("directory:retry", args=[failed_change.pk]))
    assert response.status_code == 302
    failed_change.refresh_from_db()
    assert failed_change.state == "pending"
    # Only failed changes are retried: a second retry is a conflict.
    assert client.post(reverse("directory:retry", args=[failed_change.pk])).status_code == 409


def test_the_api_lists_changes_by_state_and_retries_a_failed_one(
    failed_change, client_for, admin_user, portal_decides
):
    client = client_for(admin_user)
    url = reverse("api:directory-changes")
    listed = client.get(url, {"state": "failed"}).json()
    assert listed["count"] == 1
    assert listed["results"][0] | {"created_at": None} == {
        "id": failed_change.pk, "kind": "member", "tenant": "vision", "username": "rhea",
        "role": "lead", "state": "failed", "attempts": 1,
        "last_error": failed_change.last_error, "actor": None, "created_at": None,
        "sent_at": None,
    }  # fmt: skip
    assert client.get(url, {"state": "pending"}).json()["count"] == 0
    refused = client.get(url, {"state": "lost"})
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"state": ["Unknown state."]}

    portal_decides.add_user("rhea")
    retry = reverse("api:directory-change-retry", args=[failed_change.pk])
    response = client.post(retry)
    assert response.status_code == 202
    assert response.json()["state"] == "pending"
    conflict = client.post(retry)
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "invalid_transition"
    send()
    assert client.get(url, {"state": "sent"}).json()["results"][0]["username"] == "rhea"


def test_retrying_a_change_that_does_not_exist_is_404(client_for, admin_user):
    response = client_for(admin_user).post(reverse("api:directory-change-retry", args=[999]))
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_reports_are_listed_with_their_differences(portal_decides, client_for, admin_user, db):
    portal_decides.add_to_group("/gpu-portal/tenants/vision/leads", "eve")
    tenant_create(actor=None, slug="vision", name="Vision")
    report = directory_reconcile()
    assert report.changes_queued == 1
    client = client_for(admin_user)
    body = client.get(reverse("api:directory-reports")).json()
    assert body["results"][0]["id"] == report.pk
    assert body["results"][0]["differences"] == [
        {"tenant": "vision", "role": "lead", "username": "eve", "where": "keycloak"}
    ]
    html = client.get(reverse("directory:status")).content.decode()
    assert f'data-testid="report-{report.pk}"' in html
    assert "eve" in html


def test_reconcile_now_is_queued_for_admins_and_refused_while_the_sync_is_off(
    client_for, admin_user, keycloak_api
):
    client = client_for(admin_user)
    page = client.post(reverse("directory:reconcile"))
    assert page.status_code == 302
    assert page.url.startswith(reverse("directory:status") + "?reconcile=")
    api = client.post(reverse("api:directory-reconcile"))
    assert api.status_code == 202
    assert api.json()["queued"] is True
    with override_settings(KEYCLOAK_SYNC=False):
        off = client.post(reverse("api:directory-reconcile"))
        assert client.post(reverse("directory:reconcile")).status_code == 409
    assert off.status_code == 409
    assert "KEYCLOAK_ADMIN_CLIENT_ID" in off.json()["error"]["message"]


def test_the_page_polls_while_changes_are_pending_and_stops_with_286(
    portal_decides, client_for, admin_user
):
    directory_member_queue(tenant_slug="vision", username="rhea", role="lead", actor=None)
    client = client_for(admin_user)
    html = client.get(reverse("directory:status")).content.decode()
    assert 'hx-trigger="every 3s"' in html
    assert client.get(reverse("directory:status"), {"reconcile": "9" * 30}).status_code == 200
    polled = client.get(reverse("directory:status"), HTTP_HX_REQUEST="true")
    assert polled.status_code == 200
    assert 'id="sync-state"' in polled.content.decode()
    portal_decides.add_user("rhea")
    send()
    done = client.get(reverse("directory:status"), HTTP_HX_REQUEST="true")
    assert done.status_code == 286
    assert 'data-testid="count-sent">1<' in done.content.decode()


def test_pages_and_lists_take_a_bounded_number_of_queries(
    portal_decides, client_for, admin_user, django_assert_max_num_queries
):
    # 30 changes by an admin: half to users Keycloak knows (sent), half failed; then pending.
    for index in range(30):
        name = f"user{index:02}"
        if index % 2:
            portal_decides.add_user(name)
        user_create(actor=None, username=name)
        directory_member_queue(tenant_slug="vision", username=name, role="lead", actor=admin_user)
    send()
    portal_decides.outage = True
    for index in range(30):
        directory_member_queue(
            tenant_slug="vision", username=f"user{index:02}", role="", actor=admin_user
        )
    send()
    directory_reconcile()
    assert DirectoryChange.objects.filter(state="failed").count() == 15
    client = client_for(admin_user)
    # The page adds the navigation's pending approvals and extensions count (2 queries).
    for url, bound in (
        (reverse("directory:status"), 8),
        (reverse("api:directory-changes"), 6),
        (reverse("api:directory-reports"), 6),
    ):
        with django_assert_max_num_queries(bound):
            assert client.get(url).status_code == 200
