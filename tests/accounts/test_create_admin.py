import io

import pytest
from django.core.management import CommandError, call_command

from portal.accounts.models import GlobalRole, User


def test_create_admin_makes_a_local_admin_with_a_password(db, monkeypatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-unusual-passphrase\n"))

    call_command("create_admin", "rescue", "--email=rescue@example.org", "--password-stdin")

    rescue = User.objects.get(username="rescue")
    assert rescue.global_role == GlobalRole.ADMIN
    assert rescue.check_password("a-long-unusual-passphrase")


def test_create_admin_refuses_a_weak_password_or_a_taken_name(db, monkeypatch, admin_user) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("password\n"))
    with pytest.raises(CommandError, match="password: This password is too common"):
        call_command("create_admin", "rescue", "--password-stdin")

    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-unusual-passphrase\n"))
    with pytest.raises(CommandError, match="exists already"):
        call_command("create_admin", "admin", "--password-stdin")
    assert not User.objects.filter(username="rescue").exists()


@pytest.mark.parametrize(
    ("role", "expected"),
    [("none", GlobalRole.NONE), ("finance", GlobalRole.FINANCE), ("admin", GlobalRole.ADMIN)],
)
def test_create_user_makes_a_local_account_with_its_global_role(
    db, monkeypatch, role: str, expected: GlobalRole
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-unusual-passphrase\n"))
    out = io.StringIO()

    call_command("create_user", "ana", f"--role={role}", "--password-stdin", stdout=out)

    ana = User.objects.get(username="ana")
    assert ana.global_role == expected
    assert ana.check_password("a-long-unusual-passphrase")
    assert "Created ana" in out.getvalue()


def test_create_user_refuses_an_unknown_role_and_a_taken_name(db, monkeypatch, developer) -> None:
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("create_user", "ana", "--role=root", "--password-stdin")
    monkeypatch.setattr("sys.stdin", io.StringIO("a-long-unusual-passphrase\n"))
    with pytest.raises(CommandError, match="exists already"):
        call_command("create_user", developer.username, "--password-stdin")
