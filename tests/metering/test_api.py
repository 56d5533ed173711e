"""`/api/v1/usage/` and `/api/v1/usage/windows/`: every persona, bad input, CSV, query counts.

Usage is made by the real collection code (`window_collect`) from allocations approved through
the services and a fake metrics source: the test double stands where Prometheus would answer.
"""

import csv
import io
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from django.db import connection

from portal.accounts.models import User
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_submit
from portal.catalog.models import Offering
from portal.cluster.models import Cluster
from portal.cluster.services import cluster_create
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.models import UsageWindow
from portal.metering.sources import (
    DeviceUse,
    MetricsUnavailable,
    PodRequest,
    PodRunning,
    WindowMetrics,
)
from portal.workloads.services import notebook_launch
from tenants.models import Tenant
from tenants.services import quota_set, tenant_create

OFFERING = "a100-80gb-whole"
URL = "/api/v1/usage/"


class FakeSource:
    """A MetricsSource answering the same pods every window: `pods` (namespace, pod) each ask
    for one whole GPU, run `running` seconds and keep it busy `busy` seconds; `fail` windows
    raise MetricsUnavailable as an unreachable Prometheus would."""

    def __init__(
        self,
        pods: Iterable[tuple[str, str]],
        *,
        running: int = 3600,
        busy: int = 1800,
        fail: Iterable[datetime] = (),
    ) -> None:
        self.pods = list(pods)
        self.running = running
        self.busy = busy
        self.fail = set(fail)

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        if start in self.fail:
            raise MetricsUnavailable("Prometheus did not answer")
        metrics = WindowMetrics(queries=6)
        for index, (namespace, pod) in enumerate(self.pods):
            metrics.requests.append(PodRequest(namespace, pod, "nvidia_com_gpu", Decimal(1)))
            metrics.running.append(PodRunning(namespace, pod, self.running))
            metrics.devices.append(
                DeviceUse(
                    namespace=namespace,
                    pod=pod,
                    node=f"gpu-node-{index // 8}",
                    device=f"GPU-{index:08d}",
                    model_name="NVIDIA A100-SXM4-80GB",
                    mig_profile="",
                    busy_seconds=Decimal(self.busy),
                    memory_mib_seconds=Decimal(1024 * 3600),
                )
            )
        return metrics


def approved(user: User, tenant: Tenant, offering: Offering) -> GpuRequest:
    allocation = gpu_request_submit(actor=user, tenant=tenant, offering=offering, count=1)
    assert allocation.state == RequestState.APPROVED, allocation.decision_comment
    return allocation


def reserved_hours(allocation: GpuRequest, starts: list[datetime]) -> Fraction:
    """The allocation's GPU-eq-hours in the windows at `starts`, from its own times."""
    assert allocation.starts_at is not None
    assert allocation.ends_at is not None
    total = Fraction(0)
    for start in starts:
        begin = max(int(allocation.starts_at.timestamp()), int(start.timestamp()))
        end = min(
            int(allocation.ends_at.timestamp()), int((start + timedelta(hours=1)).timestamp())
        )
        total += Fraction(max(end - begin, 0), 3600) * allocation.gpu_eq
    return total


class Usage:
    def __init__(self, cluster: Cluster, starts: list[datetime], **extra: Any) -> None:
        self.cluster = cluster
        self.starts = starts
        self.__dict__.update(extra)

    @property
    def params(self) -> dict[str, str]:
        return {
            "from": self.starts[0].date().isoformat(),
            "to": self.starts[-1].date().isoformat(),
        }


@pytest.fixture
def usage(
    a100_tenant: Tenant, tenant_b: Tenant, developer, lead, outsider, admin_user, catalog
) -> Usage:
    """Two hours of usage on one cluster: the developer's notebook in tenant A, a kubectl pod in
    tenant A, the outsider's notebook in tenant B and a busy GPU in kube-system."""
    cluster = cluster_create(actor=None, name="gpu-1")
    offering = catalog[OFFERING]
    quota_set(actor=admin_user, tenant=tenant_b, gpu_model=offering.gpu_model, gpu_eq=4)
    mine = approved(developer, a100_tenant, offering)
    theirs = approved(outsider, tenant_b, offering)
    notebooks = [
        notebook_launch(actor=user, allocation_id=allocation.pk, image="minimal-python")
        for user, allocation in ((developer, mine), (outsider, theirs))
    ]
    # The hour before the allocations began, and the hour they began in.
    now = hour_floor(datetime.now(UTC))
    starts = [now - timedelta(hours=1), now]
    source = FakeSource(
        [
            ("t-vision", f"nb-{notebooks[0].pk}-0"),
            ("t-vision", "train-job-1"),
            ("t-nlp", f"nb-{notebooks[1].pk}-0"),
            ("kube-system", "burn-in"),
        ]
    )
    metering_begin(cluster=cluster, at=starts[0])
    for start in starts:
        window_collect(cluster, start, source)
    return Usage(cluster, starts, mine=mine, theirs=theirs, notebooks=notebooks)


