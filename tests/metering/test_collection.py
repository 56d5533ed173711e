"""Collection against a real Prometheus holding known history (promtool-backfilled blocks).

The story, on cluster gpu-east (namespace prefix t-), from T0 (an hour boundary, days ago):
- the developer's notebook holds a whole A100 from T0+0:30 to T0+2:15 (ledger); its pod runs
  T0+0:40 to T0+2:10 at 50 % utilisation with 10 GiB of framebuffer;
- an allocation of a MIG 1g.10gb slice from T0+1:00 to T0+1:20 with no workload (reserved only);
- a kubectl job `train-mig` on a MIG 1g.10gb instance, T0+1:00 to T0+2:00, engine 70 % active;
- two pods `ts-a`, `ts-b` on one time-sliced GPU (1/4 shares), T0+1:00 to T0+2:00, the device
  80 % busy;
- a pod in `kube-system` (not a tenant's) on a whole GPU, T0+1:00 to T0+2:00, 20 % busy;
- a batch pod asking for two GPUs from T0+2:00 to T0+50:00, across two days, 100 % busy.
"""

import importlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.catalog.gpu_eq import gpu_eq_sum
from portal.catalog.models import GpuModel, Offering, SharingBackend
from portal.catalog.services import gpu_pool_create
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.core.validators import BIGINT_MAX
from portal.metering.collection import (
    daily_rollup,
    hour_floor,
    meter_cluster,
    metering_begin,
    window_collect,
)
from portal.metering.models import (
    COMMON_DENOMINATOR,
    MeteringState,
    UsageDaily,
    UsageModelDaily,
    UsageModelMonthly,
    UsageMonthly,
    UsageRecord,
    UsageWindow,
    UsageWorkloadDaily,
    WindowState,
    WorkloadKind,
)
from portal.metering.selectors import (
    UsageQuery,
    usage_regrouped,
    usage_totals,
    usage_watermarks,
)
from portal.metering.services import metrics_source_for
from portal.workloads.models import Notebook
from tenants.models import Tenant
from tenants.services import quota_set, tenant_update
from tests.metering.history import History, HistoryPrometheus
from tests.workloads.conftest import allocation_of, launch

H = timedelta(hours=1)
M = timedelta(minutes=1)
T0 = hour_floor(datetime.now(UTC)) - timedelta(days=4)
NAMESPACE = "t-vision"


def slug(thing: Offering | GpuModel | None) -> str | None:
    return thing.slug if thing is not None else None


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


@dataclass
class Story:
    cluster: Cluster
    prometheus: HistoryPrometheus
    notebook: Notebook
    notebook_allocation: GpuRequest
    mig_allocation: GpuRequest


# The notebook's id decides its pod's name, so the history is written once the notebook exists;
# one Prometheus per test keeps the tests apart.


