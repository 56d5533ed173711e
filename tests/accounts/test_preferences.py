"""Each person's language and time zone: the browser's Accept-Language by default, the
switcher, the profile page and `PATCH me`; the saved choice wins on pages, the API follows the
caller's Accept-Language and answers times in UTC."""

import json
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.template import engines
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.utils import timezone, translation

from portal.accounts.models import User
from portal.core.models import AuditEvent

PROFILE = "/accounts/profile/"
SWITCH = "/accounts/language/"


def html_lang(response) -> str:
    match = re.search(rb'<html lang="([^"]*)"', response.content)
    assert match, response.content[:200]
    return match[1].decode()


def patch_me(client: Client, body: object, **headers: str):
    return client.patch(
        "/api/v1/me", data=json.dumps(body), content_type="application/json", headers=headers
    )


def test_the_browsers_language_decides_for_people_not_signed_in(client: Client, db) -> None:
    chinese = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="zh-Hans")
    english = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="en-GB,en;q=0.8")
    mainland = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")

    assert html_lang(chinese) == "zh-hans"
    assert chinese.headers["Content-Language"] == "zh-hans"
    assert html_lang(english) == "en"
    assert html_lang(mainland) == "zh-hans"


def test_a_saved_language_overrides_the_browsers_on_pages(client_for, developer) -> None:
    developer.language = "zh-hans"
    developer.save()

    response = client_for(developer).get(PROFILE, HTTP_ACCEPT_LANGUAGE="en")

    assert response.status_code == 200
    assert html_lang(response) == "zh-hans"
    assert response.headers["Content-Language"] == "zh-hans"


def test_a_blank_language_follows_the_browser(client_for, developer) -> None:
    client = client_for(developer)

    assert html_lang(client.get(PROFILE, HTTP_ACCEPT_LANGUAGE="zh-Hans")) == "zh-hans"
    assert html_lang(client.get(PROFILE, HTTP_ACCEPT_LANGUAGE="en")) == "en"


def test_the_profile_saves_language_and_time_zone_and_audits_the_change(
    client_for, developer
) -> None:
    client = client_for(developer)

    response = client.post(PROFILE, {"language": "zh-hans", "time_zone": "Asia/Shanghai"})

    assert response.status_code == 302
    assert response.headers["Location"] == PROFILE
    developer.refresh_from_db()
    assert (developer.language, developer.time_zone) == ("zh-hans", "Asia/Shanghai")
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    event = AuditEvent.objects.get(action="user.preferences")
    assert event.changes == {
        "language": ["", "zh-hans"],
        "time_zone": ["UTC", "Asia/Shanghai"],
    }
    page = client.get(PROFILE, HTTP_ACCEPT_LANGUAGE="en")
    assert html_lang(page) == "zh-hans"
    assert b"Asia/Shanghai" in page.content


def test_following_the_browser_again_forgets_the_language_cookie(client_for, developer) -> None:
    client = client_for(developer)
    client.post(PROFILE, {"language": "zh-hans", "time_zone": "UTC"})

    response = client.post(PROFILE, {"language": "", "time_zone": "UTC"})

    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == ""
    developer.refresh_from_db()
    assert developer.language == ""
    assert html_lang(client.get(PROFILE, HTTP_ACCEPT_LANGUAGE="en")) == "en"


def test_the_profile_refuses_an_unknown_time_zone_on_the_field(client_for, developer) -> None:
    response = client_for(developer).post(
        PROFILE, {"language": "", "time_zone": "Mars/Olympus_Mons"}
    )

    assert response.status_code == 400
    assert response.context["form"].errors["time_zone"]
    developer.refresh_from_db()
    assert developer.time_zone == "UTC"
    assert not AuditEvent.objects.filter(action="user.preferences").exists()


def test_the_profile_needs_a_sign_in(client: Client, db) -> None:
    response = client.get(PROFILE)

    assert response.status_code == 302
    assert response.headers["Location"].startswith("/accounts/login/")


def test_the_saved_time_zone_is_the_pages_current_zone(client_for, developer) -> None:
    developer.time_zone = "Asia/Shanghai"
    developer.save()

    page = client_for(developer).get(PROFILE)

    assert b"Times are shown in Asia/Shanghai." in page.content


