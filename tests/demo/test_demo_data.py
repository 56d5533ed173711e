from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.core.management import call_command
from django.test import override_settings

from portal.accounts.models import User
from portal.allocations.models import GpuRequest
from portal.billing.budgets import budget_status
from portal.billing.models import Budget, Period, RateCard, Statement
from portal.core.models import AuditEvent
from portal.demo.accounts import DEMO_PASSWORD
from portal.metering.models import MeteringState, UsageCapacity, UsageRecord, UsageWindow
from portal.metering.selectors import UsageQuery, usage_totals
from portal.workloads.models import Notebook
from tenants.models import Membership, Tenant


def test_demo_data_loads_personas_and_can_run_again(db, capsys) -> None:
    call_command("demo_data")
    counts = (User.objects.count(), Tenant.objects.count(), Membership.objects.count())
    call_command("demo_data")

    assert (User.objects.count(), Tenant.objects.count(), Membership.objects.count()) == counts
    for username in ("developer", "lead", "finance", "admin"):
        assert User.objects.get(username=username).check_password(DEMO_PASSWORD)
    assert DEMO_PASSWORD in capsys.readouterr().out


def _usage_by_tenant_and_day(viewer: User) -> list[dict[str, object]]:
    today = datetime.now(UTC).date()
    query = UsageQuery(
        start=today - timedelta(days=30), end=today, group_by=["tenant", "offering", "day"]
    )
    return [row.as_dict() for row in usage_totals(viewer, query)]


@override_settings(PORTAL_SYNTHETIC_METRICS=True)
def test_demo_data_loads_weeks_of_synthetic_usage_once(db) -> None:
    call_command("demo_data")
    admin = User.objects.get(username="admin")
    first = _usage_by_tenant_and_day(admin)
    counts = (GpuRequest.objects.count(), Notebook.objects.count(), UsageRecord.objects.count())

    call_command("demo_data")

    assert _usage_by_tenant_and_day(admin) == first
    assert (
        GpuRequest.objects.count(),
        Notebook.objects.count(),
        UsageRecord.objects.count(),
    ) == counts
    state = MeteringState.objects.get(cluster__name="demo")
    assert state.demo is True
    assert state.complete_until is not None
    assert state.complete_until >= datetime.now(UTC) - timedelta(hours=2)
    for tenant in ("vision", "nlp"):
        days = {
            row["day"]
            for row in first
            if row["tenant"] == tenant and Decimal(str(row["used_gpu_hours"])) > 0
        }
        assert len(days) >= 14, (tenant, sorted(map(str, days)))
        reserved = sum(Fraction(str(row["reserved_gpu_eq_hours"])) for row in first
                       if row["tenant"] == tenant)  # fmt: skip
        assert reserved > 0
    assert any(row["tenant"] is None for row in first)  # the platform's unattributed GPU
    assert {row["offering"] for row in first} >= {"a100-80gb-mig-1g-10gb", "t4-time-slicing-1-4"}
    assert not UsageWindow.objects.exclude(state="done").exists()
    assert set(UsageWindow.objects.values_list("queries", flat=True)) == {0}
    # Capacity, every hour: the demo pools' GPUs (A100 2 pools x 2 nodes x 8, H100 8, T4 4 x 4).
    capacity = UsageCapacity.objects.values_list(
        "gpu_model__slug", "gpu_hours_num", "gpu_hours_den"
    )
    assert set(capacity) == {("a100-80gb", 32, 1), ("h100-80gb", 8, 1), ("t4", 16, 1)}
    assert UsageCapacity.objects.count() == 3 * UsageWindow.objects.count()
    # Chargeback: prices, last month closed by finance with priced statements, this month open.
    this_month = datetime.now(UTC).date().replace(day=1)
    last_month = (this_month - timedelta(days=1)).replace(day=1)
    closed = Period.objects.get(month=last_month)
    assert closed.state == "closed"
    assert closed.closed_by is not None
    assert closed.closed_by.username == "finance"
    statements = Statement.objects.filter(period=closed)
    assert {statement.tenant.slug for statement in statements} >= {"vision", "nlp"}
    assert all(statement.total > 0 and statement.currency == "EUR" for statement in statements)
    assert not Period.objects.filter(month=this_month, state="closed").exists()
    assert RateCard.objects.filter(gpu_model__slug="h100-80gb").count() == 2
    # Budgets: vision's in money, used past 80% whenever this month has usage yet; nlp's in
    # GPU-eq-hours, holding requests for a lead once used up. A second run changed neither.
    budgets = {budget.tenant.slug: budget for budget in Budget.objects.select_related("tenant")}
    assert (budgets["vision"].unit, budgets["vision"].currency) == ("money", "EUR")
    assert (budgets["nlp"].unit, budgets["nlp"].approval_above) == ("gpu_eq_hours", True)
    vision = budget_status(budgets["vision"])
    assert vision.spent == 0 or vision.percent >= 80
    assert AuditEvent.objects.filter(action="budget.set").count() == 2


def test_without_synthetic_metrics_the_demo_loads_no_usage(db, capsys) -> None:
    call_command("demo_data")

    assert not UsageRecord.objects.exists()
    assert GpuRequest.objects.filter(justification="Demo history").count() > 20
    assert "PORTAL_SYNTHETIC_METRICS=true" in capsys.readouterr().out
