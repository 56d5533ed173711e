"""Personal API tokens: issued on the page or through `tokens/`, shown once, stored as a digest,
working on the API as their owner until revoked or expired (then 401), each owner's alone
(404 for anyone else), and a bounded number of queries whatever the number of tokens."""

import hashlib
import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.accounts.models import ApiToken, User
from portal.accounts.tokens import MAX_ACTIVE_TOKENS, IssuedToken, api_token_create
from portal.core.models import AuditEvent

CHALLENGE = 'Bearer realm="api"'
TOKEN_IN_PAGE = re.compile(r'value="(gpp_[A-Za-z0-9_-]{43})"')


def issue(user: User, name: str = "ci", **kwargs: Any) -> IssuedToken:
    return api_token_create(actor=user, name=name, **kwargs)


def with_token(text: str, **client_kwargs: Any) -> Client:
    """A client with no session that sends `text` as its bearer token."""
    return Client(HTTP_AUTHORIZATION=f"Bearer {text}", **client_kwargs)


def post_json(client: Client, url: str, body: dict[str, Any], **extra: Any) -> Any:
    return client.post(url, body, content_type="application/json", **extra)


def rows_containing(text: str) -> dict[str, int]:
    """Every table of the database, with the number of its rows whose text holds `text`."""
    found = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            # the table names come from the database itself, not from input
            query = f"SELECT count(*) FROM {connection.ops.quote_name(table)} t"  # noqa: S608
            cursor.execute(f"{query} WHERE strpos(t::text, %s) > 0", [text])
            (count,) = cursor.fetchone()
            if count:
                found[table] = count
    return found


# Using a token on the API


def test_a_token_created_through_the_api_works_on_the_api_without_a_session(
    client_for, developer
) -> None:
    created = post_json(
        client_for(developer), "/api/v1/tokens/", {"name": "ci", "expires_in_days": 30}
    )

    assert created.status_code == 201
    body = created.json()
    assert body["token"].startswith("gpp_")
    assert body["prefix"] == body["token"][:12]
    assert (body["name"], body["state"], body["last_used_at"]) == ("ci", "active", None)
    token = ApiToken.objects.get()
    assert abs(token.expires_at - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    me = with_token(body["token"]).get("/api/v1/me")
    assert me.status_code == 200
    assert me.json()["username"] == "dev"


def test_a_token_created_on_the_page_works_on_the_api_and_is_shown_only_once(
    client_for, developer
) -> None:
    client = client_for(developer)

    created = client.post("/account/tokens/", {"name": "laptop", "expires_in_days": "7"})

    assert created.status_code == 200
    assert "Copy it now, it will not be shown again" in created.text
    assert "no-store" in created["Cache-Control"]
    text = TOKEN_IN_PAGE.search(created.text)[1]  # type: ignore[index]
    assert with_token(text).get("/api/v1/me").json()["username"] == "dev"
    reloaded = client.get("/account/tokens/")
    assert text not in reloaded.text
    assert "it will not be shown again" not in reloaded.text
    assert f"{text[:12]}…" in reloaded.text  # the display prefix stays
    assert "laptop" in reloaded.text


def test_only_the_digest_and_a_display_prefix_are_stored(client_for, developer) -> None:
    issued = issue(developer)
    # also through the API with an Idempotency-Key, whose record keeps the answer
    answer = post_json(
        client_for(developer), "/api/v1/tokens/", {"name": "cli"}, HTTP_IDEMPOTENCY_KEY="k-1"
    ).json()

    for text in (issued.text, answer["token"]):
        token = ApiToken.objects.get(prefix=text[:12])
        assert token.digest == hashlib.sha256(text.encode()).hexdigest()
        assert rows_containing(text) == {}
        assert rows_containing(token.digest) == {"accounts_apitoken": 1}


def test_a_retried_create_with_the_same_key_issues_one_token_and_never_replays_its_text(
    client_for, developer
) -> None:
    client = client_for(developer)
    body = {"name": "ci", "expires_in_days": 30}

    first = post_json(client, "/api/v1/tokens/", body, HTTP_IDEMPOTENCY_KEY="create-ci")
    retry = post_json(client, "/api/v1/tokens/", body, HTTP_IDEMPOTENCY_KEY="create-ci")

    assert first.status_code == retry.status_code == 201
    assert ApiToken.objects.count() == 1
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json()["id"] == first.json()["id"]
    assert first.json()["token"].startswith("gpp_")
    assert retry.json()["token"] is None


def test_a_revoked_token_answers_401_saying_so(client_for, developer) -> None:
    issued = issue(developer)
    assert with_token(issued.text).get("/api/v1/me").status_code == 200

    revoked = client_for(developer).delete(f"/api/v1/tokens/{issued.token.pk}/")
    response = with_token(issued.text).get("/api/v1/me")

    assert revoked.status_code == 204
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == CHALLENGE
    assert response.json()["error"] == {
        "code": "authentication_failed",
        "message": "This API token was revoked.",
        "fields": {},
    }


def test_an_expired_token_answers_401_saying_so(developer) -> None:
    issued = issue(developer, expires_in_days=1)
    ApiToken.objects.filter(pk=issued.token.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    response = with_token(issued.text).get("/api/v1/me")

    assert response.status_code == 401
    assert response.json()["error"]["message"] == "This API token expired."
    assert response.headers["WWW-Authenticate"] == CHALLENGE


def test_an_inactive_users_token_answers_401(developer) -> None:
    issued = issue(developer)
    User.objects.filter(pk=developer.pk).update(is_active=False)

    response = with_token(issued.text).get("/api/v1/me")

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == CHALLENGE


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        ("Bearer gpp_" + "x" * 43, "authentication_failed"),  # the shape of ours, but unknown
        ("Bearer", "authentication_failed"),  # no token
        ("Bearer gpp_one gpp_two", "authentication_failed"),  # two
        ("bearer not-a-token-anyone-issued", "authentication_failed"),  # the provider refuses it
        ("Basic ZGV2OnBhc3N3b3Jk", "not_authenticated"),  # not a scheme the API takes
    ],
)
def test_unknown_or_malformed_tokens_answer_401_with_the_challenge(
    developer, authorization: str, code: str
) -> None:
    issue(developer)

    response = Client(HTTP_AUTHORIZATION=authorization).get("/api/v1/me")

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == CHALLENGE
    assert response.json()["error"]["code"] == code


