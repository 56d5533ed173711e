"""Stopping idle notebooks: the pure decision, then whole culling periods against the real
Prometheus (scraping the tests' DCGM-like exporter and Jupyter's last-activity gauge) with the
notebooks' pods in the Kubernetes API emulator."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from portal.accounts.models import User
from portal.catalog.models import Offering
from portal.cluster.models import Cluster, ProvisioningRun, RunKind, RunState
from portal.core.models import AuditEvent
from portal.metering.prometheus import prometheus_gateway
from portal.workloads.culling import (
    Activity,
    CullDecision,
    Verdict,
    cull_decision,
    cull_safely,
    notebooks_cull,
)
from portal.workloads.models import Desired, Notebook, NotebookState
from portal.workloads.services import cull_notice_send, notebook_snooze, notebooks_observe
from tenants.models import Tenant
from tenants.services import tenant_update
from tests.cluster.fixtures import run_queued
from tests.conftest import DcgmExporter, wait_until
from tests.harness.services import free_port
from tests.kubeapi.server import KubeApiEmulator
from tests.workloads.conftest import allocation_of, launch

NAMESPACE = "t-vision"
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LIMIT = 60  # the tenant's notebook_idle_minutes
NOTICE = 15  # PORTAL_CULL_NOTICE_MINUTES
THRESHOLD = 5  # PORTAL_CULL_GPU_UTIL_PERCENT


def minutes(count: float) -> timedelta:
    return timedelta(minutes=count)


# The decision, as a pure function.


def notebook(**fields: object) -> Notebook:
    """A notebook running for three hours, not saved: the decision reads only its fields."""
    values: dict[str, object] = {
        "state": NotebookState.RUNNING,
        "running_since": NOW - minutes(180),
    }
    return Notebook(**(values | fields))


def decide(
    subject: Notebook,
    *,
    util: str | None = "0",
    kernel: datetime | None = None,
    now: datetime = NOW,
) -> CullDecision:
    return cull_decision(
        now=now,
        notebook=subject,
        activity=Activity(
            gpu_util_max=None if util is None else Decimal(util), last_kernel_activity=kernel
        ),
        idle_minutes=LIMIT,
        notice_minutes=NOTICE,
        threshold_percent=THRESHOLD,
    )


def remembered(subject: Notebook, decision: CullDecision) -> Notebook:
    """The notebook as the next period reads it: the decision's idle time kept, as culling
    keeps it (and the notice with it)."""
    subject.idle_since = decision.idle_since
    if decision.verdict == Verdict.NOTICE:
        subject.cull_notice_at, subject.cull_at = NOW, decision.cull_at
    if decision.verdict == Verdict.BUSY:
        subject.cull_notice_at = subject.cull_at = None
    return subject


def test_without_any_metric_a_notebook_is_left_as_it_is():
    noticed = notebook(idle_since=NOW - minutes(120), cull_notice_at=NOW, cull_at=NOW)

    decision = decide(noticed, util=None, kernel=None, now=NOW + minutes(60))

    assert decision == CullDecision(Verdict.NO_DATA, NOW - minutes(120), NOW)


@pytest.mark.parametrize("util", ["5", "80", "100"])
def test_a_busy_gpu_is_busy_whatever_the_kernel_says(util):
    noticed = notebook(idle_since=NOW - minutes(120), cull_notice_at=NOW, cull_at=NOW)

    decision = decide(noticed, util=util, kernel=NOW - minutes(120))

    assert decision.verdict == Verdict.BUSY
    assert decision.cull_at is None


def test_a_gpu_below_the_threshold_with_no_kernel_metric_is_idle_since_it_started():
    decision = decide(notebook(), util="4.9", kernel=None)

    assert decision.verdict == Verdict.NOTICE
    assert decision.idle_since == NOW - minutes(180)


def test_a_quiet_kernel_without_gpu_numbers_proves_nothing():
    # No DCGM series for the pod (some shared GPUs): a job may run from a terminal.
    decision = decide(notebook(), util=None, kernel=NOW - minutes(120))

    assert decision.verdict == Verdict.NO_DATA


@pytest.mark.parametrize(
    ("idle_for", "verdict"),
    [(10, Verdict.IDLE), (44, Verdict.IDLE), (45, Verdict.NOTICE), (120, Verdict.NOTICE)],
)
def test_the_owner_is_told_once_idle_for_the_limit_less_the_notice(idle_for, verdict):
    decision = decide(notebook(), kernel=NOW - minutes(idle_for))

    assert decision.verdict == verdict
    assert decision.idle_since == NOW - minutes(idle_for)
    if verdict == Verdict.NOTICE:
        # max(idle since + limit, now + notice): never less notice than promised.
        assert decision.cull_at == max(
            NOW - minutes(idle_for) + minutes(LIMIT), NOW + minutes(NOTICE)
        )
        assert decision.cull_at == NOW + minutes(NOTICE)
    else:
        assert decision.cull_at is None


def test_a_notice_shorter_than_the_limit_still_gives_the_whole_notice():
    decision = cull_decision(
        now=NOW,
        notebook=notebook(),
        activity=Activity(gpu_util_max=Decimal(0), last_kernel_activity=NOW - minutes(1)),
        idle_minutes=10,
        notice_minutes=NOTICE,
        threshold_percent=THRESHOLD,
    )

    assert decision == CullDecision(Verdict.NOTICE, NOW - minutes(1), NOW + minutes(NOTICE))


def test_still_idle_at_the_end_of_the_notice_it_is_stopped():
    idle_since = NOW - minutes(120)
    noticed = notebook(idle_since=idle_since, cull_notice_at=NOW, cull_at=NOW + minutes(NOTICE))

    during = decide(noticed, kernel=idle_since, now=NOW + minutes(NOTICE - 1))
    after = decide(noticed, kernel=idle_since, now=NOW + minutes(NOTICE))

    assert during == CullDecision(Verdict.IDLE, idle_since, NOW + minutes(NOTICE))
    assert after == CullDecision(Verdict.STOP, idle_since, NOW + minutes(NOTICE))


def test_activity_after_the_notice_drops_it():
    noticed = notebook(
        idle_since=NOW - minutes(120), cull_notice_at=NOW, cull_at=NOW + minutes(NOTICE)
    )

    decision = decide(noticed, kernel=NOW + minutes(5), now=NOW + minutes(NOTICE + 1))

    assert decision == CullDecision(Verdict.BUSY, NOW + minutes(5))


def test_a_snoozed_notebook_is_not_noticed_until_the_snooze_ends_plus_the_limit_less_the_notice():
    snoozed_until = NOW + minutes(120)
    snoozed = notebook(snoozed_until=snoozed_until)
    long_idle = NOW - minutes(120)

    for now in (NOW, snoozed_until, snoozed_until + minutes(LIMIT - NOTICE - 1)):
        decision = decide(snoozed, kernel=long_idle, now=now)
        assert decision == CullDecision(Verdict.IDLE, snoozed_until), now
    decision = decide(snoozed, kernel=long_idle, now=snoozed_until + minutes(LIMIT - NOTICE))
    assert decision == CullDecision(Verdict.NOTICE, snoozed_until, snoozed_until + minutes(LIMIT))


def test_recent_kernel_activity_keeps_an_idle_gpu_from_being_noticed():
    decision = decide(notebook(), util="0", kernel=NOW - minutes(10))

    assert decision == CullDecision(Verdict.IDLE, NOW - minutes(10))


def test_idleness_after_a_busy_gpu_counts_from_the_busy_period_not_from_the_start():
    # Three hours of training, the kernel silent meanwhile; the GPU went quiet just now.
    subject = notebook()
    busy = decide(subject, util="90", kernel=NOW - minutes(170), now=NOW - minutes(5))
    assert busy.verdict == Verdict.BUSY
    subject = remembered(subject, busy)

    quiet = decide(subject, util="0", kernel=NOW - minutes(170), now=NOW)
    assert quiet.verdict == Verdict.IDLE
    subject = remembered(subject, quiet)

    later = NOW - minutes(5) + minutes(LIMIT - NOTICE)
    noticed = decide(subject, util="0", kernel=NOW - minutes(170), now=later)
    assert noticed == CullDecision(Verdict.NOTICE, NOW - minutes(5), later + minutes(NOTICE))


# Whole culling periods against Prometheus and the emulator.


def pod_of(subject: Notebook) -> str:
    return f"{subject.kubernetes_name}-0"


def refreshed(subject: Notebook) -> Notebook:
    return Notebook.objects.get(pk=subject.pk)


def running_for_three_hours(
    kube_api: KubeApiEmulator,
    cluster: Cluster,
    owner: User,
    tenant: Tenant,
    offering: Offering,
    names: list[str],
) -> list[Notebook]:
    """Notebooks launched, applied, their pods running and observed, started 3 hours ago."""
    launched = [launch(owner, allocation_of(owner, tenant, offering), name=name) for name in names]
    run_queued(tenant)
    kube_api.reconcile_statefulsets()
    for subject in launched:
        kube_api.set_pod_running(NAMESPACE, pod_of(subject))
    assert notebooks_observe(cluster=cluster) == len(launched)
    Notebook.objects.filter(pk__in=[subject.pk for subject in launched]).update(
        running_since=timezone.now() - timedelta(hours=3)
    )
    running = [refreshed(subject) for subject in launched]
    assert [subject.state for subject in running] == [NotebookState.RUNNING] * len(running)
    return running


def scraped(pods: list[str]) -> bool:
    """Prometheus has both metrics of every one of `pods`."""
    gateway = prometheus_gateway()
    selector = f'{{pod=~"{"|".join(pods)}"}}'
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "jupyter_server_last_activity_timestamp_seconds"):
        if {sample.labels["pod"] for sample in gateway.query(metric + selector)} != set(pods):
            return False
    return True


def cull_audit(subject: Notebook) -> list[str]:
    return list(
        AuditEvent.objects.filter(
            target_type="workloads.notebook",
            target_id=str(subject.pk),
            action__in=("notebook.cull_notice", "notebook.cull"),
        )
        .order_by("pk")
        .values_list("action", flat=True)
    )


@pytest.fixture
def idle_hour_tenant(gpu_tenant: Tenant, admin_user: User) -> Tenant:
    return tenant_update(actor=admin_user, tenant=gpu_tenant, notebook_idle_minutes=LIMIT)


def test_an_idle_notebook_is_noticed_then_stopped_and_busy_or_snoozed_ones_are_not(
    live_cluster,
    kube_api,
    idle_hour_tenant,
    developer,
    catalog,
    dcgm_exporter: DcgmExporter,
    mailoutbox,
):
    assert settings.PORTAL_CULL_NOTICE_MINUTES == NOTICE
    idle, busy, snoozed = running_for_three_hours(
        kube_api,
        live_cluster,
        developer,
        idle_hour_tenant,
        catalog["a100-80gb-whole"],
        ["idle", "busy", "snoozed"],
    )
    t0 = timezone.now()
    two_hours_ago = (t0 - timedelta(hours=2)).replace(microsecond=0)
    for subject, util in ((idle, 0), (busy, 80), (snoozed, 0)):
        dcgm_exporter.set_gpu(pod=pod_of(subject), namespace=NAMESPACE, util_percent=util)
        dcgm_exporter.set_kernel_activity(
            pod=pod_of(subject), namespace=NAMESPACE, at=two_hours_ago
        )
    snoozed = notebook_snooze(actor=developer, notebook=snoozed)
    assert snoozed.snoozed_until is not None
    wait_until(
        lambda: scraped([pod_of(subject) for subject in (idle, busy, snoozed)]),
        timeout=30,
        what="Prometheus to scrape the three notebooks' metrics",
    )

    counts = notebooks_cull(now=t0)

    assert counts == {"no data": 0, "busy": 1, "idle": 1, "notice": 1, "stop": 0}
    idle = refreshed(idle)
    assert idle.idle_since == two_hours_ago
    assert idle.cull_at == t0 + minutes(NOTICE)
    assert idle.cull_notice_at is not None
    assert idle.state == NotebookState.RUNNING
    assert cull_audit(idle) == ["notebook.cull_notice"]
    assert cull_notice_send(notebook_id=idle.pk) == 1
    [mail] = mailoutbox
    assert mail.to == [developer.email]
    assert mail.subject == f"Notebook idle is idle and stops at {idle.cull_at:%Y-%m-%d %H:%M} UTC"
    assert f"/notebooks/{idle.pk}/" in mail.body
    assert "the workspace is kept" in mail.body
    for other in (refreshed(busy), refreshed(snoozed)):
        assert (other.cull_notice_at, other.cull_at) == (None, None)
        assert cull_audit(other) == []
    assert refreshed(snoozed).idle_since == snoozed.snoozed_until
    assert refreshed(busy).idle_since == t0  # the next idle stretch starts no earlier

    counts = notebooks_cull(now=t0 + minutes(NOTICE + 1))

    assert counts == {"no data": 0, "busy": 1, "idle": 1, "notice": 0, "stop": 1}
    idle = refreshed(idle)
    assert (idle.desired, idle.state) == (Desired.STOPPED, NotebookState.STOPPING)
    assert idle.reason == "Stopped after 136 minutes idle (workspace kept)."
    assert cull_audit(idle) == ["notebook.cull_notice", "notebook.cull"]
    assert AuditEvent.objects.get(target_id=str(idle.pk), action="notebook.cull").actor is None
    [run] = ProvisioningRun.objects.filter(notebook=idle, state=RunState.QUEUED)
    assert run.kind == RunKind.NOTEBOOK
    for other in (refreshed(busy), refreshed(snoozed)):
        assert (other.desired, other.state) == (Desired.RUNNING, NotebookState.RUNNING)

    [finished] = run_queued(idle_hour_tenant)
    assert finished.state == RunState.SUCCEEDED, finished.error
    stateful_set = kube_api.get_object("apps/v1", "StatefulSet", idle.kubernetes_name, NAMESPACE)
    assert stateful_set is not None
    assert stateful_set["spec"]["replicas"] == 0
    assert kube_api.get_object(
        "v1", "PersistentVolumeClaim", f"{idle.kubernetes_name}-workspace", NAMESPACE
    )
    kube_api.reconcile_statefulsets()
    assert kube_api.get_object("v1", "Pod", pod_of(idle), NAMESPACE) is None
    assert kube_api.get_object("v1", "Pod", pod_of(busy), NAMESPACE) is not None

    # The snooze over, the snoozed notebook is counted idle from its end.
    assert snoozed.snoozed_until is not None
    counts = notebooks_cull(now=snoozed.snoozed_until + minutes(LIMIT - NOTICE))
    assert counts == {"no data": 0, "busy": 1, "idle": 0, "notice": 1, "stop": 0}
    assert refreshed(snoozed).cull_at == snoozed.snoozed_until + minutes(LIMIT)


def test_a_notebook_prometheus_knows_nothing_about_is_left_alone(
    live_cluster, kube_api, idle_hour_tenant, developer, catalog, dcgm_exporter
):
    [unknown] = running_for_three_hours(
        kube_api, live_cluster, developer, idle_hour_tenant, catalog["a100-80gb-whole"], ["dark"]
    )
    assert prometheus_gateway().query(f'{{pod="{pod_of(unknown)}"}}') == []

    counts = notebooks_cull(now=timezone.now() + timedelta(days=1))

    assert counts == {"no data": 1, "busy": 0, "idle": 0, "notice": 0, "stop": 0}
    after = refreshed(unknown)
    assert (after.state, after.desired) == (NotebookState.RUNNING, Desired.RUNNING)
    assert (after.idle_since, after.cull_notice_at, after.cull_at) == (None, None, None)
    assert cull_audit(unknown) == []


def test_an_unreachable_prometheus_is_reported_and_nothing_changes(
    live_cluster, kube_api, idle_hour_tenant, developer, catalog, settings
):
    [subject] = running_for_three_hours(
        kube_api, live_cluster, developer, idle_hour_tenant, catalog["a100-80gb-whole"], ["nb"]
    )
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    runs = ProvisioningRun.objects.count()

    outcome = cull_safely(now=timezone.now() + timedelta(days=1))

    assert isinstance(outcome, str)
    assert "unreachable" in outcome
    after = refreshed(subject)
    assert (after.state, after.desired, after.reason) == (
        NotebookState.RUNNING,
        Desired.RUNNING,
        subject.reason,
    )
    assert (after.idle_since, after.cull_notice_at, after.cull_at) == (None, None, None)
    assert cull_audit(subject) == []
    assert ProvisioningRun.objects.count() == runs


def test_a_tenant_that_does_not_cull_is_never_culled_nor_asked_about(
    live_cluster, kube_api, gpu_tenant, admin_user, developer, catalog, settings
):
    [subject] = running_for_three_hours(
        kube_api, live_cluster, developer, gpu_tenant, catalog["a100-80gb-whole"], ["keep"]
    )
    tenant_update(actor=admin_user, tenant=gpu_tenant, notebook_idle_minutes=0)
    # Any query would fail: nothing listens there.
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"

    counts = notebooks_cull(now=timezone.now() + timedelta(days=30))

    assert counts == {"no data": 0, "busy": 0, "idle": 0, "notice": 0, "stop": 0}
    after = refreshed(subject)
    assert (after.state, after.desired) == (NotebookState.RUNNING, Desired.RUNNING)
    assert (after.idle_since, after.cull_notice_at, after.cull_at) == (None, None, None)
    assert cull_audit(subject) == []


def test_a_cull_decided_before_the_owner_snoozed_does_not_stop_it(
    live_cluster, kube_api, gpu_tenant, developer, catalog
):
    from portal.workloads.services import notebook_cull  # noqa: PLC0415

    notebook = launch(developer, allocation_of(developer, gpu_tenant, catalog["a100-80gb-whole"]))
    Notebook.objects.filter(pk=notebook.pk).update(
        state=NotebookState.RUNNING, cull_notice_at=timezone.now(), cull_at=timezone.now()
    )
    noticed = Notebook.objects.get(pk=notebook.pk)
    notebook_snooze(actor=developer, notebook=noticed)  # the owner acts in between
    assert not notebook_cull(notebook=noticed, noticed_at=noticed.cull_notice_at, reason="idle")
    assert Notebook.objects.get(pk=notebook.pk).desired == Desired.RUNNING
