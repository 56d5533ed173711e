"""Everything under /api/ answers errors in one JSON envelope, `{"error": {"code", "message",
"fields"}}`: unknown routes, bodies too large or too deep, methods not allowed, throttled
callers and bugs (500 with the request id and nothing else). Pages keep their HTML error pages."""

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from io import BytesIO
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client

from portal.accounts.models import User
from portal.accounts.tokens import api_token_create
from portal.core.models import IdempotencyKey
from portal.core.parsers import BoundedJSONParser, RequestTooLarge, json_depth
from portal.core.throttling import ApiRateThrottle
from tenants.models import Tenant
from tests.core.failing_urls import BugInTheApi

MAX_BODY = 1024 * 1024  # PORTAL_API_MAX_BODY_BYTES's default
MAX_DEPTH = 32  # PORTAL_API_MAX_JSON_DEPTH's default


def envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response's error, after checking it is the envelope with this status and code."""
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert list(body) == ["error"]
    error: dict[str, Any] = body["error"]
    assert set(error) == {"code", "message", "fields"}
    assert error["code"] == code
    assert error["message"]
    return error


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def post_raw(client: Client, url: str, body: str | bytes, **extra: Any) -> Any:
    return client.post(url, body, content_type="application/json", **extra)


@pytest.fixture
def admin_client(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


# Unknown routes, methods, and Django's own refusals


@pytest.mark.parametrize("path", ["/api/v1/no-such-thing/", "/api/v2/tenants/", "/api/", "/api"])
def test_an_unknown_api_route_is_404_in_the_envelope(admin_client, path) -> None:
    envelope(admin_client.get(path), 404, "not_found")


def test_an_unknown_api_route_is_404_in_the_envelope_for_anonymous_callers_too(db) -> None:
    envelope(Client().get("/api/v1/nothing-here"), 404, "not_found")


def test_an_unknown_page_keeps_the_html_404(admin_client) -> None:
    response = admin_client.get("/no-such-page/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert b"Not found" in response.content


@pytest.mark.parametrize(
    ("method", "path"),
    [("put", "/api/v1/me"), ("delete", "/api/v1/tenants/"), ("post", "/api/schema/")],
)
def test_a_method_not_allowed_is_405_in_the_envelope(admin_client, method, path) -> None:
    response = getattr(admin_client, method)(path)

    error = envelope(response, 405, "method_not_allowed")
    assert method.upper() in error["message"]


def test_too_many_query_fields_are_400_in_the_envelope(admin_client, settings) -> None:
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    query = "&".join(f"state=x{number}" for number in range(11))

    envelope(admin_client.get(f"/api/v1/requests/?{query}"), 400, "too_many_fields")


def test_too_many_query_fields_on_a_page_keep_the_html_400(admin_client, settings) -> None:
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    query = "&".join(f"action=x{number}" for number in range(11))

    response = admin_client.get(f"/audit/?{query}")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


# Body size


def test_an_oversized_body_is_413_before_csrf_or_parsing(admin_user) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    body = json.dumps({"slug": "big", "name": "x" * MAX_BODY})

    response = post_raw(client, "/api/v1/tenants/", body)

    error = envelope(response, 413, "too_large")
    assert str(MAX_BODY) in error["message"]
    assert not Tenant.objects.filter(slug="big").exists()


def test_an_oversized_body_is_413_even_without_credentials(db) -> None:
    response = post_raw(Client(), "/api/v1/requests/", b" " * (MAX_BODY + 1))

    envelope(response, 413, "too_large")


def test_a_body_at_the_limit_is_parsed(admin_client) -> None:
    body = json.dumps({"slug": "big", "name": "Big"})
    padded = body + " " * (MAX_BODY - len(body))

    response = post_raw(admin_client, "/api/v1/tenants/", padded)

    assert response.status_code == 201
    assert Tenant.objects.filter(slug="big").exists()


def test_the_limit_follows_its_setting(admin_client, settings) -> None:
    settings.PORTAL_API_MAX_BODY_BYTES = 2048

    response = post_raw(admin_client, "/api/v1/tenants/", json.dumps({"name": "x" * 2048}))

    assert "2048" in envelope(response, 413, "too_large")["message"]


def test_a_form_body_django_refuses_as_too_big_is_413_in_the_envelope(
    admin_client, settings
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100

    response = admin_client.post(
        "/api/v1/tenants/",
        f"slug=big&name={'x' * 200}",
        content_type="application/x-www-form-urlencoded",
    )

    envelope(response, 413, "too_large")
    assert not Tenant.objects.filter(slug="big").exists()


def test_the_parser_bounds_a_body_sent_without_a_length() -> None:
    with pytest.raises(RequestTooLarge):
        BoundedJSONParser().parse(BytesIO(b"[" + b"0," * MAX_BODY + b"0]"))


# JSON depth


@pytest.mark.parametrize("client_kind", ["session", "token"])
def test_json_nested_thousands_deep_is_400_naming_the_body(
    client_kind, admin_user, settings
) -> None:
    if client_kind == "token":
        text = api_token_create(actor=admin_user, name="ci").text
        client = Client(HTTP_AUTHORIZATION=f"Bearer {text}")
    else:
        # With a CSRF cookie but no token in the header, Django's CSRF check reads the body
        # (looking for the form's token): the depth is checked there too.
        client = Client(enforce_csrf_checks=True)
        client.force_login(admin_user)
        client.cookies[settings.CSRF_COOKIE_NAME] = "a" * 32
    body = '{"slug": "deep", "name": "Deep", "x": ' + nested(50_000) + "}"

    started = time.monotonic()
    response = post_raw(client, "/api/v1/tenants/", body)

    error = envelope(response, 400, "invalid")
    assert list(error["fields"]) == ["body"]
    assert str(MAX_DEPTH) in error["fields"]["body"][0]
    assert time.monotonic() - started < 2
    assert not Tenant.objects.filter(slug="deep").exists()


def test_a_session_post_without_a_csrf_cookie_is_refused_before_its_body_is_read(
    admin_user,
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    response = post_raw(client, "/api/v1/tenants/", nested(50_000))

    assert "CSRF" in envelope(response, 403, "permission_denied")["message"]


def test_json_at_the_depth_limit_is_parsed_and_one_deeper_is_refused(admin_client) -> None:
    # An object holding arrays: the object is the first level.
    def body(depth: int) -> str:
        return '{"slug": "deep", "name": "Deep", "x": ' + nested(depth - 1) + "}"

    at_limit = post_raw(admin_client, "/api/v1/tenants/", body(MAX_DEPTH))
    deeper = post_raw(admin_client, "/api/v1/tenants/", body(MAX_DEPTH + 1))

    # At the limit the body is parsed, and then the serializer refuses the unknown field `x`;
    # one level deeper the parser refuses the body before anything reads it.
    assert list(envelope(at_limit, 400, "invalid")["fields"]) == ["x"]
    assert list(envelope(deeper, 400, "invalid")["fields"]) == ["body"]


def test_brackets_inside_strings_are_not_nesting(admin_client) -> None:
    name = "[" * 60 + '\\"{' * 60

    response = post_raw(
        admin_client, "/api/v1/tenants/", f'{{"slug": "brackets", "name": "{name}"}}'
    )

    assert response.status_code == 201, response.content
    assert Tenant.objects.get(slug="brackets").name == "[" * 60 + '"{' * 60


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ('{"a": [1, {"b": []}]}', 4),
        ('["]]]", "[[[", "\\"[", "\\\\", [[]]]', 3),
        ('"unterminated [[[', 0),
        ("[[[[", 4),
    ],
)
def test_json_depth_counts_nesting_outside_strings(text, depth) -> None:
    assert json_depth(text) == depth


@pytest.mark.parametrize(
    "body", ['{"slug": ', "NaN", '{"slug": "nan", "name": NaN}', b'{"name": "\xff"}']
)
def test_a_body_that_is_not_json_is_400_naming_the_body(admin_client, body) -> None:
    response = post_raw(admin_client, "/api/v1/tenants/", body)

    assert list(envelope(response, 400, "invalid")["fields"]) == ["body"]


# Idempotency-Key with a body that is not an object


@pytest.mark.parametrize("body", ["[1, 2]", "[]", "42", '"genomics"', "null", "true", "{"])
def test_an_idempotency_key_with_a_body_that_is_not_an_object_is_400(admin_client, body) -> None:
    response = post_raw(admin_client, "/api/v1/tenants/", body, HTTP_IDEMPOTENCY_KEY="k-1")

    assert list(envelope(response, 400, "invalid")["fields"]) == ["body"]
    assert not IdempotencyKey.objects.exists()
    assert not Tenant.objects.exists()


# Throttling


@pytest.fixture
def rates(settings) -> Any:
    """Set the API's rates for one test (read at each request, as in production)."""

    def set_rates(**rates: str) -> None:
        defaults = {"token": "1000/min", "user": "1000/min", "anon": "1000/min"}
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": defaults | rates,
        }

    return set_rates


def token_client(user: User, name: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(actor=user, name=name).text}")


def test_a_token_past_its_rate_is_429_with_retry_after(rates, developer) -> None:
    rates(token="3/min")
    client = token_client(developer, "ci")
    other = token_client(developer, "laptop")

    answers = [client.get("/api/v1/me").status_code for _ in range(3)]
    throttled = client.get("/api/v1/me")

    assert answers == [200, 200, 200]
    envelope(throttled, 429, "throttled")
    assert 1 <= int(throttled["Retry-After"]) <= 60
    assert other.get("/api/v1/me").status_code == 200  # each token has its own count


def test_a_user_past_their_rate_is_429_through_the_session_and_every_token(
    rates, client_for, developer, lead
) -> None:
    rates(user="4/min")
    session = client_for(developer)
    token = token_client(developer, "ci")

    answers = [session.get("/api/v1/me").status_code for _ in range(2)]
    answers += [token.get("/api/v1/me").status_code for _ in range(2)]

    assert answers == [200] * 4
    envelope(session.get("/api/v1/me"), 429, "throttled")
    throttled = token.get("/api/v1/me")
    envelope(throttled, 429, "throttled")
    assert int(throttled["Retry-After"]) >= 1
    assert client_for(lead).get("/api/v1/me").status_code == 200  # another user is not counted


def test_a_call_one_limit_refuses_is_counted_by_none(rates, client_for, developer) -> None:
    rates(token="2/min", user="3/min")
    token = token_client(developer, "ci")
    session = client_for(developer)

    answers = [token.get("/api/v1/me").status_code for _ in range(3)]  # the third: the token's
    after = [session.get("/api/v1/me").status_code for _ in range(2)]

    assert answers == [200, 200, 429]
    assert after == [200, 429]  # the user's third call is the session's first, not its second


def test_concurrent_calls_of_one_caller_are_each_counted_once(rates, developer) -> None:
    """In Redis the check and the count are one script: calls racing from many threads (or
    processes) cannot overwrite each other's counts, so exactly the rate gets through."""
    rates(user="20/min")
    caller = SimpleNamespace(user=developer, auth=None)

    with ThreadPoolExecutor(max_workers=8) as pool:
        allowed = list(
            pool.map(lambda _: ApiRateThrottle().allow_request(caller, None), range(60))  # type: ignore[arg-type]
        )

    assert allowed.count(True) == 20


def test_without_redis_each_process_counts_its_callers_alone(rates, settings, developer) -> None:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    rates(token="2/min")
    client = token_client(developer, "ci")

    answers = [client.get("/api/v1/me").status_code for _ in range(3)]

    assert answers == [200, 200, 429]


def test_anonymous_callers_are_throttled_by_address(rates, db) -> None:
    rates(anon="2/min")
    answers = [Client(REMOTE_ADDR="192.0.2.7").get("/api/docs/").status_code for _ in range(2)]
    throttled = Client(REMOTE_ADDR="192.0.2.7").get("/api/docs/")  # an HTML view: JSON error

    assert answers == [200, 200]
    envelope(throttled, 429, "throttled")
    assert Client(REMOTE_ADDR="192.0.2.8").get("/api/docs/").status_code == 200


def test_behind_a_trusted_proxy_anonymous_callers_are_counted_by_the_address_it_saw(
    rates, settings, db
) -> None:
    rates(anon="1/min")
    settings.PORTAL_TRUSTED_PROXY_COUNT = 1

    def via_proxy(client_address: str) -> Any:
        # The proxy (192.0.2.1) appends the address it was reached from; what is left of it is
        # the caller's to invent.
        return Client(
            REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR=f"10.9.9.9, {client_address}"
        ).get("/api/docs/")

    assert via_proxy("198.51.100.1").status_code == 200
    envelope(via_proxy("198.51.100.1"), 429, "throttled")
    assert via_proxy("198.51.100.2").status_code == 200


# Unexpected errors


@pytest.mark.urls("tests.core.failing_urls")
def test_a_bug_in_an_api_view_is_500_with_the_request_id_and_no_details(admin_user, caplog) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)

    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = client.get("/api/v1/failing", HTTP_X_REQUEST_ID="trace-4711")

    error = envelope(response, 500, "server_error")
    assert "trace-4711" in error["message"]
    assert response["X-Request-ID"] == "trace-4711"
    assert b"hunter2" not in response.content
    assert b"BugInTheApi" not in response.content
    logged = [record for record in caplog.records if record.exc_info]
    assert logged
    assert logged[0].exc_info is not None
    assert isinstance(logged[0].exc_info[1], BugInTheApi)


@pytest.mark.urls("tests.core.failing_urls")
def test_a_bug_in_a_page_keeps_the_html_500(admin_user) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)

    response = client.get("/failing-page")

    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")


def test_when_the_rate_limit_cache_fails_the_api_still_answers(
    client_for, developer, settings, caplog
) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
        }
    }

    with caplog.at_level(logging.WARNING, logger="portal.core.throttling"):
        response = client_for(developer).get("/api/v1/me")

    assert response.status_code == 200
    assert "the cache failed" in caplog.text