def test_an_unknown_token_is_told_apart_from_a_revoked_one_by_its_message_only(developer) -> None:
    response = with_token("gpp_" + "y" * 43).get("/api/v1/me")

    assert response.json()["error"]["message"] == "Unknown or invalid token."


def test_last_used_is_recorded_at_most_once_a_minute(developer) -> None:
    issued = issue(developer)
    client = with_token(issued.text)
    assert ApiToken.objects.get().last_used_at is None

    client.get("/api/v1/me")
    first_use = ApiToken.objects.get().last_used_at
    client.get("/api/v1/me")
    soon_after = ApiToken.objects.get().last_used_at
    a_while_ago = timezone.now() - timedelta(minutes=2)
    ApiToken.objects.update(last_used_at=a_while_ago)
    client.get("/api/v1/me")
    later = ApiToken.objects.get().last_used_at

    assert first_use is not None
    assert soon_after == first_use  # within the minute: not written again
    assert later is not None
    assert later > a_while_ago + timedelta(minutes=1)


def test_a_recent_use_costs_no_write(developer) -> None:
    issued = issue(developer)
    client = with_token(issued.text)
    client.get("/api/v1/me")  # records the use

    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/me").status_code == 200

    assert [query["sql"] for query in queries if "UPDATE" in query["sql"]] == []


def test_a_bearer_post_needs_no_csrf_token_but_a_session_post_does(developer, admin_user) -> None:
    issued = issue(developer)
    session = Client(enforce_csrf_checks=True)
    session.force_login(admin_user)

    with_bearer = post_json(
        with_token(issued.text, enforce_csrf_checks=True), "/api/v1/requests/", {}
    )
    with_session = post_json(session, "/api/v1/requests/", {})

    assert with_bearer.status_code == 400  # the body is checked: no CSRF token was asked for
    assert "tenant" in with_bearer.json()["error"]["fields"]
    assert with_session.status_code == 403


