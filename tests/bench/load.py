"""The load `make bench` sends: plain HTTP/1.1 GETs (and POSTs with a JSON body) over loopback,
one connection per request (gunicorn's sync workers close each connection after answering),
from threads of this process.

Two measures per scenario: the throughput of `clients` concurrent clients over a fixed time,
and the latency of one client alone. Under load each request's time is kept too, for the
latency of the decisions benchmark's clients, which all send at once. A Python client costs
CPU on the same two cores as the server; what it used is measured (`client_cpu`, in cores)
and reported beside each result.
"""

import os
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Target:
    """One URL on one server, with the headers that authenticate it; a POST when it has a
    JSON body."""

    port: int
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def request(self) -> bytes:
        method = "POST" if self.body else "GET"
        lines = [
            f"{method} {self.path} HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            "Connection: close",
        ]
        lines += [f"{name}: {value}" for name, value in self.headers]
        if self.body:
            lines += ["Content-Type: application/json", f"Content-Length: {len(self.body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + self.body


def fetch(port: int, request: bytes) -> tuple[int, bytes]:
    """Send one request; the status code and the whole response (read until the server closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            data = sock.recv(262_144)
            if not data:
                break
            chunks.append(data)
    response = b"".join(chunks)
    if not response.startswith(b"HTTP/1."):
        return 0, response
    return int(response[9:12]), response


@dataclass
class Throughput:
    clients: int
    seconds: float
    completed: int
    statuses: Counter[int]
    errors: list[str]
    client_cpu: float  # cores the client itself used meanwhile
    load_average: float  # the 1-minute load average when it started
    samples_ms: list[float] = field(default_factory=list)  # each request's time, under load

    @property
    def per_second(self) -> float:
        return self.completed / self.seconds if self.seconds else 0.0


@dataclass
class Latency:
    samples_ms: list[float]
    statuses: Counter[int]
    errors: list[str]
    load_average: float

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.samples_ms)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]

    @property
    def median(self) -> float:
        return statistics.median(self.samples_ms) if self.samples_ms else float("nan")


@dataclass
class _Worker:
    completed: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    last_finish: float = 0.0
    samples_ms: list[float] = field(default_factory=list)


def throughput(target: Target, *, clients: int, seconds: float) -> Throughput:
    """`clients` threads send requests back to back for `seconds`; requests under way at the
    end are waited for and counted, and the time runs until the last one answered."""
    request = target.request()
    return throughput_of([[request]] * clients, port=target.port, seconds=seconds)


def throughput_of(
    requests: Sequence[Sequence[bytes]],
    *,
    port: int,
    seconds: float,
    seen: Callable[[int, bytes], None] | None = None,
) -> Throughput:
    """As `throughput`, with one client per item of `requests`, each sending its own requests
    in turn, round and round; `seen(status, response)` is called with every answer."""
    clients = len(requests)
    workers = [_Worker() for _ in range(clients)]
    load_average = os.getloadavg()[0]
    started = time.perf_counter()
    deadline = started + seconds

    def run(worker: _Worker, mine: Sequence[bytes]) -> None:
        sent = 0
        while (began := time.perf_counter()) < deadline:
            request = mine[sent % len(mine)]
            sent += 1
            try:
                status, response = fetch(port, request)
            except OSError as error:
                worker.errors.append(repr(error))
                continue
            worker.statuses[status] += 1
            worker.completed += 1
            worker.last_finish = time.perf_counter()
            worker.samples_ms.append((worker.last_finish - began) * 1000)
            if seen is not None:
                seen(status, response)

    cpu_before = time.process_time()
    threads = [
        threading.Thread(target=run, args=(worker, mine))
        for worker, mine in zip(workers, requests, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu = time.process_time() - cpu_before
    finished = max((worker.last_finish for worker in workers), default=started)
    elapsed = max(finished - started, 1e-9)
    statuses: Counter[int] = Counter()
    for worker in workers:
        statuses.update(worker.statuses)
    return Throughput(
        clients=clients,
        seconds=elapsed,
        completed=sum(worker.completed for worker in workers),
        statuses=statuses,
        errors=[error for worker in workers for error in worker.errors][:5],
        client_cpu=cpu / (time.perf_counter() - started),
        load_average=load_average,
        samples_ms=[ms for worker in workers for ms in worker.samples_ms],
    )


def latency(target: Target, *, requests: int, seconds: float, at_least: int = 10) -> Latency:
    """One client alone: up to `requests` requests one after the other, stopping after
    `seconds` once `at_least` were sent."""
    request = target.request()
    samples: list[float] = []
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    load_average = os.getloadavg()[0]
    deadline = time.perf_counter() + seconds
    for sent in range(requests):
        if sent >= at_least and time.perf_counter() > deadline:
            break
        began = time.perf_counter()
        try:
            status, _body = fetch(target.port, request)
        except OSError as error:
            errors.append(repr(error))
            continue
        samples.append((time.perf_counter() - began) * 1000)
        statuses[status] += 1
    return Latency(samples_ms=samples, statuses=statuses, errors=errors, load_average=load_average)
