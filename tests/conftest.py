"""Fixtures shared by the whole suite: the people, and the real services the tests run against.

The services themselves (PostgreSQL, Redis, Prometheus) are started by the test command,
`make test` (tests/harness), which passes their addresses in the environment.
"""

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
import redis as redis_lib
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.conf import settings
from django.db import connections
from django.test import Client
from django.utils import timezone, translation
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from portal import celery_app
from portal.accounts.models import GlobalRole, User
from portal.accounts.services import user_create
from portal.catalog.models import Offering
from portal.catalog.presets import catalog_presets_load
from portal.core.pagination import beyond_estimates
from tenants.models import MemberRole, Tenant
from tenants.services import membership_set, quota_set, tenant_create, tenant_update
from tests.cluster.fixtures import live_cluster  # noqa: F401  (a cluster on the emulator)
from tests.keycloak.fixtures import keycloak_api  # noqa: F401  (the Keycloak admin API double)
from tests.kubeapi.fixtures import kube_api  # noqa: F401  (the Kubernetes API emulator fixture)
from tests.oidc.fixtures import keycloak_issuer, mock_provider  # noqa: F401  (SSO in the tests)

PASSWORD = "correct-horse-battery-staple"


def pytest_configure(config: pytest.Config) -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        pytest.exit(
            f"The tests run on PostgreSQL, but DATABASE_URL gives {engine}. "
            "Run them with `make test` (ARGS='...' passes arguments to pytest).",
            returncode=2,
        )


@pytest.fixture(autouse=True)
def _no_language_or_zone_left_over() -> Iterator[None]:
    """Each test starts in the default language and time zone: a request in Chinese (or a
    person's saved zone) leaves them active in the thread, and a service called next by another
    test would word its messages in them."""
    translation.deactivate()
    timezone.deactivate()
    yield
    translation.deactivate()
    timezone.deactivate()


@pytest.fixture(autouse=True)
def _no_table_estimate_left_over() -> Iterator[None]:
    """No whole table's estimate kept by this process (`beyond_estimates`) from another test:
    the tables each test fills are emptied after it, and a list would say "10,000+" of them
    for a minute more."""
    beyond_estimates.clear()
    yield
    beyond_estimates.clear()


@pytest.fixture
def unthrottled(settings: Any) -> None:
    """API rates far above what a test sends, for tests that drive hundreds of calls as one
    caller: they are about the answers; the rate limits are tested on their own."""
    rates = dict.fromkeys(("token", "user", "anon"), "100000/min")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}


# People. Tenant A has a developer and a lead; the outsider is a developer in tenant B.


@pytest.fixture
def tenant_a(db: None) -> Tenant:
    return tenant_create(
        actor=None, slug="vision", name="Computer Vision Lab", cost_centre="CC-4100"
    )


@pytest.fixture
def tenant_b(db: None) -> Tenant:
    return tenant_create(actor=None, slug="nlp", name="Language Models Team", cost_centre="CC-4200")


def _person(username: str, global_role: GlobalRole = GlobalRole.NONE) -> User:
    return user_create(
        actor=None,
        username=username,
        email=f"{username}@example.org",
        first_name=username.capitalize(),
        last_name="Tester",
        password=PASSWORD,
        global_role=global_role,
    )


@pytest.fixture
def developer(tenant_a: Tenant) -> User:
    user = _person("dev")
    membership_set(actor=None, tenant=tenant_a, user=user, role=MemberRole.DEVELOPER)
    return user


@pytest.fixture
def lead(tenant_a: Tenant) -> User:
    user = _person("lead")
    membership_set(actor=None, tenant=tenant_a, user=user, role=MemberRole.LEAD)
    return user


@pytest.fixture
def outsider(tenant_b: Tenant) -> User:
    user = _person("outsider")
    membership_set(actor=None, tenant=tenant_b, user=user, role=MemberRole.DEVELOPER)
    return user


@pytest.fixture
def finance_user(db: None) -> User:
    return _person("finance", GlobalRole.FINANCE)


@pytest.fixture
def admin_user(db: None) -> User:
    return _person("admin", GlobalRole.ADMIN)


@pytest.fixture
def client_for() -> Callable[[User], Client]:
    """A test client signed in as the given user."""

    def make(user: User) -> Client:
        client = Client()
        client.force_login(user)
        return client

    return make


# The GPU catalog presets, and tenant A with an A100 quota.


@pytest.fixture
def catalog(db) -> dict[str, Offering]:
    catalog_presets_load(actor=None)
    return {offering.slug: offering for offering in Offering.objects.select_related("gpu_model")}


@pytest.fixture
def a100_tenant(tenant_a: Tenant, admin_user, catalog) -> Tenant:
    """Tenant A with 10 A100-80GB GPU-eq, auto-approving up to 1 GPU-eq for 8 hours."""
    quota_set(
        actor=admin_user, tenant=tenant_a, gpu_model=catalog["a100-80gb-whole"].gpu_model, gpu_eq=10
    )
    return tenant_update(
        actor=admin_user, tenant=tenant_a, auto_approve_gpu_eq="1", auto_approve_hours=8
    )


# Redis and a real Celery worker consuming from it.