def test_a_personal_token_cannot_mint_more_tokens(developer) -> None:
    issued = issue(developer)

    response = post_json(with_token(issued.text), "/api/v1/tokens/", {"name": "more"})

    assert response.status_code == 403
    assert "cannot create tokens" in response.json()["error"]["message"]
    assert not ApiToken.objects.filter(name="more").exists()


def test_tokens_do_not_sign_in_to_the_pages(developer) -> None:
    issued = issue(developer)

    response = with_token(issued.text).get("/account/tokens/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


# The tokens/ API: each owner's own


def test_the_list_shows_only_the_callers_tokens_without_their_secrets(
    client_for, developer, outsider, admin_user
) -> None:
    mine = issue(developer, "mine")
    theirs = issue(outsider, "theirs")

    listed = client_for(developer).get("/api/v1/tokens/").json()
    admin_listed = client_for(admin_user).get("/api/v1/tokens/").json()

    assert [token["name"] for token in listed["results"]] == ["mine"]
    assert "token" not in listed["results"][0]
    assert mine.text not in json.dumps(listed)
    assert theirs.text not in json.dumps(listed)
    assert admin_listed["results"] == []  # not even admins see others' tokens


@pytest.mark.parametrize("persona", ["lead", "outsider", "admin_user"])
def test_someone_elses_token_is_404_to_read_and_to_revoke(
    request: pytest.FixtureRequest, client_for, developer, persona: str
) -> None:
    issued = issue(developer)
    client = client_for(request.getfixturevalue(persona))

    read = client.get(f"/api/v1/tokens/{issued.token.pk}/")
    revoke = client.delete(f"/api/v1/tokens/{issued.token.pk}/")

    assert (read.status_code, revoke.status_code) == (404, 404)
    assert ApiToken.objects.get().revoked_at is None
    assert with_token(issued.text).get("/api/v1/me").status_code == 200


def test_the_owner_reads_one_token_and_revoking_twice_is_409(client_for, developer) -> None:
    issued = issue(developer, "deploy")
    client = client_for(developer)

    read = client.get(f"/api/v1/tokens/{issued.token.pk}/")
    first = client.delete(f"/api/v1/tokens/{issued.token.pk}/")
    second = client.delete(f"/api/v1/tokens/{issued.token.pk}/")
    after = client.get(f"/api/v1/tokens/{issued.token.pk}/")

    assert read.status_code == 200
    assert read.json()["state"] == "active"
    assert "token" not in read.json()
    assert first.status_code == 204
    assert second.status_code == 409
    assert second.json()["error"]["code"] == "invalid_transition"
    assert after.json()["state"] == "revoked"
    assert after.json()["revoked_at"] is not None


def test_an_expired_token_is_listed_as_expired(client_for, developer) -> None:
    issued = issue(developer)
    ApiToken.objects.update(expires_at=timezone.now() - timedelta(days=1))

    body = client_for(developer).get(f"/api/v1/tokens/{issued.token.pk}/").json()

    assert body["state"] == "expired"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "ci", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "ci", "expires_in_days": 366}, "expires_in_days"),
        ({"name": "ci", "expires_in_days": "soon"}, "expires_in_days"),
    ],
)
def test_bad_input_is_400_naming_the_field(
    client_for, developer, body: dict[str, Any], field: str
) -> None:
    response = post_json(client_for(developer), "/api/v1/tokens/", body)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert list(response.json()["error"]["fields"]) == [field]
    assert not ApiToken.objects.exists()


def test_the_longest_lifetime_follows_the_setting(client_for, developer, settings) -> None:
    settings.PORTAL_API_TOKEN_MAX_DAYS = 30
    client = client_for(developer)

    too_long = post_json(client, "/api/v1/tokens/", {"name": "ci", "expires_in_days": 31})
    longest = post_json(client, "/api/v1/tokens/", {"name": "ci", "expires_in_days": 30})
    default = post_json(client, "/api/v1/tokens/", {"name": "cd"})
    form = client.get("/account/tokens/").text

    assert too_long.status_code == 400
    assert too_long.json()["error"]["fields"] == {"expires_in_days": ["Between 1 and 30 days."]}
    assert longest.status_code == default.status_code == 201
    created = ApiToken.objects.get(name="cd").created_at
    assert ApiToken.objects.get(name="cd").expires_at - created < timedelta(days=30, minutes=1)
    assert '<option value="30" selected>30 days</option>' in form
    assert '<option value="90"' not in form