@pytest.fixture
def story(
    tenant_a: Tenant,
    developer: User,
    admin_user: User,
    catalog: dict[str, Offering],
    history_prometheus: Callable[[History], HistoryPrometheus],
) -> Story:
    a100 = GpuModel.objects.get(slug="a100-80gb")
    cluster = cluster_create(actor=None, name="gpu-east", metrics_interval_seconds=30)
    for name, backend in [("whole", "whole"), ("mig", "mig"), ("shared", "time-slicing")]:
        gpu_pool_create(
            actor=None,
            cluster="gpu-east",
            name=f"a100-{name}",
            gpu_model=a100,
            backend=SharingBackend.objects.get(slug=backend),
            node_count=2,
        )
    quota_set(actor=admin_user, tenant=tenant_a, gpu_model=a100, gpu_eq=10)
    tenant_update(actor=admin_user, tenant=tenant_a, auto_approve_gpu_eq="2")
    notebook_allocation = allocation_of(developer, tenant_a, catalog["a100-80gb-whole"])
    notebook = launch(developer, notebook_allocation)
    mig_allocation = allocation_of(developer, tenant_a, catalog["a100-80gb-mig-1g-10gb"])
    GpuRequest.objects.filter(pk=notebook_allocation.pk).update(starts_at=at(0.5), ends_at=at(2.25))
    Notebook.objects.filter(pk=notebook.pk).update(created_at=at(0.5))
    GpuRequest.objects.filter(pk=mig_allocation.pk).update(starts_at=at(1), ends_at=at(1) + 20 * M)

    history = History(interval=30)
    pod = f"{notebook.kubernetes_name}-0"
    history.pod(namespace=NAMESPACE, pod=pod, start=at(0) + 40 * M, end=at(2) + 10 * M,
                requests={"nvidia_com_gpu": 1})  # fmt: skip
    history.gpu(namespace=NAMESPACE, pod=pod, uuid="GPU-1", start=at(0) + 40 * M,
                end=at(2) + 10 * M, util_percent=50, fb_used_mib=10240)  # fmt: skip
    history.pod(namespace=NAMESPACE, pod="train-mig", start=at(1), end=at(2),
                requests={"nvidia_com_mig_1g_10gb": 1})  # fmt: skip
    history.gpu(namespace=NAMESPACE, pod="train-mig", uuid="GPU-2", start=at(1), end=at(2),
                engine_active=0.7, fb_used_mib=5120, mig_instance="3",
                mig_profile="1g.10gb")  # fmt: skip
    for name in ("ts-a", "ts-b"):
        history.pod(namespace=NAMESPACE, pod=name, start=at(1), end=at(2),
                    requests={"nvidia_com_gpu_shared": 1})  # fmt: skip
        history.gpu(namespace=NAMESPACE, pod=name, uuid="GPU-3", start=at(1), end=at(2),
                    util_percent=80, fb_used_mib=2048)  # fmt: skip
    history.pod(namespace="kube-system", pod="probe", start=at(1), end=at(2),
                requests={"nvidia_com_gpu": 1})  # fmt: skip
    history.gpu(namespace="kube-system", pod="probe", uuid="GPU-4", start=at(1), end=at(2),
                util_percent=20)  # fmt: skip
    history.pod(namespace=NAMESPACE, pod="batch-long", start=at(2), end=at(50),
                requests={"nvidia_com_gpu": 2})  # fmt: skip
    history.gpu(namespace=NAMESPACE, pod="batch-long", uuid="GPU-5", start=at(2), end=at(50),
                util_percent=100)  # fmt: skip

    # Two jobs one after the other on one whole GPU, and one pod seen twice by
    # kube-state-metrics (pending on no node, then running on a node) in the same hour.
    for name, begin in (("seq-a", at(3)), ("seq-b", at(3) + 40 * M)):
        history.pod(namespace=NAMESPACE, pod=name, start=begin, end=begin + 20 * M,
                    requests={"nvidia_com_gpu": 1})  # fmt: skip
        history.gpu(namespace=NAMESPACE, pod=name, uuid="GPU-6", start=begin,
                    end=begin + 20 * M, util_percent=60)  # fmt: skip
    history.series(
        "kube_pod_container_resource_requests",
        {"namespace": NAMESPACE, "pod": "seq-a", "container": "main",
         "resource": "nvidia_com_gpu", "unit": "integer", "node": ""},
        at(3) - 10 * M, at(3), 1,
    )  # fmt: skip
    prometheus = history_prometheus(history)
    cluster.prometheus_url = prometheus.url
    cluster.save(update_fields=["prometheus_url"])
    metering_begin(cluster=cluster, at=T0)
    return Story(cluster, prometheus, notebook, notebook_allocation, mig_allocation)


def collect(story: Story, hours: int) -> None:
    """Collect the first `hours` windows, as the periodic task would at that time."""
    source = metrics_source_for(story.cluster)
    assert source is not None
    result = meter_cluster(story.cluster, source, now=at(hours) + 5 * M)
    assert result.failed is None, result.error
    assert len(result.collected) == hours


def record(story: Story, hour: int, **lookup: object) -> UsageRecord:
    return UsageRecord.objects.get(cluster=story.cluster, hour=at(hour), **lookup)


def test_reserved_requested_and_used_are_exact_for_a_notebook_across_hours(story: Story) -> None:
    collect(story, 3)
    notebook = {"notebook": story.notebook}

    first, second, third = (record(story, hour, **notebook) for hour in range(3))

    assert (first.reserved, second.reserved, third.reserved) == (
        Fraction(1, 2), Fraction(1), Fraction(1, 4),
    )  # fmt: skip
    assert (first.requested, second.requested, third.requested) == (
        Fraction(1, 3), Fraction(1), Fraction(1, 6),
    )  # fmt: skip
    assert (first.used_gpu_hours, second.used_gpu_hours, third.used_gpu_hours) == (
        Decimal("0.166667"), Decimal("0.500000"), Decimal("0.083333"),
    )  # fmt: skip
    assert first.memory_gib_hours == Decimal("3.333333")
    assert first.workload_kind == WorkloadKind.NOTEBOOK
    assert first.user == story.notebook.owner
    assert slug(first.offering) == "a100-80gb-whole"
    assert first.allocation_id == story.notebook_allocation.pk


