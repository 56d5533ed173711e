"""Throwaway PostgreSQL, Redis and Prometheus servers on free loopback ports.

Used by the test command (`python -m tests.harness`) for the whole run, and by tests that need
a server of their own to stop and start (the readiness test stops its own PostgreSQL).
Each server lives in a temporary directory that is removed when it stops.
"""

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

import requests


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(check: Callable[[], bool], *, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not become ready within {timeout:.0f} s")


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def postgres_bin_dir() -> Path | None:
    """The newest PostgreSQL server binaries Debian installed, if any."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    return candidates[-1].parent if candidates else None


class Server:
    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class PostgresServer(Server):
    """A PostgreSQL cluster with trust authentication for `postgres` on 127.0.0.1.

    PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user
    and its commands run through runuser.
    """

    def __init__(self) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.bin_dir = bin_dir
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="portal-pg-"))
        self.data_dir = self.directory / "data"
        self._initialised = False

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run(
            [*prefix, str(self.bin_dir / command[0]), *command[1:]],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=self.directory,
        )

    def start(self) -> None:
        if not self._initialised:
            if os.geteuid() == 0:
                user = pwd.getpwnam("postgres")
                os.chown(self.directory, user.pw_uid, user.pw_gid)
            self._run(
                "initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                "-E", "UTF8", "--no-sync", "--no-instructions",
            )  # fmt: skip
            self._initialised = True
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.directory} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data_dir), "-l", str(self.directory / "server.log"),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def pause(self) -> None:
        """Stop the server but keep its data, to start it again with start()."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        if self._initialised and (self.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


class _ProcessServer(Server):
    """A server run as a child process, stopped with SIGTERM (then SIGKILL)."""

    name = "server"

    def __init__(self) -> None:
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix=f"portal-{self.name}-"))
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        return _port_open(self.port)

    def start(self) -> None:
        log = (self.directory / "server.log").open("wb")
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.directory
        )

        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                output = (self.directory / "server.log").read_text(errors="replace")
                raise RuntimeError(f"{self.name} exited at start-up:\n{output[-2000:]}")
            return self.ready()

        wait_for(up, what=self.name)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


class RedisServer(_ProcessServer):
    name = "redis"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        return [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.directory),
        ]  # fmt: skip


class PrometheusServer(_ProcessServer):
    """Prometheus scraping, every second, the tests' DCGM-like exporter on `exporter_port`."""

    name = "prometheus"

    def __init__(self, *, exporter_port: int) -> None:
        super().__init__()
        self.exporter_port = exporter_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        config = self.directory / "prometheus.yml"
        config.write_text(
            "global:\n"
            "  scrape_interval: 1s\n"
            "  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: dcgm-exporter\n"
            "    honor_labels: true\n"
            "    static_configs:\n"
            f"      - targets: ['127.0.0.1:{self.exporter_port}']\n"
        )
        return [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
        ]

    def ready(self) -> bool:
        try:
            return requests.get(f"{self.url}/-/ready", timeout=0.5).status_code == 200
        except requests.RequestException:
            return False