def test_at_most_twenty_active_tokens_and_revoked_or_expired_ones_do_not_count(
    client_for, developer
) -> None:
    for number in range(MAX_ACTIVE_TOKENS):
        issue(developer, f"token {number}")
    client = client_for(developer)

    refused = post_json(client, "/api/v1/tokens/", {"name": "one more"})
    ApiToken.objects.filter(name="token 0").update(revoked_at=timezone.now())
    ApiToken.objects.filter(name="token 1").update(expires_at=timezone.now())
    accepted = [post_json(client, "/api/v1/tokens/", {"name": f"new {n}"}) for n in range(3)]

    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "conflict"
    assert "20 active API tokens" in refused.json()["error"]["message"]
    assert [response.status_code for response in accepted] == [201, 201, 409]


def test_creating_and_revoking_are_audited_without_the_secret(client_for, developer) -> None:
    client = client_for(developer)
    created = post_json(client, "/api/v1/tokens/", {"name": "ci"}).json()
    client.delete(f"/api/v1/tokens/{created['id']}/")

    events = AuditEvent.objects.filter(action__startswith="api_token.").order_by("at", "id")

    assert [(event.action, event.actor) for event in events] == [
        ("api_token.create", developer),
        ("api_token.revoke", developer),
    ]
    assert events[0].target_id == str(created["id"])
    assert events[0].changes["name"] == [None, "ci"]
    for event in events:
        stored = json.dumps([event.changes, event.target_name, event.comment])
        assert created["token"] not in stored
        assert created["token"][12:] not in stored


def test_anonymous_callers_get_401_and_the_sign_in_page(client: Client, db) -> None:
    assert client.get("/api/v1/tokens/").status_code == 401
    assert client.post("/api/v1/tokens/", {"name": "x"}).status_code == 401
    page = client.get("/account/tokens/")
    assert page.status_code == 302
    assert page["Location"].startswith("/accounts/login/?next=/account/tokens/")


# The API tokens page


def test_the_page_lists_the_users_tokens_with_their_state(client_for, developer, outsider) -> None:
    active = issue(developer, "active one")
    revoked = issue(developer, "revoked one")
    expired = issue(developer, "expired one")
    issue(outsider, "outsiders")
    ApiToken.objects.filter(pk=revoked.token.pk).update(revoked_at=timezone.now())
    ApiToken.objects.filter(pk=expired.token.pk).update(expires_at=timezone.now())

    page = client_for(developer).get("/account/tokens/")

    assert page.status_code == 200
    assert "outsiders" not in page.text
    for issued, state in ((active, "active"), (revoked, "revoked"), (expired, "expired")):
        row = re.search(rf'data-testid="token-{issued.token.pk}">(.*?)</tr>', page.text, re.S)
        assert row is not None
        assert f'data-testid="token-state">{state}<' in row[1]
        assert issued.token.prefix in row[1]
        assert ("Revoke" in row[1]) == (state == "active")


def test_the_page_refuses_a_token_without_a_name_on_the_field(client_for, developer) -> None:
    response = client_for(developer).post("/account/tokens/", {"name": "", "expires_in_days": "30"})

    assert response.status_code == 400
    assert "Name: This field is required." in response.text
    assert not ApiToken.objects.exists()


def test_the_page_shows_the_limit_as_a_conflict(client_for, developer) -> None:
    for number in range(MAX_ACTIVE_TOKENS):
        issue(developer, f"token {number}")

    response = client_for(developer).post("/account/tokens/", {"name": "x", "expires_in_days": "7"})

    assert response.status_code == 409
    assert "20 active API tokens" in response.text
    assert not TOKEN_IN_PAGE.search(response.text)