def test_a_mig_slice_and_an_allocation_without_a_workload(story: Story) -> None:
    collect(story, 2)

    job = record(story, 1, workload="train-mig")
    reservation = record(story, 1, allocation=story.mig_allocation)

    assert job.workload_kind == WorkloadKind.POD
    assert job.user is None
    assert slug(job.offering) == "a100-80gb-mig-1g-10gb"
    assert job.requested == Fraction(1, 7)
    assert job.used_gpu_hours == Decimal("0.100000")  # 70 % of 1/7 of a GPU for an hour
    assert job.memory_gib_hours == Decimal("5.000000")
    assert reservation.workload_kind == WorkloadKind.ALLOCATION
    assert reservation.reserved == Fraction(1, 21)  # 1/7 GPU-eq for 20 minutes
    assert reservation.requested == 0


def test_a_time_sliced_gpu_is_split_between_the_pods_on_it(story: Story) -> None:
    collect(story, 2)

    shares = [record(story, 1, workload=name) for name in ("ts-a", "ts-b")]

    for share in shares:
        assert slug(share.offering) == "a100-80gb-time-slicing-1-4"
        assert share.requested == Fraction(1, 4)
        assert share.used_gpu_hours == Decimal("0.400000")  # the device's 0.8, halved
        assert share.memory_gib_hours == Decimal("1.000000")


def test_usage_in_a_namespace_the_portal_does_not_manage_is_kept_unattributed(
    story: Story,
) -> None:
    collect(story, 2)

    kept = record(story, 1, namespace="kube-system")

    assert kept.tenant is None
    assert kept.workload_kind == WorkloadKind.UNATTRIBUTED
    assert kept.requested == 1
    assert kept.used_gpu_hours == Decimal("0.200000")


def test_a_pod_across_days_is_split_at_every_hour_and_rolled_up_per_day(story: Story) -> None:
    collect(story, 50)

    hours = UsageRecord.objects.filter(workload="batch-long").order_by("hour")
    assert [row.hour for row in hours] == [at(hour) for hour in range(2, 50)]
    assert {row.requested for row in hours} == {Fraction(2)}
    assert {row.used_gpu_hours for row in hours} == {Decimal("1.000000")}
    # The rollup holds each day's sums, and the days add up to the hours.
    days = UsageDaily.objects.filter(cluster=story.cluster, tenant__slug="vision")
    assert gpu_eq_sum(days, name="requested") == gpu_eq_sum(
        UsageRecord.objects.filter(tenant__slug="vision"), name="requested"
    )
    notebook = Fraction(1, 3) + 1 + Fraction(1, 6)
    others = Fraction(1, 7) + Fraction(1, 2) + 2 * 48 + Fraction(2, 3)  # mig, shares, batch, seq
    assert gpu_eq_sum(days, name="requested") == notebook + others
    assert {row.day for row in days} == {at(hour).date() for hour in range(50)}
    # Every day's sums over the one denominator: readers group them in one SQL group each.
    dens = {(row.reserved_den, row.requested_den) for row in UsageDaily.objects.all()}
    assert dens == {(COMMON_DENOMINATOR, COMMON_DENOMINATOR)}


def test_the_workload_rollup_holds_each_workloads_day_and_adds_up_to_the_daily_one(
    story: Story,
) -> None:
    collect(story, 50)

    # The long batch job: a row per day it ran, its user and kind kept, the hours summed.
    batch = UsageWorkloadDaily.objects.filter(workload="batch-long").order_by("day")
    hours_per_day = Counter(at(hour).date() for hour in range(2, 50))
    assert [row.day for row in batch] == sorted(hours_per_day)
    assert [row.requested for row in batch] == [
        2 * hours_per_day[day] for day in sorted(hours_per_day)
    ]
    assert {(row.workload_kind, row.tenant_id) for row in batch} == {
        ("pod", Tenant.objects.get(slug="vision").pk)
    }
    assert sum((row.used_gpu_hours for row in batch), Decimal(0)) == Decimal("48.000000")
    # Per day, per namespace, model and offering, the workloads add up to the daily rollup.
    for name in ("reserved", "requested"):
        for daily in UsageDaily.objects.all():
            same = UsageWorkloadDaily.objects.filter(
                cluster=daily.cluster, day=daily.day, tenant=daily.tenant,
                namespace=daily.namespace, gpu_model=daily.gpu_model, offering=daily.offering,
            )  # fmt: skip
            assert gpu_eq_sum(same, name=name) == getattr(daily, name), (daily, name)
    # A day collected again is rewritten, not added to.
    before = UsageWorkloadDaily.objects.count()
    daily_rollup(story.cluster, at(24).date())
    assert UsageWorkloadDaily.objects.count() == before
    assert {(row.reserved_den, row.requested_den) for row in batch} == {
        (COMMON_DENOMINATOR, COMMON_DENOMINATOR)
    }


