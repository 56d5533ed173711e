"""Load the demo: a few tenants, the personas with known passwords, the GPU catalog presets,
a few GPU pools in a `demo` cluster (dry-run, with made-up nodes for the capacity pages),
the tenants' GPU quotas, five weeks of allocations and notebooks, and (with
PORTAL_SYNTHETIC_METRICS on, as `make demo` sets it) their usage, collected by the metering
code from the built-in synthetic metrics source and marked as demo data.

Safe to run again: what exists already is kept as it is, so a second run changes nothing
(usage only gains the hours that ended since the last run).
"""

from datetime import UTC, datetime, timedelta
from decimal import ROUND_CEILING, Decimal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.services import user_create
from portal.allocations.models import GpuRequest, Purpose, RequestState
from portal.allocations.services import (
    gpu_request_approve,
    gpu_request_release,
    gpu_request_submit,
)
from portal.billing.budgets import budget_status
from portal.billing.models import Budget, BudgetUnit, Period, PeriodState, RateCard
from portal.billing.services import budget_set, period_close, rate_card_create
from portal.catalog.models import GpuModel, GpuPool, Offering, SharingBackend
from portal.catalog.presets import catalog_presets_load
from portal.catalog.services import gpu_pool_create
from portal.cluster.models import Cluster, ClusterMode
from portal.cluster.services import capacity_record, cluster_create
from portal.cluster.services.capacity import POOL_LABEL
from portal.core.errors import Conflict
from portal.demo.accounts import DEMO_PASSWORD, PERSONAS
from portal.metering.collection import metering_begin
from portal.metering.models import MeteringState
from portal.metering.services import usage_collect
from portal.workloads.models import Notebook
from portal.workloads.services import notebook_launch
from tenants.models import Quota, Tenant
from tenants.services import membership_set, quota_set, tenant_create

TENANTS = [
    ("vision", "Computer Vision Lab", "CC-4100"),
    ("nlp", "Language Models Team", "CC-4200"),
    ("risk", "Risk Analytics", "CC-7300"),
]

DEMO_CLUSTER = "demo"

# (pool name, GPU model, sharing backend, nodes, GPUs per node) in the demo cluster
POOLS = [
    ("a100-mig", "a100-80gb", "mig", 2, 8),
    ("a100-whole", "a100-80gb", "whole", 2, 8),
    ("h100", "h100-80gb", "whole", 1, 8),
    ("t4-shared", "t4", "time-slicing", 4, 4),
]

# What one node of each demo pool offers, as a device plugin would advertise it: the MIG
# nodes split four GPUs into 1g.10gb slices and four into 3g.40gb; T4s are shared by 4.
NODE_ALLOCATABLE = {
    "a100-mig": {"nvidia.com/mig-1g.10gb": "28", "nvidia.com/mig-3g.40gb": "8"},
    "a100-whole": {"nvidia.com/gpu": "8"},
    "h100": {"nvidia.com/gpu": "8"},
    "t4-shared": {"nvidia.com/gpu.shared": "16"},
}

# (tenant, GPU model, quota in GPU-eq)
QUOTAS = [
    ("vision", "a100-80gb", 8),
    ("vision", "t4", 4),
    ("nlp", "h100-80gb", 16),
    ("risk", "t4", 2),
]

