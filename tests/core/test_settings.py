import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.core.env import Env

ROOT = Path(__file__).resolve().parents[2]


def manage_check(**overrides: str | None) -> subprocess.CompletedProcess[str]:
    return manage("check", **overrides)


def manage(*arguments: str, **overrides: str | None) -> subprocess.CompletedProcess[str]:
    """`manage.py <arguments>` in a fresh process, with `overrides` on the environment (None
    removes a variable)."""
    env = {key: value for key, value in os.environ.items() if key not in overrides}
    env.update({key: value for key, value in overrides.items() if value is not None})
    return subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_start_up_without_secret_key_outside_debug_fails_naming_it() -> None:
    result = manage_check(DEBUG="false", SECRET_KEY=None, SECRET_KEY_FILE=None)

    assert result.returncode == 2
    assert "SECRET_KEY" in result.stderr
    assert "Traceback" not in result.stderr


def test_start_up_with_secret_key_outside_debug_succeeds() -> None:
    result = manage_check(DEBUG="false", SECRET_KEY="x" * 50)

    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PORTAL_CLUSTER_MODE", "production"),
        ("DEBUG", "maybe"),
        ("DATABASE_CONN_MAX_AGE", "forever"),
        ("METRICS_ALLOWED_NETWORKS", "10.0.0.0/8,not-a-network"),
        ("PROMETHEUS_URL", "prometheus:9090"),
        ("LOG_LEVEL", "chatty"),
        ("PORTAL_SIGN_IN_FAILURE_LIMIT", "0"),
        ("PORTAL_SIGN_IN_LOCKOUT_MINUTES", "soon"),
        ("PORTAL_TRUSTED_PROXY_COUNT", "-1"),
    ],
)
def test_a_wrong_value_stops_start_up_naming_the_variable(variable: str, value: str) -> None:
    result = manage_check(**{variable: value})

    assert result.returncode == 2
    assert f"configuration error: {variable}" in result.stderr


def test_the_sign_in_throttle_is_configured_from_the_environment() -> None:
    result = manage(
        "shell",
        "-c",
        "from django.conf import settings as s; print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME)",
        PORTAL_SIGN_IN_FAILURE_LIMIT="3",
        PORTAL_SIGN_IN_LOCKOUT_MINUTES="40",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["3", "0:40:00"]


def test_secret_is_read_from_its_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret-value\n")

    assert Env({"SECRET_KEY_FILE": str(secret_file)}).secret("SECRET_KEY") == "s3cret-value"


def test_secret_and_its_file_together_are_refused(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("one")

    with pytest.raises(ImproperlyConfigured, match="SECRET_KEY or SECRET_KEY_FILE"):
        Env({"SECRET_KEY": "two", "SECRET_KEY_FILE": str(secret_file)}).secret("SECRET_KEY")


def test_unreadable_secret_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL_FILE"):
        Env({"DATABASE_URL_FILE": str(tmp_path / "missing")}).secret("DATABASE_URL")


def test_pages_carry_the_security_headers(client) -> None:
    response = client.get("/accounts/login/")

    assert response.status_code == 200
    policy = response.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Request-ID"]


def test_production_defaults_make_cookies_secure() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import django; django.setup(); from django.conf import settings as s; "
                "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
                "s.SESSION_COOKIE_HTTPONLY)"
            ),
        ],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if k not in {"SECURE_COOKIES", "DEBUG"}},
            "DJANGO_SETTINGS_MODULE": "portal.settings",
        },
        capture_output=True,
        text=True,
        check=True,
    )

    assert result.stdout.split() == ["False", "True", "True", "True"]


def test_every_model_change_has_a_migration(db) -> None:
    from django.core.management import call_command  # noqa: PLC0415

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
