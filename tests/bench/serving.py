"""What the benchmarks that serve the portal share (tests/bench/bench_portal_reads.py and
tests/bench/bench_decisions.py): gunicorn with the production configuration, for the portal
and for the two baselines beside it (tests/bench/baselines.py), the baselines' measure, the
knobs (BENCH_SECONDS, BENCH_ROUNDS) and the machine a run is reported with.

Both servers keep database connections open as production does (DATABASE_CONN_MAX_AGE's
default, 60 s), and both have max_requests off: at thousands of requests a second a restart
every 2,000 would measure worker start-up, not requests. The API's rate limits are raised (per
second, so DRF's history of each caller stays short).
"""

import os
import platform
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from tests.bench import load
from tests.harness.services import free_port, wait_for

ROOT = Path(__file__).resolve().parents[2]
BASELINE_CLIENTS = 16
BARE = "bare Django view"
DRF = "DRF 1 query, 50 rows"

Say = Callable[[str], None]


def knob(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def run_command(command: list[str], env: dict[str, str], log: Path) -> None:
    """Run `command` with its output in `log`; fail the benchmark with its tail if it fails."""
    with log.open("ab") as out:
        code = subprocess.run(command, env=env, cwd=ROOT, stdout=out, stderr=out, check=False)
    if code.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        pytest.fail(f"{' '.join(command[:4])} failed ({code.returncode}):\n{tail}")


def machine() -> dict[str, Any]:
    cpu = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        cpu = found.group(1).strip() if found else ""
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


@dataclass
class Gunicorn:
    """gunicorn with the production configuration, in `workers` sync workers on a free port."""

    name: str
    env: dict[str, str]
    log: Path
    ready_path: str
    workers: int = 2
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            sys.executable, "-m", "gunicorn", "--config", "deploy/gunicorn_production.py",
            "--bind", f"127.0.0.1:{self.port}", "--worker-class", "sync",
            "--workers", str(self.workers), "--threads", "1", "--max-requests", "0",
        ]  # fmt: skip
        out = self.log.open("ab")
        self.process = subprocess.Popen(command, env=self.env, cwd=ROOT, stdout=out, stderr=out)
        url = f"http://127.0.0.1:{self.port}{self.ready_path}"

        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                tail = self.log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"gunicorn ({self.name}) exited at start-up:\n{tail}")
            try:
                return requests.get(url, timeout=2).status_code == 200
            except requests.RequestException:
                return False

        wait_for(up, what=f"gunicorn ({self.name})", timeout=60)
        # gunicorn turns sync workers into gthread ones when given threads: make sure.
        assert "Using worker: sync" in self.log.read_text(errors="replace")

    def workers_rss_mib(self, field: str = "VmRSS") -> list[float]:
        """The resident memory of each worker process now, in MiB; with field="VmHWM", the
        most it has had since it started (its peak RSS)."""
        return list(self.workers_memory_mib(field).values())

    def workers_memory_mib(self, field: str = "VmRSS") -> dict[int, float]:
        """`field` of /proc/<pid>/status (VmRSS, VmHWM) of each worker process, in MiB."""
        if self.process is None:
            return {}
        sizes = {}
        for children in Path(f"/proc/{self.process.pid}/task").glob("*/children"):
            for pid in children.read_text().split():
                status = Path(f"/proc/{pid}/status")
                found = (
                    re.search(rf"{field}:\s+(\d+) kB", status.read_text())
                    if status.exists()
                    else None
                )
                if found:
                    sizes[int(pid)] = int(found.group(1)) / 1024
        return sizes

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def served(*servers: Gunicorn) -> Iterator[None]:
    try:
        for server in servers:
            server.start()
        yield
    finally:
        for server in servers:
            server.stop()


def portal_and_baselines(env: dict[str, str], logs: Path) -> tuple[Gunicorn, Gunicorn]:
    """The portal and the baselines, each in its own gunicorn, on the database of `env`."""
    served_env = {
        **env,
        "DATABASE_CONN_MAX_AGE": "60",
        "PORTAL_API_RATE_TOKEN": "100000/s",
        "PORTAL_API_RATE_USER": "100000/s",
    }
    portal = Gunicorn(
        "portal",
        {**served_env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        logs / "portal.log",
        "/healthz",
    )
    baselines = Gunicorn(
        "baselines",
        {**served_env, "DJANGO_SETTINGS_MODULE": "tests.bench.baseline_settings"},
        logs / "baselines.log",
        "/bench/bare",
    )
    return portal, baselines


def baseline_targets(database_url: str, port: int) -> tuple[load.Target, load.Target]:
    """The bare view, and the DRF view reading the first tenant's audit events."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT id FROM tenants_tenant ORDER BY slug LIMIT 1").fetchone()
    assert row is not None
    bare = load.Target(port=port, path="/bench/bare")
    drf = load.Target(port=port, path=f"/bench/drf?tenant={row[0]}")
    return bare, drf


@dataclass
class Measured:
    """One scenario in one round, with the baselines measured just before it."""

    throughput: load.Throughput
    latency: load.Latency
    bare: float = 0.0
    drf: float = 0.0


def measure(target: load.Target, *, seconds: float, warm: int = 2) -> Measured:
    """One client alone (up to 200 requests), then BASELINE_CLIENTS at once."""
    one = load.latency(target, requests=200 + warm, seconds=seconds)
    one.samples_ms = one.samples_ms[warm:]
    many = load.throughput(target, clients=BASELINE_CLIENTS, seconds=seconds)
    return Measured(throughput=many, latency=one)
