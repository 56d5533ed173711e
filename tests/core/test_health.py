import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import wait_until
from tests.harness.services import PostgresServer, free_port

ROOT = Path(__file__).resolve().parents[2]


def test_healthz_answers_while_the_process_lives(client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    # No cache keeps it (as never_cache writes it), and it says its language as every answer.
    assert response["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"
    assert response["Content-Language"] == "en"
    assert "Accept-Language" in response["Vary"]


def test_the_language_is_the_browsers_or_the_cookies_whatever_the_path(client, settings) -> None:
    chinese = client.get("/healthz", HTTP_ACCEPT_LANGUAGE="zh-Hans")
    # A path that starts like a language code is no language: URLs carry none.
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "zh-hans"
    by_cookie = client.get("/en/healthz", HTTP_ACCEPT_LANGUAGE="en")

    assert chinese["Content-Language"] == "zh-hans"
    assert by_cookie.status_code == 404
    assert by_cookie["Content-Language"] == "zh-hans"


def test_readyz_is_ok_when_database_and_redis_answer(client, db) -> None:
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_names_redis_when_redis_is_down(client, db, settings) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["failing"] == ["redis"]
    assert "ConnectionError" in response.json()["problems"]["redis"]


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of the test's own, which it may stop and start."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def portal_on(own_postgres: PostgresServer) -> Iterator[str]:
    """The portal served by gunicorn in its own process, on the test's own PostgreSQL."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": own_postgres.url,
        "REDIS_URL": "",
        "CELERY_BROKER_URL": "",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        try:
            return requests.get(f"{url}/healthz", timeout=5).status_code == 200
        except requests.RequestException:
            # Refused before the socket is bound, or held while the worker still imports the
            # project (gunicorn accepts before its worker is ready): not serving yet.
            return False

    try:
        wait_until(serving, timeout=30, what="gunicorn to serve")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_readyz_names_the_database_while_it_is_down_and_recovers(
    own_postgres: PostgresServer, portal_on: str
) -> None:
    assert requests.get(f"{portal_on}/readyz", timeout=30).status_code == 200

    own_postgres.pause()
    down = requests.get(f"{portal_on}/readyz", timeout=30)

    assert down.status_code == 503
    assert down.json()["failing"] == ["database"]
    assert requests.get(f"{portal_on}/healthz", timeout=30).status_code == 200

    own_postgres.start()
    assert requests.get(f"{portal_on}/readyz", timeout=30).status_code == 200
