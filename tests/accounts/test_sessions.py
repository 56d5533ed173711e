"""Browser sessions (portal/accounts/sessions.py): read by key as Django's database engine
reads them, an expired one as none; a signed-in page reads its session and its user."""

from datetime import timedelta

from django.contrib.sessions.models import Session
from django.urls import reverse
from django.utils import timezone

from portal.accounts.sessions import SessionStore


def test_a_session_is_read_back_and_an_expired_one_is_none(db) -> None:
    kept = SessionStore()
    kept["greeting"] = "hello"
    kept.create()
    gone = SessionStore()
    gone["greeting"] = "stale"
    gone.create()
    Session.objects.filter(pk=gone.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )

    read = SessionStore(kept.session_key)
    expired = SessionStore(gone.session_key)
    unknown = SessionStore("x" * 32)

    assert read["greeting"] == "hello"
    assert "greeting" not in expired
    assert expired.session_key is None
    assert dict(unknown.items()) == {}


def test_a_signed_in_page_and_then_an_inactive_user_is_signed_out(client_for, developer) -> None:
    client = client_for(developer)

    signed_in = client.get("/notebooks/")
    developer.is_active = False
    developer.save(update_fields=["is_active"])
    signed_out = client.get("/notebooks/")

    assert signed_in.status_code == 200
    assert signed_out.status_code == 302
    assert signed_out["Location"].startswith(reverse("accounts:login"))
