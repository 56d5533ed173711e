"""The demo's own server, as `make demo` runs it, on a database of a test's own.

gunicorn with `deploy/demo/gunicorn.conf.py` (the file the Makefile uses) on a free loopback
port given as PORT, in the demo's environment (PORTAL_DEMO on, DEBUG off, no SECRET_KEY; the
embedded defaults: SQLite, tasks and periodic tasks in-process, no Redis, no Prometheus, no SSO),
on an SQLite file in a temporary directory that `manage.py migrate` and `tests/demo/seed.py`
prepare. Its output, the access log included, is kept in a file the test can read.
"""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from tests.conftest import PASSWORD, wait_until
from tests.harness.services import free_port

ROOT = Path(__file__).resolve().parents[2]
GUNICORN_CONF = ROOT / "deploy" / "demo" / "gunicorn.conf.py"

# What the test command sets for the rest of the suite and the demo does not have.
_NOT_IN_THE_DEMO = (
    "DATABASE_URL", "DATABASE_CONN_MAX_AGE", "REDIS_URL", "CELERY_BROKER_URL", "PROMETHEUS_URL",
    "OIDC_ISSUER_URL", "KEYCLOAK_ADMIN_CLIENT_ID", "PORTAL_CLUSTER_MODE", "DEBUG", "SECRET_KEY",
    "PORTAL_BASE_URL", "PORT",
)  # fmt: skip
# The Makefile's DEMO_ENV.
_DEMO_ENV = {
    "PORTAL_DEMO": "true",
    "PORTAL_IN_PROCESS_SCHEDULER": "true",
    "PORTAL_SYNTHETIC_METRICS": "true",
}


@dataclass(frozen=True)
class DemoServer:
    url: str
    token: str  # the API token of `dev`, a developer in tenants `vision` and `nlp`
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def _run(command: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180
    )
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


@contextmanager
def demo_server(directory: Path) -> Iterator[DemoServer]:
    """Migrate and seed an SQLite database in `directory`, serve it, stop the server after."""
    env = {key: value for key, value in os.environ.items() if key not in _NOT_IN_THE_DEMO}
    # As `make demo PORT=…` runs it: the port reaches gunicorn's configuration through PORT.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env |= _DEMO_ENV | {
        "DATABASE_URL": f"sqlite:///{directory / 'portal.sqlite3'}",
        "PORT": str(port),
        "PORTAL_BASE_URL": url,
    }
    _run([sys.executable, "manage.py", "migrate", "--noinput"], env)
    seeded = _run([sys.executable, "-m", "tests.demo.seed", PASSWORD], env)
    token = json.loads(seeded.strip().splitlines()[-1])["token"]

    log = directory / "gunicorn.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", str(GUNICORN_CONF)],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def serving() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"gunicorn exited with {process.returncode}:\n{log.read_text()}")
        try:
            return requests.get(f"{url}/healthz", timeout=5).status_code == 200
        except requests.RequestException:
            return False  # not listening yet, or the worker still imports the project

    try:
        wait_until(serving, timeout=60, what="the demo's gunicorn to serve")
        yield DemoServer(url=url, token=token, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