# Three weeks of history. (user, tenant, offering, count, purpose, every nth day (0: weekdays),
# start hour UTC, hours). Notebooks get a notebook on their allocation; batch allocations are
# what a batch job held (the synthetic metrics show a pod for each).
# Five weeks: always some days of last month, which the demo closes.
HISTORY_DAYS = 35
HISTORY_MARK = "Demo history"
# The demo's prices, EUR per GPU-eq-hour, by GPU model.
RATES = {
    "a100-80gb": "2.50",
    "a100-40gb": "1.90",
    "h100-80gb": "4.20",
    "t4": "0.35",
    "mi250": "1.60",
}  # the justification that marks them, so a second run adds none
# Every demo card also prices the CPU cores and memory the pods request (per core-hour and per
# GiB-hour), so statements show such lines.
CPU_RATE, RAM_RATE = "0.03", "0.004"
HISTORY: list[tuple[str, str, str, int, str, int, int, int]] = [
    ("developer", "vision", "a100-80gb-mig-1g-10gb", 1, Purpose.NOTEBOOK, 0, 9, 8),
    ("developer", "vision", "t4-time-slicing-1-4", 1, Purpose.NOTEBOOK, 3, 13, 6),
    ("lead", "vision", "a100-80gb-whole", 2, Purpose.BATCH, 4, 20, 10),
    ("nlp-dev", "nlp", "h100-80gb-whole", 1, Purpose.NOTEBOOK, 0, 10, 8),
    ("lead", "nlp", "h100-80gb-whole", 4, Purpose.BATCH, 5, 18, 12),
]
# Allocations holding GPUs now: (user, tenant, offering, started hours ago, hours left).
CURRENT: list[tuple[str, str, str, int, int]] = [
    ("developer", "vision", "a100-80gb-whole", 5, 3),
    ("nlp-dev", "nlp", "h100-80gb-whole", 2, 6),
]
DEMO_IMAGE = "minimal-python"


