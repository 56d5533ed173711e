"""The test command: `python -m tests.harness [pytest arguments]` (what `make test` runs).

1. Installs the system packages the suite needs (PostgreSQL, Redis, Prometheus, Chromium, npm)
   through apt when they are missing and we are root; otherwise says what to install; then the
   browser tests' npm tools (axe-core) from tests/e2e/package-lock.json.
2. Starts throwaway PostgreSQL, Redis and Prometheus servers on free loopback ports.
3. Runs ruff, mypy, the import contracts (lint-imports), the translation check (every marked
   string has a Simplified Chinese translation, tests/harness/catalog.py), compiles the catalogs,
   and runs the whole pytest suite against them.
4. Stops what it started, also when a step fails or the run is interrupted.

The exit status is non-zero when any step failed. While developing, `--no-lint` skips the lint
steps and the translation check, `--no-i18n-check` the translation check alone; the full run
(no flags: `make test`, CI) does every step.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from types import FrameType

from tests.harness import catalog
from tests.harness.services import (
    PostgresServer,
    PrometheusServer,
    RedisServer,
    free_port,
    postgres_bin_dir,
)

CHROMIUM = "/usr/bin/chromium"

# What the suite needs from the system: (apt package, how to tell it is there).
SYSTEM_PACKAGES: dict[str, Callable[[], bool]] = {
    "postgresql": lambda: postgres_bin_dir() is not None,
    "redis-server": lambda: shutil.which("redis-server") is not None,
    "prometheus": lambda: shutil.which("prometheus") is not None,
    "chromium": lambda: Path(CHROMIUM).exists(),
    # npm brings Node.js; it installs the browser tests' npm tools (tests/e2e/package.json).
    "npm": lambda: shutil.which("npm") is not None,
    # makemessages and compilemessages run xgettext, msgmerge and msgfmt.
    "gettext": lambda: shutil.which("msgfmt") is not None and shutil.which("xgettext") is not None,
}


def ensure_system_packages() -> None:
    missing = [package for package, present in SYSTEM_PACKAGES.items() if not present()]
    if not missing:
        return
    command = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        sys.exit(
            f"error: the test suite needs {', '.join(missing)}, which are not installed.\n"
            f"       On Debian or Ubuntu, as root: apt-get update && {' '.join(command)}\n"
            "       Then run `make test` again."
        )
    print(f"==> installing {', '.join(missing)} with apt-get", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(command, check=True, env=env)
    still_missing = [package for package in missing if not SYSTEM_PACKAGES[package]()]
    if still_missing:
        sys.exit(f"error: apt-get ran but {', '.join(still_missing)} is still missing")


E2E_DIR = Path(__file__).resolve().parent.parent / "e2e"


def ensure_e2e_npm_tools() -> None:
    """Install the browser tests' npm tools (axe-core) into tests/e2e/node_modules from the
    lock file, when they are missing or older than the lock."""
    lock = E2E_DIR / "package-lock.json"
    installed = E2E_DIR / "node_modules" / ".package-lock.json"
    if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        sys.exit(
            "error: npm (with Node.js) is not on PATH; the browser tests install axe-core.\n"
            "       On Debian or Ubuntu, as root: apt-get install -y npm; then `make test` again."
        )
    print("==> installing the browser tests' npm tools (npm ci in tests/e2e)", flush=True)
    command = [npm, "ci", "--prefix", str(E2E_DIR), "--no-audit", "--no-fund", "--loglevel=error"]
    subprocess.run(command, check=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_step(name: str, command: list[str], env: dict[str, str]) -> int:
    print(f"==> {name}: {' '.join(command)}", flush=True)
    started = time.monotonic()
    code = subprocess.run(command, env=env, check=False).returncode
    print(f"==> {name}: exit {code} in {time.monotonic() - started:.1f} s", flush=True)
    return code


def main(pytest_args: list[str]) -> int:
    ensure_system_packages()
    ensure_e2e_npm_tools()
    signal.signal(signal.SIGTERM, _interrupt)
    python = sys.executable
    with ExitStack() as stack:
        print("==> starting PostgreSQL, Redis and Prometheus on loopback", flush=True)
        postgres = stack.enter_context(PostgresServer())
        redis = stack.enter_context(RedisServer())
        exporter_port = free_port()
        prometheus = stack.enter_context(PrometheusServer(exporter_port=exporter_port))
        print(
            f"    PostgreSQL {postgres.url}\n    Redis {redis.url}\n"
            f"    Prometheus {prometheus.url} (scraping 127.0.0.1:{exporter_port})",
            flush=True,
        )
        env = {
            **os.environ,
            "DATABASE_URL": postgres.url.rsplit("/", 1)[0] + "/portal",
            "DATABASE_CONN_MAX_AGE": "0",
            "REDIS_URL": redis.url,
            "PROMETHEUS_URL": prometheus.url,
            "TEST_DCGM_EXPORTER_PORT": str(exporter_port),
            "TEST_CHROMIUM": CHROMIUM,
            "SECRET_KEY": "test-only-secret-key-with-enough-length-to-be-accepted",
            "SECURE_COOKIES": "false",
            "DEBUG": "false",
            "DJANGO_ALLOW_ASYNC_UNSAFE": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        lint_only_env = {**env, "DEBUG": "true"}
        codes = []
        i18n_check = "--no-lint" not in pytest_args and "--no-i18n-check" not in pytest_args
        pytest_args = [arg for arg in pytest_args if arg != "--no-i18n-check"]
        if i18n_check:
            scratch = stack.enter_context(catalog.scratch_directory())
            print("==> translations: makemessages into a scratch copy of the tree", flush=True)
            try:
                extracted = catalog.extract(Path(scratch), lint_only_env)
            except RuntimeError as error:
                print(f"error: {error}", file=sys.stderr, flush=True)
                codes.append(1)
            else:
                env[catalog.EXTRACTED_ENV] = str(extracted)
                codes.append(catalog.check(extracted))
        codes.append(catalog.compile_catalogs(lint_only_env))
        if "--no-lint" in pytest_args:
            pytest_args = [arg for arg in pytest_args if arg != "--no-lint"]
        else:
            codes.append(run_step("ruff", [python, "-m", "ruff", "check", "."], lint_only_env))
            codes.append(
                run_step(
                    "ruff format", [python, "-m", "ruff", "format", "--check", "."], lint_only_env
                )
            )
            codes.append(run_step("mypy", [python, "-m", "mypy", "."], lint_only_env))
            # The apps import only downwards; only gateways reach the network (pyproject.toml).
            lint_imports = str(Path(python).parent / "lint-imports")
            codes.append(run_step("import contracts", [lint_imports], lint_only_env))
        pytest_code = run_step("pytest", [python, "-m", "pytest", *pytest_args], env)
        failed = [code for code in codes if code != 0]
        print("==> stopping the services", flush=True)
    if failed:
        print("error: lint, type or translation checks failed (see above)", file=sys.stderr)
        return pytest_code or failed[0]
    return pytest_code


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        print("interrupted: the services were stopped", file=sys.stderr)
        sys.exit(130)