def totals(response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    rows: list[dict[str, Any]] = response.json()["results"]
    return rows


def test_anonymous_gets_401(client, usage) -> None:
    assert client.get(URL).status_code == 401
    assert client.get(f"{URL}windows/").status_code == 401


def test_a_developer_sees_only_their_own_usage(client_for, developer, usage) -> None:
    body = client_for(developer).get(URL, {**usage.params, "group_by": "user,workload"}).json()

    notebook = usage.notebooks[0]
    assert [(row["user"], row["workload_kind"], row["workload"]) for row in body["results"]] == [
        ("dev", "notebook", notebook.name)
    ]
    row = body["results"][0]
    assert Fraction(row["reserved_gpu_eq_hours"]) == reserved_hours(usage.mine, usage.starts)
    assert Fraction(row["reserved_gpu_eq_hours"]) > 0
    assert Fraction(row["requested_gpu_eq_hours"]) == 2  # one GPU, two whole hours
    assert Decimal(row["used_gpu_hours"]) == Decimal(1)  # busy half of each hour
    assert Decimal(row["memory_gib_hours"]) == Decimal(2)


def test_a_lead_sees_the_tenants_usage_and_finance_and_admins_all(
    client_for, lead, finance_user, admin_user, usage
) -> None:
    by_tenant = {"group_by": "tenant", **usage.params}

    lead_rows = totals(client_for(lead).get(URL, by_tenant))
    finance_rows = totals(client_for(finance_user).get(URL, by_tenant))
    admin_rows = totals(client_for(admin_user).get(URL, by_tenant))

    assert [(row["tenant"], row["namespace"]) for row in lead_rows] == [("vision", "t-vision")]
    # The notebook and the kubectl pod: two GPUs for two hours.
    assert Fraction(lead_rows[0]["requested_gpu_eq_hours"]) == 4
    everyone = [(row["tenant"], row["namespace"]) for row in admin_rows]
    assert everyone == [("nlp", "t-nlp"), ("vision", "t-vision"), (None, "kube-system")]
    assert finance_rows == admin_rows
    unattributed = admin_rows[2]
    assert Decimal(unattributed["used_gpu_hours"]) == Decimal(1)


def test_every_tenants_usage_is_named_as_each_tenants_own_reading_names_it(
    client_for, finance_user, catalog
) -> None:
    """Every tenant's usage (finance, admins) is grouped by the tenants' and models' ids and
    named after, in one lookup (past 100 tenants, of the whole table's names); one tenant's
    reading names its groups in the query. They give the same rows."""
    labs = [tenant_create(actor=None, slug=f"lab-{n:03d}", name=f"Lab {n}") for n in range(101)]
    cluster = cluster_create(actor=None, name="gpu-1")
    start = hour_floor(datetime.now(UTC)) - timedelta(hours=1)
    pods = [(cluster.namespace_for(lab.slug), "job") for lab in labs]
    metering_begin(cluster=cluster, at=start)
    window_collect(cluster, start, FakeSource([*pods, ("kube-system", "burn-in")]))
    client = client_for(finance_user)
    period = {
        "from": start.date().isoformat(),
        "to": (start + timedelta(hours=1)).date().isoformat(),
        "group_by": "tenant,model",
        "page_size": 500,
    }

    seen: list[str] = []

    def record(execute: Any, sql: str, *args: Any) -> Any:
        seen.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(record):
        every = totals(client.get(URL, period))
    own = {
        lab.slug: totals(client.get(URL, {**period, "tenant": lab.slug}))
        for lab in (labs[0], labs[57], labs[100])
    }

    assert [row["tenant"] for row in every] == [lab.slug for lab in labs] + [None]
    assert every[-1]["namespace"] == "kube-system"
    for slug, rows in own.items():
        assert [row for row in every if row["tenant"] == slug] == rows
    assert Fraction(own["lab-057"][0]["requested_gpu_eq_hours"]) == 1
    grouped = [sql for sql in seen if "GROUP BY" in sql]
    assert grouped
    assert not [sql for sql in grouped if '"tenants_tenant"' in sql or '"catalog_gpumodel"' in sql]


def test_the_outsider_gets_404_for_another_tenant_and_sees_only_their_own(
    client_for, outsider, usage
) -> None:
    client = client_for(outsider)

    hidden = client.get(URL, {**usage.params, "tenant": "vision"})
    nowhere = client.get(URL, {**usage.params, "tenant": "no-such-tenant"})
    own = totals(client.get(URL, {**usage.params, "group_by": "tenant"}))

    assert hidden.status_code == 404
    assert hidden.json()["error"]["code"] == "not_found"
    assert nowhere.status_code == 404
    assert nowhere.json()["error"]["code"] == "not_found"
    assert [row["tenant"] for row in own] == ["nlp"]


def test_a_tenant_filter_narrows_to_that_tenant(client_for, admin_user, usage) -> None:
    rows = totals(
        client_for(admin_user).get(URL, {**usage.params, "tenant": "nlp", "group_by": "user"})
    )

    assert [row["user"] for row in rows] == ["outsider"]
    assert Fraction(rows[0]["reserved_gpu_eq_hours"]) == reserved_hours(usage.theirs, usage.starts)


def test_group_by_may_be_repeated_and_comma_separated(client_for, admin_user, usage) -> None:
    client = client_for(admin_user)

    repeated = client.get(f"{URL}?group_by=tenant&group_by=hour,model&from="
                          f"{usage.params['from']}&to={usage.params['to']}")  # fmt: skip
    rows = totals(repeated)

    assert set(rows[0]) >= {"tenant", "namespace", "hour", "model"}
    assert "user" not in rows[0]
    hours = sorted({row["hour"] for row in rows})
    assert hours == [start.isoformat().replace("+00:00", "Z") for start in usage.starts]


def test_no_group_by_gives_one_total_row_and_the_watermark(client_for, admin_user, usage) -> None:
    response = client_for(admin_user).get(URL, usage.params)
    body = response.json()

    assert body["count"] == 1
    assert Fraction(body["results"][0]["requested_gpu_eq_hours"]) == 8  # four pods, two hours
    until = (usage.starts[-1] + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert body["complete_until"] == until
    assert body["watermarks"] == [{"cluster": "gpu-1", "complete_until": until, "demo": False}]
    assert response["Usage-Complete-Until"] == until


def test_the_watermark_stops_at_a_failed_window(client_for, admin_user, usage) -> None:
    later = usage.starts[-1] + timedelta(hours=1)
    with pytest.raises(MetricsUnavailable):
        window_collect(usage.cluster, later, FakeSource([], fail=[later]))

    body = client_for(admin_user).get(URL, usage.params).json()

    assert body["complete_until"] == later.isoformat().replace("+00:00", "Z")


def test_the_default_period_is_the_last_14_days(client_for, admin_user, usage) -> None:
    assert totals(client_for(admin_user).get(URL)) == totals(
        client_for(admin_user).get(URL, usage.params)
    )


def test_pages_follow_page_size(client_for, admin_user, usage) -> None:
    client = client_for(admin_user)
    query = {**usage.params, "group_by": "tenant,workload"}

    whole = totals(client.get(URL, query))
    first = client.get(URL, {**query, "page_size": 2}).json()
    second = client.get(URL, {**query, "page_size": 2, "page": 2}).json()

    assert first["count"] == len(whole) == 4
    assert first["results"] + second["results"] == whole
    assert first["next"]
    assert second["next"] is None


def test_csv_has_the_same_columns_and_numbers_as_json(client_for, lead, usage) -> None:
    client = client_for(lead)
    query = {**usage.params, "group_by": "tenant,user,workload,day"}

    rows = totals(client.get(URL, query))
    response = client.get(URL, {**query, "format": "csv"})
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))

    assert response["Content-Type"].startswith("text/csv")
    assert response["Usage-Complete-Until"]
    assert lines[0] == list(rows[0])
    assert lines[1:] == [["" if value is None else str(value) for value in row.values()]
                         for row in rows]  # fmt: skip


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "2025-13-01"}, "from"),
        ({"to": "yesterday"}, "to"),
        ({"from": "2025-03-10", "to": "2025-03-01"}, "to"),
        ({"from": "2020-01-01", "to": "2025-01-01"}, "to"),
        ({"group_by": "tenant,colour"}, "group_by"),
        ({"group_by": "hour", "from": "2025-01-01", "to": "2025-03-01"}, "group_by"),
        ({"format": "xlsx"}, "format"),
        ({"tenant": "not a slug"}, "tenant"),
    ],
)
def test_bad_input_is_400_naming_the_field(client_for, lead, usage, params, field) -> None:
    response = client_for(lead).get(URL, params)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from": "1" * 100}, "from"),
        ({"from": "1e100"}, "from"),
        ({"from": "2025-01-01", "to": "9999-12-31"}, "to"),
        ({"from": "0001-01-01", "to": "0001-01-02"}, "from"),
        ({"to": "2025-01-01\x00"}, "to"),
        ({"tenant": "vision\x00"}, "tenant"),
        ({"tenant": "\x1b[31mred"}, "tenant"),
        ({"tenant": "v" * 10_000}, "tenant"),
        ({"group_by": "tenant\x00"}, "group_by"),
        ({"group_by": "tenant," * 1000}, "group_by"),
        ({"group_by": "x" * 10_000}, "group_by"),
        ({"format": "\x00"}, "format"),
    ],
)
def test_odd_or_huge_input_is_400_not_500(client_for, admin_user, usage, params, field) -> None:
    response = client_for(admin_user).get(URL, params)

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]


