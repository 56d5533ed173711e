import pytest
from django.test import Client

from tests.conftest import PASSWORD


def test_anonymous_visitors_are_sent_to_sign_in(client: Client, db) -> None:
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/"


def test_protected_pages_send_anonymous_visitors_to_sign_in(client: Client, db) -> None:
    response = client.get("/my/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/my/")


@pytest.mark.parametrize("persona", ["developer", "lead", "finance_user", "admin_user", "outsider"])
def test_each_persona_signs_in_and_lands_on_its_home(
    request: pytest.FixtureRequest, client: Client, persona: str
) -> None:
    user = request.getfixturevalue(persona)

    signed_in = client.post(
        "/accounts/login/", {"username": user.username, "password": PASSWORD}, follow=True
    )

    assert signed_in.redirect_chain[-1][0] == "/home/"
    assert signed_in.status_code == 200
    assert user.get_full_name() in signed_in.text


def test_wrong_password_is_refused_with_a_message(client: Client, developer) -> None:
    response = client.post("/accounts/login/", {"username": "dev", "password": "nope"})

    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.text
    assert "_auth_user_id" not in client.session


def test_sign_out_ends_the_session(client: Client, developer) -> None:
    client.force_login(developer)

    response = client.post("/accounts/logout/")

    assert response.status_code == 302
    assert client.get("/my/").status_code == 302


@pytest.mark.parametrize(
    ("persona", "forbidden_pages"),
    [
        ("developer", ["/team/", "/finance/", "/manage/tenants/"]),
        ("outsider", ["/team/", "/finance/", "/manage/tenants/"]),
        ("lead", ["/finance/", "/manage/tenants/"]),
        ("finance_user", ["/team/", "/manage/tenants/"]),
    ],
)
def test_pages_of_other_personas_answer_not_found(
    request: pytest.FixtureRequest, client_for, persona: str, forbidden_pages: list[str]
) -> None:
    client = client_for(request.getfixturevalue(persona))

    for page in forbidden_pages:
        response = client.get(page)
        assert response.status_code == 404, page
        assert "Not found" in response.text


def test_the_lead_sees_only_their_own_tenants_members(
    client_for, lead, developer, outsider
) -> None:
    response = client_for(lead).get("/team/")

    assert response.status_code == 200
    assert developer.get_full_name() in response.text
    assert "2 members" in response.text
    assert outsider.get_full_name() not in response.text


def test_the_admin_sees_every_tenant(client_for, admin_user, tenant_a, tenant_b) -> None:
    response = client_for(admin_user).get("/manage/tenants/")

    assert response.status_code == 200
    assert tenant_a.name in response.text
    assert tenant_b.name in response.text


def test_admins_may_use_the_django_admin_and_others_may_not(
    client_for, admin_user, developer
) -> None:
    assert client_for(admin_user).get("/django-admin/").status_code == 200
    assert client_for(developer).get("/django-admin/").status_code == 302


def test_unknown_pages_render_the_error_design(client: Client, db) -> None:
    response = client.get("/no-such-page/")

    assert response.status_code == 404
    assert "There is nothing here" in response.text
