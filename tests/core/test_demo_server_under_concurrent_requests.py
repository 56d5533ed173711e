"""The embedded default (`make demo`: gunicorn with threads on SQLite) under concurrent clients.

Against the demo's own server configuration, not the test database: SQLite must queue writers
(IMMEDIATE transactions, WAL, a busy timeout) rather than answer 500 "database is locked".
"""

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.demo.server import DemoServer, demo_server

CLIENTS = 16


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    with demo_server(Path(tmp_path_factory.mktemp("demo"))) as server:
        yield server


def post_concurrently(
    demo: DemoServer, bodies: list[dict[str, Any]], headers: dict[str, str] | None = None
) -> list[requests.Response]:
    """POST each body to /api/v1/requests/ from CLIENTS threads, released together."""
    clients = min(CLIENTS, len(bodies))
    start = threading.Barrier(clients)
    local = threading.local()

    def post(body: dict[str, Any]) -> requests.Response:
        if not hasattr(local, "session"):
            local.session = requests.Session()
            local.session.headers["Authorization"] = f"Bearer {demo.token}"
            start.wait(timeout=30)
        session: requests.Session = local.session
        return session.post(f"{demo.url}/api/v1/requests/", json=body, headers=headers, timeout=60)

    with ThreadPoolExecutor(max_workers=clients) as pool:
        return list(pool.map(post, bodies))


def requests_of(demo: DemoServer, tenant: str) -> list[dict[str, Any]]:
    response = requests.get(
        f"{demo.url}/api/v1/requests/",
        params={"tenant": tenant, "page_size": "500"},
        headers={"Authorization": f"Bearer {demo.token}"},
        timeout=30,
    )
    assert response.status_code == 200
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_fifty_concurrent_requests_for_ten_gpus_give_ten_approvals_and_forty_conflicts(
    demo: DemoServer,
) -> None:
    body = {"tenant": "vision", "offering": "a100-80gb-whole", "count": 1, "duration_hours": 4}

    responses = post_concurrently(demo, [body] * 50)

    statuses = Counter(response.status_code for response in responses)
    assert statuses == {201: 10, 409: 40}, [r.text[:300] for r in responses if r.status_code >= 500]
    approved = [r.json() for r in responses if r.status_code == 201]
    assert {answer["state"] for answer in approved} == {"approved"}
    refused = [r.json()["error"]["code"] for r in responses if r.status_code == 409]
    assert set(refused) == {"quota_exceeded"}
    on_record = Counter(gpu_request["state"] for gpu_request in requests_of(demo, "vision"))
    assert on_record["rejected"] == 40
    assert on_record["approved"] + on_record["active"] == 10  # provisioned in dry-run, or not yet
    assert on_record.total() == 50


def test_ten_concurrent_retries_with_one_idempotency_key_create_one_request(
    demo: DemoServer,
) -> None:
    body = {"tenant": "nlp", "offering": "a100-80gb-whole", "count": 2, "duration_hours": 4}

    responses = post_concurrently(demo, [body] * 10, headers={"Idempotency-Key": "retry-1"})

    assert [response.status_code for response in responses] == [201] * 10
    assert len({response.json()["id"] for response in responses}) == 1
    replayed = [response.headers.get("Idempotent-Replayed") for response in responses]
    assert replayed.count("true") == 9
    assert len(requests_of(demo, "nlp")) == 1


def test_the_demo_server_runs_the_periodic_tasks_in_process(demo: DemoServer) -> None:
    log = demo.log_text()

    assert "in-process scheduler started: worker-heartbeat, expire-allocations" in log
    assert "resume-provisioning-runs" in log
    assert "not registered" not in log
