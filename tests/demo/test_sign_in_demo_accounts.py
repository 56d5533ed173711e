"""The sign-in page lists the demo's accounts only when PORTAL_DEMO is on."""

from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse

from portal.demo.accounts import DEMO_PASSWORD, PERSONAS


@override_settings(PORTAL_DEMO=True)
def test_the_demo_sign_in_page_lists_every_demo_account_and_the_password(
    client: Client, db
) -> None:
    page = client.get(reverse("accounts:login")).content.decode()

    assert 'data-testid="demo-accounts"' in page
    assert DEMO_PASSWORD in page
    for username, *_ in PERSONAS:
        assert f"<code>{username}</code>" in page
    assert "lead in vision, lead in nlp" in page


@override_settings(PORTAL_DEMO=False)
def test_outside_the_demo_the_sign_in_page_names_no_account_or_password(client: Client, db) -> None:
    page = client.get(reverse("accounts:login")).content.decode()

    assert 'data-testid="demo-accounts"' not in page
    assert DEMO_PASSWORD not in page
    assert "nlp-dev" not in page


@override_settings(PORTAL_BASE_URL="http://127.0.0.1:8123")
def test_the_demo_data_prints_the_address_it_is_served_at(db, capsys) -> None:
    call_command("demo_data")

    output = capsys.readouterr().out
    assert "http://127.0.0.1:8123/" in output
    assert ":8000" not in output