def test_the_rollups_by_gpu_model_add_up_the_rollups_by_offering_and_read_the_same(
    story: Story, finance_user: User
) -> None:
    collect(story, 50)

    models = UsageModelDaily.objects.all()
    assert models.count() < UsageDaily.objects.count()  # the story offers a model in sizes
    for rollup, by_offering, when in (
        (UsageModelDaily, UsageDaily, "day"),
        (UsageModelMonthly, UsageMonthly, "month"),
    ):
        keys = set(by_offering.objects.values_list("tenant", "namespace", "gpu_model", when))
        assert keys == set(rollup.objects.values_list("tenant", "namespace", "gpu_model", when))
        for tenant, namespace, model, moment in keys:
            where = {"tenant": tenant, "namespace": namespace, "gpu_model": model, when: moment}
            for name in ("reserved", "requested"):
                assert gpu_eq_sum(rollup.objects.filter(**where), name=name) == gpu_eq_sum(
                    by_offering.objects.filter(**where), name=name
                ), (rollup, where, name)
            for name in ("used_gpu_hours", "memory_gib_hours", "cpu_core_hours"):
                assert sum(rollup.objects.filter(**where).values_list(name, flat=True)) == sum(
                    by_offering.objects.filter(**where).values_list(name, flat=True)
                )
    # Readings without offerings read them, and say what readings by offering added up say:
    # whole months (from the monthly rollups) unless grouped by day.
    start = at(0).date().replace(day=1)
    end = (at(49).date().replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
    for groups in ([], ["tenant"], ["model"], ["tenant", "model"], ["day", "model"]):
        with CaptureQueriesContext(connection) as read:
            rows = usage_totals(finance_user, UsageQuery(start, end, groups))
        sums = [q["sql"] for q in read.captured_queries if "GROUP BY" in q["sql"]]
        assert sums, groups
        assert all("metering_usagemodel" in sql for sql in sums), groups
        # Summed per stored denominator: rollups are stored over the common one.
        assert not any("MOD(" in sql for sql in sums), groups
        offered = usage_totals(finance_user, UsageQuery(start, end, [*groups, "offering"]))
        assert [row.as_dict() for row in rows] == [
            row.as_dict() for row in usage_regrouped(offered, groups)
        ], groups


def test_a_rollup_total_the_common_denominator_cannot_hold_keeps_its_lowest_terms(db) -> None:
    cluster = cluster_create(actor=None, name="west")
    for reserved in (Fraction(1, 11), Fraction(1, 7)):
        row = UsageRecord(cluster=cluster, hour=at(0), workload_kind="pod", workload="odd")
        row.reserved, row.requested = reserved, Fraction(1, 7)
        row.save()

    daily_rollup(cluster, at(0).date())

    [day] = UsageDaily.objects.filter(cluster=cluster)
    assert (day.reserved, day.reserved_den) == (Fraction(18, 77), 77)
    assert (day.requested, day.requested_den) == (Fraction(2, 7), COMMON_DENOMINATOR)


def test_the_monthly_rollup_adds_up_each_months_days_and_whole_months_are_read_from_it(
    tenant_a: Tenant, admin_user: User, lead: User, finance_user: User
) -> None:
    cluster = cluster_create(actor=None, name="west")
    hours = {
        datetime(2026, 1, 15, 3, tzinfo=UTC): Fraction(1, 7),
        datetime(2026, 2, 1, 0, tzinfo=UTC): Fraction(2),
        datetime(2026, 2, 28, 23, tzinfo=UTC): Fraction(1, 3),
        datetime(2026, 3, 2, 12, tzinfo=UTC): Fraction(5, 4),
    }
    for hour, reserved in hours.items():
        row = UsageRecord(
            cluster=cluster, hour=hour, tenant=tenant_a, namespace=NAMESPACE,
            workload_kind="pod", workload="train", used_gpu_hours=Decimal("0.5"),
        )  # fmt: skip
        row.reserved = row.requested = reserved
        row.save()
    for hour in hours:
        daily_rollup(cluster, hour.date())

    months = {row.month: row for row in UsageMonthly.objects.filter(cluster=cluster)}
    assert sorted(months) == [date(2026, 1, 1), date(2026, 2, 1), date(2026, 3, 1)]
    assert months[date(2026, 2, 1)].reserved == Fraction(7, 3)
    assert months[date(2026, 2, 1)].used_gpu_hours == Decimal("1.000000")
    # A day rolled up again rewrites its month; a new hour in it is added once.
    extra = UsageRecord(
        cluster=cluster, hour=datetime(2026, 2, 10, 5, tzinfo=UTC), tenant=tenant_a,
        namespace=NAMESPACE, workload_kind="pod", workload="train",
    )  # fmt: skip
    extra.reserved = extra.requested = Fraction(1, 2)
    extra.save()
    daily_rollup(cluster, date(2026, 2, 10))
    daily_rollup(cluster, date(2026, 2, 10))
    [february] = UsageMonthly.objects.filter(cluster=cluster, month=date(2026, 2, 1))
    assert february.reserved == Fraction(7, 3) + Fraction(1, 2)

    # Mid-January to early March: February from the monthly rollup, the days either side
    # from the daily one; the same totals as the hours, for everyone who sees them (all of
    # the tenant's rows: the first reading is kept for the others, portal/metering/kept.py).
    for viewer in (admin_user, finance_user, lead):
        for groups in ([], ["tenant"], ["model", "offering"]):
            query = UsageQuery(date(2026, 1, 10), date(2026, 3, 5), groups, tenant=tenant_a)
            with CaptureQueriesContext(connection) as read:
                rows = usage_totals(viewer, query)
            sums = [q["sql"] for q in read.captured_queries if "GROUP BY" in q["sql"]]
            if viewer == admin_user:
                assert len(sums) == 2
                # By GPU model unless grouped by offering.
                monthly = "usagemonthly" if "offering" in groups else "usagemodelmonthly"
                assert any(f"metering_{monthly}" in sql for sql in sums), groups
                assert not any("metering_usagerecord" in sql for sql in sums)
            else:
                assert sums == [], (viewer, groups)
            assert sum(row.reserved for row in rows) == gpu_eq_sum(
                UsageRecord.objects.filter(cluster=cluster), name="reserved"
            )
            assert sum(row.used_gpu_hours for row in rows) == Decimal("2.000000")
    # Within a month, or grouped by day, only the daily rollup.
    for query in (
        UsageQuery(date(2026, 2, 2), date(2026, 2, 27)),
        UsageQuery(date(2026, 1, 1), date(2026, 3, 31), ["day"]),
    ):
        with CaptureQueriesContext(connection) as read:
            rows = usage_totals(admin_user, query)
        [sql] = [q["sql"] for q in read.captured_queries if "GROUP BY" in q["sql"]]
        assert "metering_usagemodeldaily" in sql
    assert sum(row.reserved for row in rows) == Fraction(7, 3) + Fraction(1, 2) + Fraction(
        1, 7
    ) + Fraction(5, 4)


def test_days_too_large_to_add_up_in_a_bigint_keep_monthly_rows_of_their_own(
    tenant_a: Tenant, admin_user: User
) -> None:
    cluster = cluster_create(actor=None, name="west")
    # In lowest terms over 143 (no multiple of COMMON_DENOMINATOR): two days' numerators
    # add up beyond a bigint.
    huge = Fraction(BIGINT_MAX // 2 + 1, 143)
    assert huge.denominator == 143
    days = (date(2026, 2, 3), date(2026, 2, 4))
    for day in days:
        row = UsageRecord(
            cluster=cluster, hour=datetime(day.year, day.month, day.day, tzinfo=UTC),
            tenant=tenant_a, namespace=NAMESPACE, workload_kind="pod", workload="big",
        )  # fmt: skip
        row.reserved, row.requested = huge, Fraction(1, 7)
        row.save()
        daily_rollup(cluster, day)

    for monthly in (UsageMonthly, UsageModelMonthly):
        february = monthly.objects.filter(cluster=cluster, month=date(2026, 2, 1))
        assert [row.reserved for row in february] == [huge, huge], monthly
        assert sum(row.requested for row in february) == Fraction(2, 7)
    [total] = usage_totals(admin_user, UsageQuery(date(2026, 2, 1), date(2026, 2, 28)))
    assert (total.reserved, total.requested) == (2 * huge, Fraction(2, 7))


def test_a_window_collected_twice_leaves_the_same_rows(story: Story) -> None:
    collect(story, 2)
    source = metrics_source_for(story.cluster)
    assert source is not None
    before = sorted(
        UsageRecord.objects.filter(hour=at(1)).values_list(
            "workload", "reserved_num", "reserved_den", "requested_num", "requested_den",
            "used_gpu_hours", "memory_gib_hours",
        )
    )  # fmt: skip

    window = window_collect(story.cluster, at(1), source)

    after = sorted(
        UsageRecord.objects.filter(hour=at(1)).values_list(
            "workload", "reserved_num", "reserved_den", "requested_num", "requested_den",
            "used_gpu_hours", "memory_gib_hours",
        )
    )  # fmt: skip
    assert after == before
    assert len(before) == 6  # notebook, reservation, train-mig, ts-a, ts-b, kube-system
    assert window.attempts == 2
    assert window.state == WindowState.DONE


def test_an_interrupted_window_is_redone_and_the_watermark_waits_for_it(story: Story) -> None:
    collect(story, 2)
    # A worker died while collecting the next window: its fill state says started.
    UsageWindow.objects.create(cluster=story.cluster, start=at(2), state=WindowState.STARTED)
    state = MeteringState.objects.get(cluster=story.cluster)
    assert state.complete_until == at(2)
    assert state.windows_done == 2

    source = metrics_source_for(story.cluster)
    assert source is not None
    result = meter_cluster(story.cluster, source, now=at(3) + 5 * M)

    assert result.collected == [at(2)]
    # Counted with the usage it wrote (what kept usage readings are keyed by).
    assert MeteringState.objects.get(cluster=story.cluster).windows_done == 3
    assert UsageWindow.objects.get(start=at(2)).state == WindowState.DONE
    assert record(story, 2, notebook=story.notebook).requested == Fraction(1, 6)
    state.refresh_from_db()
    assert state.complete_until == at(3)


def test_windows_missed_while_prometheus_was_down_are_caught_up_in_order(story: Story) -> None:
    collect(story, 1)
    source = metrics_source_for(story.cluster)
    assert source is not None
    story.prometheus.pause()

    down = meter_cluster(story.cluster, source, now=at(3) + 5 * M)

    assert down.collected == []
    assert down.failed == at(1)
    assert "unreachable" in down.error
    failed = UsageWindow.objects.get(cluster=story.cluster, start=at(1))
    assert failed.state == WindowState.FAILED
    assert "unreachable" in failed.error
    [mark] = usage_watermarks()
    assert mark.complete_until == at(1)  # the gap shows: complete only up to the outage
    assert "unreachable" in mark.last_error
    assert not UsageWindow.objects.filter(start=at(2)).exists()  # never past a hole

    story.prometheus.start()
    back = meter_cluster(story.cluster, source, now=at(3) + 5 * M)

    assert back.collected == [at(1), at(2)]
    [mark] = usage_watermarks()
    assert mark.complete_until == at(3)
    assert mark.last_error == ""
    assert UsageWindow.objects.get(start=at(1)).attempts == 2
    assert record(story, 1, notebook=story.notebook).requested == 1


def test_a_window_is_not_collected_before_its_last_scrapes_landed(story: Story) -> None:
    source = metrics_source_for(story.cluster)
    assert source is not None

    result = meter_cluster(story.cluster, source, now=at(1) + timedelta(seconds=60))

    assert result.collected == []  # the first window ended a minute ago: not settled yet
    assert not UsageRecord.objects.exists()


def test_usage_totals_per_tenant_and_day_agree_with_the_hours(
    story: Story, admin_user: User, lead: User, developer: User
) -> None:
    collect(story, 3)
    day = at(0).date()

    [everyone] = usage_totals(admin_user, UsageQuery(start=day, end=day + timedelta(days=1)))
    by_tenant = usage_totals(
        admin_user, UsageQuery(start=day, end=day + timedelta(days=1), group_by=["tenant"])
    )
    mine = usage_totals(
        developer,
        UsageQuery(start=day, end=day + timedelta(days=1), user=developer, group_by=["workload"]),
    )

    assert everyone.requested == sum(row.requested for row in by_tenant)
    assert {(row.group["tenant"], row.group["namespace"]) for row in by_tenant} == {
        ("vision", NAMESPACE), (None, "kube-system"),
    }  # fmt: skip
    reserved = {row.group["workload"]: row.reserved for row in mine}
    assert reserved == {
        story.notebook.name: Fraction(7, 4),
        f"allocation-{story.mig_allocation.pk}": Fraction(1, 21),
    }
    # Rows added up again by fewer groups are the rows read grouped that way.
    period = (day, day + timedelta(days=1))
    by_tenant_and_model = usage_totals(admin_user, UsageQuery(*period, ["tenant", "model"]))
    for groups in (["model"], ["tenant"], []):
        again = usage_regrouped(by_tenant_and_model, groups)
        assert [row.as_dict() for row in again] == [
            row.as_dict() for row in usage_totals(admin_user, UsageQuery(*period, groups))
        ], groups
    assert len(usage_regrouped(by_tenant_and_model, ["tenant"])) == 2


def test_usage_by_user_and_workload_is_read_from_the_workload_rollup_as_the_records_have_it(
    story: Story, admin_user: User, lead: User, developer: User
) -> None:
    collect(story, 30)
    start, end = at(0).date(), at(30).date()
    begin = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    finish = datetime.combine(end + timedelta(days=1), datetime.min.time(), tzinfo=UTC)

    for viewer, only in ((admin_user, None), (lead, None), (developer, developer)):
        for groups in (["user"], ["workload"], ["tenant", "user", "day"], []):
            with CaptureQueriesContext(connection) as read:
                rows = usage_totals(viewer, UsageQuery(start, end, groups, user=only))
            [sql] = [q["sql"] for q in read.captured_queries if "GROUP BY" in q["sql"]]
            assert "metering_usagerecord" not in sql, (viewer, groups)
            # The same totals as the hourly records the viewer may see.
            records = UsageRecord.objects.visible_to(viewer).filter(
                hour__gte=begin, hour__lt=finish
            )
            if only is not None:
                records = records.filter(user=only)
            assert sum(row.requested for row in rows) == gpu_eq_sum(records, name="requested")
            assert sum(row.reserved for row in rows) == gpu_eq_sum(records, name="reserved")
    # Grouped by user, each user's own records.
    for row in usage_totals(admin_user, UsageQuery(start, end, ["user"])):
        mine = UsageRecord.objects.filter(user__username=row.group["user"])
        assert row.requested == gpu_eq_sum(mine, name="requested"), row.group


def test_pods_taking_turns_on_a_whole_gpu_each_get_their_own_time_and_count_once(
    story: Story,
) -> None:
    collect(story, 4)

    first, second = (record(story, 3, workload=name) for name in ("seq-a", "seq-b"))

    for job in (first, second):
        assert job.requested == Fraction(1, 3)  # 20 minutes of one GPU, pending or not
        assert job.used_gpu_hours == Decimal("0.200000")  # 60 % for 20 minutes, not halved


def test_hours_before_a_notebook_was_launched_stay_with_its_allocation(
    story: Story, developer: User
) -> None:
    GpuRequest.objects.filter(pk=story.notebook_allocation.pk).update(
        starts_at=at(0.5) - timedelta(days=1)
    )
    Notebook.objects.filter(pk=story.notebook.pk).update(created_at=at(0.5))
    metering_begin(cluster=story.cluster, at=at(-1))
    source = metrics_source_for(story.cluster)
    assert source is not None

    meter_cluster(story.cluster, source, now=at(1) + 5 * M)

    before = record(story, -1, allocation=story.notebook_allocation)
    after = record(story, 0, notebook=story.notebook, workload_kind=WorkloadKind.NOTEBOOK)
    assert before.workload_kind == WorkloadKind.ALLOCATION
    assert before.reserved == 1
    assert after.reserved == 1  # launched during the hour: the whole hour is the notebook's


def test_metering_begun_earlier_goes_back_and_collects_the_earlier_hours(story: Story) -> None:
    collect(story, 2)
    metering_begin(cluster=story.cluster, at=at(-2))
    source = metrics_source_for(story.cluster)
    assert source is not None

    result = meter_cluster(story.cluster, source, now=at(2) + 5 * M)

    assert result.collected[:2] == [at(-2), at(-1)]
    assert MeteringState.objects.get(cluster=story.cluster).complete_until == at(2)


def test_the_migration_backfills_the_rollups_by_gpu_model_exactly_even_past_a_bigint(
    tenant_a: Tenant, catalog: dict[str, Offering]
) -> None:
    cluster = cluster_create(actor=None, name="west")
    model = GpuModel.objects.get(slug="a100-80gb")
    whole, mig = catalog["a100-80gb-whole"], catalog["a100-80gb-mig-1g-10gb"]
    huge = Fraction(BIGINT_MAX // 2 + 1, 143)  # two of them add up beyond a bigint
    day, month = date(2026, 2, 3), date(2026, 2, 1)
    for rollup, when in ((UsageDaily, {"day": day}), (UsageMonthly, {"month": month})):
        for offering, reserved, requested in (
            (whole, Fraction(3, 7), Fraction(1, 2)),
            (mig, Fraction(1, 7), Fraction(1, 3)),
            (None, Fraction(2, 5), Fraction(2, 5)),
        ):
            row = rollup(
                cluster=cluster, tenant=tenant_a, namespace=NAMESPACE, gpu_model=model,
                offering=offering, used_gpu_hours=Decimal("1.250000"), **when,
            )  # fmt: skip
            row.reserved, row.requested = reserved, requested
            row.save()
        for offering in (whole, mig):  # another namespace: its numerators cannot add up
            row = rollup(
                cluster=cluster, tenant=tenant_a, namespace="t-big", gpu_model=model,
                offering=offering, **when,
            )  # fmt: skip
            row.reserved, row.requested = huge, Fraction(1, 7)
            row.save()
    migration = importlib.import_module("portal.metering.migrations.0007_usage_model_rollups")

    migration.backfill(django_apps, SimpleNamespace(connection=connection))

    for added_up, when in (
        (UsageModelDaily, {"day": day}),
        (UsageModelMonthly, {"month": month}),
    ):
        rows = added_up.objects.filter(cluster=cluster, tenant=tenant_a, gpu_model=model, **when)
        ours = rows.filter(namespace=NAMESPACE)
        assert gpu_eq_sum(ours, name="reserved") == Fraction(3, 7) + Fraction(1, 7) + Fraction(2, 5)
        assert gpu_eq_sum(ours, name="requested") == Fraction(1, 2) + Fraction(1, 3) + Fraction(
            2, 5
        )
        assert sum(ours.values_list("used_gpu_hours", flat=True)) == Decimal("3.750000")
        big = rows.filter(namespace="t-big")
        assert sorted(row.reserved for row in big) == [huge, huge], added_up
        assert gpu_eq_sum(big, name="requested") == Fraction(2, 7)


def test_a_range_that_reaches_today_reads_the_month_so_far_from_its_monthly_row(
    tenant_a: Tenant, finance_user: User
) -> None:
    cluster = cluster_create(actor=None, name="west")
    now = hour_floor(datetime.now(UTC))
    this_month = now.replace(day=1, hour=0)
    following = (this_month + timedelta(days=32)).replace(day=1)
    previous = (this_month - timedelta(days=1)).replace(day=1)
    hours = {
        previous + timedelta(days=3): Fraction(1, 7),
        this_month: Fraction(2),
        now: Fraction(1, 3),
    }
    for hour, reserved in hours.items():
        row = UsageRecord(
            cluster=cluster, hour=hour, tenant=tenant_a, namespace=NAMESPACE,
            workload_kind="pod", workload="train",
        )  # fmt: skip
        row.reserved = row.requested = reserved
        row.save()
        daily_rollup(cluster, hour.date())

    for end in (now.date(), following.date() + timedelta(days=40)):
        query = UsageQuery(previous.date(), end, ["tenant"])
        with CaptureQueriesContext(connection) as read:
            [total] = usage_totals(finance_user, query)
        assert total.reserved == sum(hours.values())
        [monthly] = [
            q["sql"]
            for q in read.captured_queries
            if "usagemodelmonthly" in q["sql"] and "GROUP BY" in q["sql"]
        ]
        # Up to the first day after the end's month: this month so far from its monthly row.
        after = (end.replace(day=28) + timedelta(days=4)).replace(day=1)
        assert f"< '{after}'::date" in monthly, end


def test_rollup_rows_are_summed_exactly_whatever_denominator_they_are_stored_over(
    tenant_a: Tenant, finance_user: User
) -> None:
    cluster = cluster_create(actor=None, name="west")
    day = date(2026, 2, 3)
    # Over the common denominator, in lowest terms that divide it (as an older rollup might
    # have stored them), in lowest terms that do not, and too large to scale.
    parts = [
        (9 * COMMON_DENOMINATOR // 7, COMMON_DENOMINATOR),
        (1, 7),
        (1, 143),
        (BIGINT_MAX // COMMON_DENOMINATOR + 1, 7),
    ]
    for numerator, denominator in parts:
        UsageModelDaily.objects.create(
            cluster=cluster, tenant=tenant_a, namespace=NAMESPACE, day=day,
            reserved_num=numerator, reserved_den=denominator,
            requested_num=numerator, requested_den=denominator,
        )  # fmt: skip

    [total] = usage_totals(finance_user, UsageQuery(day, day, ["tenant"]))

    expected = sum(Fraction(numerator, denominator) for numerator, denominator in parts)
    assert (total.reserved, total.requested) == (expected, expected)