def test_dates_follow_the_locales_one_format() -> None:
    moment = datetime(2026, 11, 26, 14, 5, tzinfo=UTC)
    shown = {}
    for language in ("en", "zh-hans"):
        with translation.override(language), timezone.override("UTC"):
            template = engines["django"].from_string('{{ moment|date:"DATETIME_FORMAT" }}')
            shown[language] = template.render({"moment": moment})

    assert shown == {"en": "26 Nov 2026, 14:05", "zh-hans": "2026年11月26日 14:05"}


def test_the_switcher_saves_a_signed_in_persons_choice_and_returns_to_the_page(
    client_for, lead
) -> None:
    response = client_for(lead).post(
        SWITCH, {"language": "zh-hans", "next": "/accounts/profile/?x=1"}
    )

    assert response.status_code == 302
    assert response.headers["Location"] == "/accounts/profile/?x=1"
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    lead.refresh_from_db()
    assert lead.language == "zh-hans"


def test_the_switcher_sets_only_the_cookie_for_people_not_signed_in(client: Client, db) -> None:
    response = client.post(SWITCH, {"language": "zh-hans", "next": "/accounts/login/"})

    assert response.status_code == 302
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert html_lang(client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="en")) == "zh-hans"


def test_the_switcher_ignores_an_unknown_language_and_a_foreign_next(client_for, developer) -> None:
    response = client_for(developer).post(
        SWITCH, {"language": "xx", "next": "https://elsewhere.example/"}
    )

    assert response.status_code == 302
    assert "elsewhere" not in response.headers["Location"]
    developer.refresh_from_db()
    assert developer.language == ""


def test_the_switcher_offers_each_language_in_its_own_name_and_names_the_time_zone(
    rf: RequestFactory,
) -> None:
    request = rf.get("/tenants/?page=2")
    request.user = AnonymousUser()
    with translation.override("zh-hans"), timezone.override(ZoneInfo("Asia/Shanghai")):
        html = render_to_string("core/_locale_switcher.html", request=request)

    assert 'action="/accounts/language/"' in html
    assert 'name="next" value="/tenants/?page=2"' in html
    assert '<option value="zh-hans" lang="zh-hans" selected>简体中文</option>' in html
    assert '<option value="en" lang="en">English</option>' in html
    assert "Asia/Shanghai" in html


# The API: `me` shows and saves both; it answers in the Accept-Language and in UTC.


def test_me_shows_and_patch_saves_language_and_time_zone(client_for, developer) -> None:
    client = client_for(developer)
    before = client.get("/api/v1/me").json()
    assert (before["language"], before["time_zone"]) == ("", "UTC")

    response = patch_me(client, {"language": "zh-hans", "time_zone": "Europe/Berlin"})

    assert response.status_code == 200
    assert response.json()["language"] == "zh-hans"
    assert response.json()["time_zone"] == "Europe/Berlin"
    developer.refresh_from_db()
    assert (developer.language, developer.time_zone) == ("zh-hans", "Europe/Berlin")
    assert patch_me(client, {"language": ""}).json()["language"] == ""


def test_patch_me_refuses_an_unknown_time_zone_naming_the_field(client_for, developer) -> None:
    response = patch_me(client_for(developer), {"time_zone": "../../etc/passwd"})

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == ["time_zone"]
    developer.refresh_from_db()
    assert developer.time_zone == "UTC"


def test_api_error_messages_follow_accept_language_with_english_codes_and_fields(
    client_for, developer
) -> None:
    client = client_for(developer)

    chinese = patch_me(client, {"language": "xx"}, **{"Accept-Language": "zh-Hans"})
    english = patch_me(client, {"language": "xx"}, **{"Accept-Language": "en"})

    assert chinese.status_code == english.status_code == 400
    assert chinese.json()["error"]["code"] == english.json()["error"]["code"] == "invalid"
    assert list(chinese.json()["error"]["fields"]) == ["language"]
    assert chinese.json()["error"]["fields"]["language"] == ["“xx” 不是合法选项。"]
    assert english.json()["error"]["fields"]["language"] == ['"xx" is not a valid choice.']


def test_the_api_ignores_the_saved_language_and_answers_times_in_utc(client_for, developer) -> None:
    User.objects.filter(pk=developer.pk).update(language="zh-hans", time_zone="Asia/Shanghai")
    client = client_for(developer)

    response = patch_me(client, {"language": "xx"}, **{"Accept-Language": "en"})
    tokens = client.post(
        "/api/v1/tokens/", data={"name": "tz"}, content_type="application/json"
    ).json()

    assert response.json()["error"]["fields"]["language"] == ['"xx" is not a valid choice.']
    assert tokens["expires_at"].endswith("Z")