def test_the_page_asks_then_revokes_and_the_token_stops_working(client_for, developer) -> None:
    issued = issue(developer, "old laptop")
    client = client_for(developer)

    asked = client.get(f"/account/tokens/{issued.token.pk}/revoke/")
    posted = client.post(f"/account/tokens/{issued.token.pk}/revoke/")
    assert ApiToken.objects.get().revoked_at is None
    revoked = client.post(
        f"/account/tokens/{issued.token.pk}/revoke/", {"confirmed": "yes"}, follow=True
    )
    again = client.post(f"/account/tokens/{issued.token.pk}/revoke/", {"confirmed": "yes"})

    assert asked.status_code == posted.status_code == 200
    assert "Revoke “old laptop”?" in asked.text
    assert "Revoke “old laptop”?" in posted.text
    assert ApiToken.objects.get().revoked_at is not None
    assert revoked.redirect_chain == [("/account/tokens/", 302)]
    assert "API token “old laptop” was revoked" in revoked.text
    assert 'data-testid="token-state">revoked<' in revoked.text
    assert again.status_code == 302  # a second submission changes nothing and says so
    assert with_token(issued.text).get("/api/v1/me").status_code == 401


def test_htmx_asks_in_a_dialog_and_a_confirmed_htmx_post_revokes_in_place(
    client_for, developer
) -> None:
    issued = issue(developer, "old laptop")
    client = client_for(developer)
    url = f"/account/tokens/{issued.token.pk}/revoke/?page=1"

    asked = client.post(url, headers={"HX-Request": "true"})
    assert asked.text.lstrip().startswith("<dialog")
    assert ApiToken.objects.get().revoked_at is None
    response = client.post(url, {"confirmed": "yes"}, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert response.text.lstrip().startswith('<section class="card" id="tokens-table">')
    assert "API token “old laptop” was revoked" in response.text
    assert 'data-testid="token-state">revoked<' in response.text


@pytest.mark.parametrize("persona", ["lead", "outsider", "admin_user"])
def test_nobody_else_can_revoke_a_token_through_the_page(
    request: pytest.FixtureRequest, client_for, developer, persona: str
) -> None:
    issued = issue(developer, "developers nightly job")
    client = client_for(request.getfixturevalue(persona))

    asked = client.get(f"/account/tokens/{issued.token.pk}/revoke/")
    posted = client.post(f"/account/tokens/{issued.token.pk}/revoke/")

    assert (asked.status_code, posted.status_code) == (404, 404)
    assert ApiToken.objects.get().revoked_at is None
    assert "developers nightly job" not in client.get("/account/tokens/").text


def test_every_signed_in_persona_has_the_page(
    client_for, developer, lead, outsider, finance_user, admin_user
) -> None:
    for user in (developer, lead, outsider, finance_user, admin_user):
        page = client_for(user).get("/account/tokens/")
        assert page.status_code == 200
        assert '<a href="/account/tokens/" aria-current="page">API tokens</a>' in page.text


# Queries stay bounded


def test_the_page_and_the_api_list_25_tokens_in_a_bounded_number_of_queries(
    client_for, developer, django_assert_max_num_queries
) -> None:
    for number in range(25):  # used, and every fourth revoked: 18 active, within the limit
        token = issue(developer, f"token {number}").token
        revoked_at = timezone.now() if number % 4 == 0 else None
        ApiToken.objects.filter(pk=token.pk).update(
            last_used_at=timezone.now(), revoked_at=revoked_at
        )
    client = client_for(developer)

    # session, user, count and page; the page adds the persona for the navigation
    with django_assert_max_num_queries(5):
        page = client.get("/account/tokens/")
    with django_assert_max_num_queries(4):
        listed = client.get("/api/v1/tokens/")
    reader = with_token(issue(developer, "reader").text)
    with django_assert_max_num_queries(4):  # the token with its user, its first use, count, page
        by_token = reader.get("/api/v1/tokens/")

    assert page.text.count('data-testid="token-state">') == 25
    assert page.text.count('data-testid="token-state">revoked<') == 7
    assert listed.json()["count"] == 25
    assert by_token.json()["count"] == 26