class Command(BaseCommand):
    help = (
        "Load demo tenants, personas (with known passwords) and a GPU catalog; keeps existing data."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=DEMO_CLUSTER).first() or cluster_create(
            actor=None,
            name=DEMO_CLUSTER,
            mode=ClusterMode.DRY_RUN,
            notebook_host_pattern="{name}.{tenant}.notebooks.localhost",
        )
        tenants = {tenant.slug: tenant for tenant in Tenant.objects.all()}
        for slug, name, cost_centre in TENANTS:
            if slug not in tenants:
                tenants[slug] = tenant_create(
                    actor=None, slug=slug, name=name, cost_centre=cost_centre
                )
        users = {user.username: user for user in User.objects.all()}
        for username, full_name, global_role, memberships in PERSONAS:
            if username in users:
                continue
            first, last = full_name.split(" ", 1)
            user = user_create(
                actor=None,
                username=username,
                email=f"{username}@example.org",
                first_name=first,
                last_name=last,
                password=DEMO_PASSWORD,
                global_role=global_role,
            )
            for slug, role in memberships:
                membership_set(actor=None, tenant=tenants[slug], user=user, role=role)
        self._catalog_and_quotas(tenants)
        self._demo_nodes(cluster)
        self._history(users={user.username: user for user in User.objects.all()}, tenants=tenants)
        self._usage(cluster)
        self._chargeback()
        self._budgets()
        self.stdout.write(
            self.style.SUCCESS(f"Demo data is loaded. Sign in at {settings.PORTAL_BASE_URL}/")
        )
        self.stdout.write(f"Every demo account's password is: {DEMO_PASSWORD}")
        for username, _, global_role, memberships in PERSONAS:
            roles = ", ".join(f"{role.label} of {slug}" for slug, role in memberships)
            self.stdout.write(f"  {username:<10} {global_role.label if global_role else roles}")

    def _catalog_and_quotas(self, tenants: dict[str, Tenant]) -> None:
        catalog_presets_load(actor=None)
        models = {model.slug: model for model in GpuModel.objects.all()}
        backends = {backend.slug: backend for backend in SharingBackend.objects.all()}
        pools = set(GpuPool.objects.filter(cluster=DEMO_CLUSTER).values_list("name", flat=True))
        for name, model, backend, nodes, gpus_per_node in POOLS:
            if name not in pools:
                gpu_pool_create(
                    actor=None,
                    cluster=DEMO_CLUSTER,
                    name=name,
                    gpu_model=models[model],
                    backend=backends[backend],
                    node_count=nodes,
                    gpus_per_node=gpus_per_node,
                )
        quotas = set(Quota.objects.values_list("tenant__slug", "gpu_model__slug"))
        for slug, model, amount in QUOTAS:
            if (slug, model) not in quotas:
                quota_set(actor=None, tenant=tenants[slug], gpu_model=models[model], gpu_eq=amount)

    def _demo_nodes(self, cluster: Cluster) -> None:
        """Made-up nodes for the dry-run cluster, so the capacity pages have something to show."""
        models = {model.slug: model for model in GpuModel.objects.all()}
        nodes = []
        for name, model, _backend, count, _gpus in POOLS:
            for index in range(count):
                labels = {
                    models[model].node_label_key: models[model].node_label_value,
                    POOL_LABEL: name,
                }
                nodes.append(
                    {
                        "metadata": {"name": f"{name}-{index}", "labels": labels},
                        "status": {"allocatable": NODE_ALLOCATABLE[name]},
                    }
                )
        capacity_record(cluster=cluster, nodes=nodes, pods=[])

    def _history(self, *, users: dict[str, User], tenants: dict[str, Tenant]) -> None:
        """Allocations (and their notebooks) over the last five weeks, made through the
        services one after the other (each released before the next, so quotas hold), then
        moved back in time: the ledger is time-based, and these are demo fixtures."""
        if GpuRequest.objects.filter(justification=HISTORY_MARK).exists():
            return
        offerings = {offering.slug: offering for offering in Offering.objects.all()}
        today = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        past = []
        for days_ago in range(HISTORY_DAYS, 0, -1):
            day = today - timedelta(days=days_ago)
            for username, slug, offering, count, purpose, every, hour, hours in HISTORY:
                due = day.weekday() < 5 if every == 0 else days_ago % every == 0
                if due:
                    starts = day + timedelta(hours=hour)
                    past.append((starts, hours, username, slug, offering, count, purpose))
        now = timezone.now()
        for starts, hours, username, slug, offering, count, purpose in sorted(past):
            allocation = self._allocation(
                users,
                user=users[username],
                tenant=tenants[slug],
                offering=offerings[offering],
                count=count,
                purpose=purpose,
            )
            gpu_request_release(actor=users[username], gpu_request=allocation)
            ends = min(starts + timedelta(hours=hours), now)
            self._backdate(allocation, starts=starts, ends=ends, state=RequestState.RELEASED)
        this_hour = now.replace(minute=0, second=0, microsecond=0)
        for username, slug, offering, started, left in CURRENT:
            allocation = self._allocation(
                users,
                user=users[username],
                tenant=tenants[slug],
                offering=offerings[offering],
                count=1,
                purpose=Purpose.NOTEBOOK,
            )
            self._backdate(
                allocation,
                starts=this_hour - timedelta(hours=started),
                ends=this_hour + timedelta(hours=left),
                state=None,
            )

    def _allocation(
        self,
        users: dict[str, User],
        *,
        user: User,
        tenant: Tenant,
        offering: Offering,
        count: int,
        purpose: str,
    ) -> GpuRequest:
        allocation = gpu_request_submit(
            actor=user,
            tenant=tenant,
            offering=offering,
            count=count,
            purpose=purpose,
            justification=HISTORY_MARK,
        )
        if allocation.state == RequestState.PENDING:
            allocation = gpu_request_approve(actor=users["admin"], gpu_request=allocation)
        if purpose == Purpose.NOTEBOOK:
            notebook_launch(
                actor=user,
                allocation_id=allocation.pk,
                image=DEMO_IMAGE,
                name=f"{offering.gpu_model.slug}-{allocation.pk}",
            )
        return allocation

    def _backdate(
        self,
        allocation: GpuRequest,
        *,
        starts: datetime,
        ends: datetime,
        state: RequestState | None,
    ) -> None:
        hours = max(round((ends - starts).total_seconds() / 3600), 1)
        GpuRequest.objects.filter(pk=allocation.pk).update(
            starts_at=starts,
            ends_at=ends,
            duration_hours=hours,
            created_at=starts,
            decided_at=starts,
        )
        Notebook.objects.filter(allocation=allocation).update(
            created_at=starts,
            running_since=starts,
            stopped_at=ends if state is not None else None,
        )

    def _chargeback(self) -> None:
        """Rate cards (a price change this month for H100s), and last month closed by finance
        once its usage is complete; this month stays provisional."""
        this_month = timezone.now().date().replace(day=1)
        last_month = (this_month - timedelta(days=1)).replace(day=1)
        finance = User.objects.get(username="finance")
        if not RateCard.objects.exists():
            since = (last_month - timedelta(days=1)).replace(day=1)
            for slug, price in RATES.items():
                model = GpuModel.objects.filter(slug=slug).first()
                if model is not None:
                    rate_card_create(
                        actor=finance, gpu_model=model, backend=None, currency="EUR",
                        price_per_gpu_eq_hour=price, effective_from=since,
                        price_per_cpu_core_hour=CPU_RATE, price_per_ram_gib_hour=RAM_RATE,
                    )  # fmt: skip
            h100 = GpuModel.objects.filter(slug="h100-80gb").first()
            if h100 is not None:
                rate_card_create(
                    actor=finance, gpu_model=h100, backend=None, currency="EUR",
                    price_per_gpu_eq_hour="3.90", effective_from=this_month,
                    price_per_cpu_core_hour=CPU_RATE, price_per_ram_gib_hour=RAM_RATE,
                )  # fmt: skip
        if Period.objects.filter(month=last_month, state=PeriodState.CLOSED).exists():
            return
        try:
            period_close(actor=finance, month=last_month)
        except Conflict as error:
            self.stdout.write(f"{last_month:%Y-%m} is not closed: {error}")
            return
        self.stdout.write(f"Chargeback: {last_month:%Y-%m} closed, {this_month:%Y-%m} provisional.")

    def _budgets(self) -> None:
        """Two budgets: vision's in money, sized so this month has used about 85% of it (the
        80% notice is due), and nlp's in GPU-eq-hours at about half, holding its requests for
        a lead once used up."""
        if Budget.objects.exists():
            return
        finance = User.objects.get(username="finance")
        plans = [
            ("vision", BudgetUnit.MONEY, "EUR", Decimal("0.85"), Decimal(500), False),
            ("nlp", BudgetUnit.GPU_EQ_HOURS, "", Decimal("0.5"), Decimal(200), True),
        ]
        for slug, unit, currency, share, fallback, approval_above in plans:
            tenant = Tenant.objects.get(slug=slug)
            plan = Budget(tenant=tenant, unit=unit, amount=fallback, currency=currency)
            spent = budget_status(plan).spent  # this month so far, for sizing (not saved)
            amount = (spent / share).quantize(Decimal("0.01"), ROUND_CEILING) if spent else fallback
            budget_set(
                actor=finance, tenant=tenant, unit=unit, amount=amount, currency=currency,
                approval_above=approval_above,
            )  # fmt: skip
            self.stdout.write(f"Budget of {slug}: {amount} {currency or 'GPU-eq-hours'} a month.")

    def _usage(self, cluster: Cluster) -> None:
        """Three weeks of usage from the synthetic metrics, through the collection code."""
        if not settings.PORTAL_SYNTHETIC_METRICS:
            self.stdout.write(
                "No usage loaded: set PORTAL_SYNTHETIC_METRICS=true for the synthetic metrics."
            )
            return
        state = MeteringState.objects.filter(cluster=cluster).first()
        if state is None or not state.demo:
            metering_begin(
                cluster=cluster, at=timezone.now() - timedelta(days=HISTORY_DAYS), demo=True
            )
        windows = 0
        while collected := sum(
            len(result.collected) for result in usage_collect(cluster_id=cluster.pk).values()
        ):
            windows += collected
        self.stdout.write(f"Usage collected from the synthetic metrics: {windows} hours.")