def test_many_group_by_values_are_one_field_error(client_for, admin_user, usage) -> None:
    query = "&".join(["group_by=tenant"] * 500)

    response = client_for(admin_user).get(f"{URL}?{query}")

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["group_by"]


@pytest.mark.parametrize("pods", [10, 200])
def test_the_query_count_does_not_grow_with_the_data(
    client_for, lead, admin_user, usage, pods, django_assert_max_num_queries
) -> None:
    source = FakeSource([("t-vision", f"batch-{index}") for index in range(pods)])
    for start in usage.starts:
        window_collect(usage.cluster, start, source)
    query = {**usage.params, "group_by": "tenant,user,workload,hour", "page_size": 500}

    for user, expected in ((lead, pods + 1), (admin_user, pods + 2)):
        client = client_for(user)
        with django_assert_max_num_queries(8):
            rows = totals(client.get(URL, {**query, "tenant": "vision"} if user == lead else query))
        with django_assert_max_num_queries(8):
            response = client.get(URL, {**query, "format": "csv"})
            b"".join(response.streaming_content)
        assert len({(row["tenant"], row["workload"]) for row in rows}) == expected


# usage/windows/


def test_admins_see_windows_with_a_failed_one(client_for, admin_user, usage) -> None:
    later = usage.starts[-1] + timedelta(hours=1)
    with pytest.raises(MetricsUnavailable):
        window_collect(usage.cluster, later, FakeSource([], fail=[later]))
    client = client_for(admin_user)

    every = client.get(f"{URL}windows/").json()
    failed = client.get(f"{URL}windows/", {"state": "failed", "cluster": "gpu-1"}).json()
    elsewhere = client.get(f"{URL}windows/", {"cluster": "other"}).json()

    assert [(w["start"], w["state"]) for w in every["results"]] == [
        (start.isoformat().replace("+00:00", "Z"), state)
        for start, state in ((later, "failed"), *((s, "done") for s in reversed(usage.starts)))
    ]
    assert failed["count"] == 1
    window = failed["results"][0]
    assert window["error"] == "Prometheus did not answer"
    assert (window["cluster"], window["attempts"], window["records"]) == ("gpu-1", 1, 0)
    assert every["results"][1]["queries"] == 6
    assert every["results"][1]["records"] == UsageWindow.objects.get(start=usage.starts[1]).records
    assert elsewhere["count"] == 0


def test_windows_are_404_for_everyone_but_admins(
    client_for, developer, lead, outsider, finance_user, usage
) -> None:
    for user in (developer, lead, outsider, finance_user):
        assert client_for(user).get(f"{URL}windows/").status_code == 404


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "lost"}, "state"),
        ({"cluster": "a\x00b"}, "cluster"),
        ({"state": "\x00"}, "state"),
    ],
)
def test_bad_window_filters_are_400(client_for, admin_user, usage, params, field) -> None:
    response = client_for(admin_user).get(f"{URL}windows/", params)

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