@pytest.fixture
def redis_client() -> Iterator[redis_lib.Redis]:
    client = redis_lib.Redis.from_url(os.environ["REDIS_URL"])
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def celery_worker(
    transactional_db: None, django_db_blocker: Any, redis_client: redis_lib.Redis
) -> Iterator[Any]:
    """A real Celery worker (solo pool, in a thread) consuming tasks from the test Redis."""
    assert not celery_app.conf.task_always_eager, "the tests must send tasks through Redis"

    def close_worker_connections(**_: Any) -> None:
        # The worker thread's own connections would outlive the test database otherwise.
        connections.close_all()

    task_postrun.connect(close_worker_connections, weak=False, dispatch_uid="test-close-db")
    try:
        with (
            django_db_blocker.unblock(),
            start_worker(
                celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=30
            ) as worker,
        ):
            yield worker
    finally:
        task_postrun.disconnect(dispatch_uid="test-close-db")


@pytest.fixture
def tasks_in_process() -> Iterator[None]:
    """Run tasks at once in the test's thread, as the embedded mode does (no worker needed)."""
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


def wait_until(check: Callable[[], Any], *, timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `check` until it returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


# Prometheus, scraping a DCGM-like exporter that the tests feed.


@dataclass
class DcgmExporter:
    """Gauges with the DCGM exporter's metric names and labels (Kubernetes pod mapping on), and
    Jupyter's last-activity gauge as Prometheus sees it once its Kubernetes service discovery
    has attached the notebook pod's namespace and name."""

    gpu_util: Gauge
    fb_used: Gauge
    engine_active: Gauge
    last_activity: Gauge

    LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "namespace", "pod", "container")
    JUPYTER_LABELS = ("namespace", "pod")

    def set_gpu(
        self,
        *,
        pod: str,
        namespace: str,
        util_percent: float,
        fb_used_mib: float = 0,
        gpu: str = "0",
        uuid: str = "GPU-00000000-0000-0000-0000-000000000000",
        model: str = "NVIDIA A100-SXM4-80GB",
        hostname: str = "gpu-node-1",
    ) -> None:
        labels = {
            "gpu": gpu,
            "UUID": uuid,
            "device": f"nvidia{gpu}",
            "modelName": model,
            "Hostname": hostname,
            "namespace": namespace,
            "pod": pod,
            "container": "notebook",
        }
        self.gpu_util.labels(**labels).set(util_percent)
        self.fb_used.labels(**labels).set(fb_used_mib)
        self.engine_active.labels(**labels).set(util_percent / 100)

    def set_kernel_activity(self, *, pod: str, namespace: str, at: datetime) -> None:
        """The notebook server in `pod` last saw activity (a kernel, a terminal, an API call)
        at `at`: Jupyter's `jupyter_server_last_activity_timestamp_seconds`."""
        self.last_activity.labels(namespace=namespace, pod=pod).set(at.timestamp())


@pytest.fixture(scope="session")
def dcgm_exporter() -> DcgmExporter:
    """Served on the port the test command told Prometheus to scrape, once per session."""
    registry = CollectorRegistry()

    def gauge(name: str, documentation: str) -> Gauge:
        return Gauge(name, documentation, DcgmExporter.LABELS, registry=registry)

    exporter = DcgmExporter(
        gpu_util=gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
        fb_used=gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
        engine_active=gauge("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the engine is active."),
        last_activity=Gauge(
            "jupyter_server_last_activity_timestamp_seconds",
            "Timestamp of last seen activity on this Jupyter Server",
            DcgmExporter.JUPYTER_LABELS,
            registry=registry,
        ),
    )
    start_http_server(
        int(os.environ["TEST_DCGM_EXPORTER_PORT"]), addr="127.0.0.1", registry=registry
    )
    return exporter


# Chromium, driven by Playwright, against pytest-django's live server.


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {
        **browser_type_launch_args,
        "executable_path": os.environ.get("TEST_CHROMIUM", "/usr/bin/chromium"),
        "args": [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
        ],
    }  # fmt: skip


# An OpenID Connect provider, running in a thread of the test process.


@pytest.fixture
def oidc_provider() -> Iterator[str]:
    """The issuer URL of a real OIDC provider (oidc-provider-mock) on a free loopback port."""
    from oidc_provider_mock import run_server_in_thread  # noqa: PLC0415  (dev-only dependency)

    with run_server_in_thread(port=0) as server:
        yield f"http://localhost:{server.server_port}"


# The closing summary: which real services the passing tests used.

REAL_SERVICES = {
    "PostgreSQL": {"db", "transactional_db", "live_server"},
    "Redis + a Celery worker": {"celery_worker"},
    "Prometheus (DCGM-like exporter)": {"dcgm_exporter"},
    "Prometheus on promtool-backfilled history": {"history_prometheus"},
    "Chromium (Playwright)": {"page"},
    "OpenID Connect provider": {"oidc_provider"},
    "the demo's own server (gunicorn on SQLite)": {"demo"},
}
_fixtures_by_test: dict[str, set[str]] = {}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        _fixtures_by_test[item.nodeid] = set(getattr(item, "fixturenames", ()))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    passed = [report.nodeid for report in terminalreporter.stats.get("passed", [])]
    terminalreporter.section("real services used by passing tests")
    for service, fixtures in REAL_SERVICES.items():
        users = [nodeid for nodeid in passed if _fixtures_by_test.get(nodeid, set()) & fixtures]
        example = f", e.g. {users[0]}" if users else ""
        terminalreporter.write_line(f"{service}: {len(users)} tests{example}")
