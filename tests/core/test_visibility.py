"""Visibility as structure: every model with a tenant has `visible_to(user)`, and each persona
sees exactly what the rules say (DOMAIN.md), through `visible_to` and `get_visible_or_404`."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.utils import timezone

from portal.accounts.models import User
from portal.accounts.services import user_create
from portal.allocations.models import GpuRequest, GpuRequestExtension
from portal.billing.models import (
    Budget,
    BudgetAlert,
    BudgetUnit,
    OpenMonthTotal,
    Period,
    PeriodState,
    Statement,
    StatementLine,
)
from portal.catalog.models import NotebookImage, Offering
from portal.catalog.services import notebook_image_create
from portal.cluster.models import Cluster, ProvisioningResult, ProvisioningRun
from portal.cluster.services import cluster_create
from portal.core.errors import NotFound
from portal.core.models import AuditEvent
from portal.core.visibility import VisibleQuerySet, get_visible_or_404, has_scope
from portal.directory.models import DirectoryChange, DirectoryReport
from portal.directory.services import directory_tenant_queue
from portal.metering.collection import hour_floor, window_collect
from portal.metering.models import (
    UsageDaily,
    UsageModelDaily,
    UsageModelMonthly,
    UsageMonthly,
    UsageRecord,
    UsageWorkloadDaily,
)
from portal.metering.sources import DeviceUse, WindowMetrics
from portal.workloads.models import Notebook
from tenants.models import MemberRole, Membership, Quota, QuotaRequest, Tenant
from tenants.services import (
    membership_remove,
    membership_set,
    quota_request_create,
    quota_set,
    tenant_update,
)
from tests.cluster.fixtures import run_queued
from tests.workloads.conftest import allocation_of, launch

PERSONAS = ["developer", "lead", "outsider", "finance", "admin"]


# Which models have a tenant


def _reaches_tenant(model: type[models.Model], depth: int = 3) -> bool:
    """Whether `model` is a Tenant or points to one through foreign keys (up to `depth`)."""
    if model is Tenant:
        return True
    if depth == 0:
        return False
    return any(
        field.many_to_one or field.one_to_one
        for field in model._meta.get_fields()
        if field.concrete and field.related_model is not None and field.related_model is not User
        and _reaches_tenant(field.related_model, depth - 1)
    )  # fmt: skip


def tenant_owned_models() -> set[type[models.Model]]:
    """Every installed model of the project's apps with a tenant: a Tenant, a foreign-key path
    to one, or a tenant named by slug (the directory sync's changes)."""
    project = [
        config for config in apps.get_app_configs()
        if config.name.startswith("portal.") or config.name == "tenants"
    ]  # fmt: skip
    return {
        model
        for config in project
        for model in config.get_models()
        if _reaches_tenant(model)
        or any(field.name == "tenant_slug" for field in model._meta.get_fields())
    }


def test_the_enumeration_finds_the_models_known_to_have_a_tenant():
    known = {
        Tenant, Membership, Quota, QuotaRequest, GpuRequest, ProvisioningRun, ProvisioningResult,
        Notebook, AuditEvent, DirectoryChange,
    }  # fmt: skip
    assert known <= tenant_owned_models()
    assert DirectoryReport not in tenant_owned_models()


def _label(model: type[models.Model]) -> str:
    return model._meta.label


@pytest.mark.parametrize("model", sorted(tenant_owned_models(), key=str), ids=_label)
def test_every_model_with_a_tenant_has_visible_to(model):
    assert isinstance(model._default_manager.all(), VisibleQuerySet), (
        f"{model._meta.label} has a tenant but its default manager has no visible_to: "
        "use VisibleQuerySet.as_manager()"
    )
    assert has_scope(model), f"{model._meta.label} has no visibility scope registered"
    assert model in EXPECTED, f"{model._meta.label} has no behaviour test below"


def test_a_model_without_a_scope_refuses_visible_to_rather_than_show_everything(admin_user):
    with pytest.raises(ImproperlyConfigured):
        VisibleQuerySet(model=DirectoryReport).visible_to(admin_user)
    with pytest.raises(ImproperlyConfigured):
        get_visible_or_404(DirectoryReport, admin_user, pk=1)


# A world with two tenants and a row of every kind in each


@dataclass
class World:
    a: Tenant
    b: Tenant
    people: dict[str, User]
    requests: dict[str, GpuRequest]
    notebooks: dict[str, Notebook]
    quota_requests: dict[str, QuotaRequest]

    def __getitem__(self, persona: str) -> User:
        return self.people[persona]


@pytest.fixture
def world(
    settings, tenant_a, tenant_b, developer, lead, outsider, finance_user, admin_user,
    catalog: dict[str, Offering],
) -> World:  # fmt: skip
    """Tenant A (developer, lead) and B (outsider, lead_b), each with quota, requests,
    notebooks on a dry-run cluster and their runs, a quota request, audit events; a disabled
    notebook image; a directory change."""
    cluster_create(actor=None, name="demo")  # dry-run: runs render, notebooks 'run'
    offering = catalog["a100-80gb-whole"]
    for tenant in (tenant_a, tenant_b):
        quota_set(actor=admin_user, tenant=tenant, gpu_model=offering.gpu_model, gpu_eq=10)
        tenant_update(actor=admin_user, tenant=tenant, auto_approve_gpu_eq="2")
    lead_b = user_create(actor=None, username="lead-b")
    membership_set(actor=admin_user, tenant=tenant_b, user=lead_b, role=MemberRole.LEAD)
    settings.KEYCLOAK_SYNC = True
    directory_tenant_queue(tenant_slug=tenant_b.slug, actor=admin_user)
    settings.KEYCLOAK_SYNC = False
    requests, notebooks = {}, {}
    for name, user, tenant in [
        ("developer", developer, tenant_a), ("lead", lead, tenant_a),
        ("outsider", outsider, tenant_b),
    ]:  # fmt: skip
        requests[name] = allocation_of(user, tenant, offering)
        notebooks[name] = launch(user, allocation_of(user, tenant, offering))
    run_queued()
    # An hour of usage from the ledger (each allocation's notebook) and a busy GPU in a namespace
    # no tenant owns: rows of tenant A, tenant B, and of no tenant.
    window_collect(Cluster.objects.get(name="demo"), hour_floor(timezone.now()), _Metrics())
    # A closed month's statements, one line each, for both tenants.
    period = Period.objects.create(month=date(2026, 1, 1), state=PeriodState.CLOSED)
    for tenant in (tenant_a, tenant_b):
        statement = Statement.objects.create(
            period=period, tenant=tenant, basis="reserved", total=Decimal("1.00")
        )
        StatementLine.objects.create(
            statement=statement, position=1, unit="GPU-eq-hour", amount=Decimal("1.00")
        )
        # An open month's stored provisional total for each.
        OpenMonthTotal.objects.create(
            month=date(2026, 2, 1), basis="reserved", tenant=tenant, currencies="EUR",
            total=Decimal("2.00"), inputs="test", priced_at=timezone.now(),
        )  # fmt: skip
        # A budget for each, and its 80% alert this month.
        Budget.objects.create(
            tenant=tenant, unit=BudgetUnit.GPU_EQ_HOURS, amount=Decimal("10.00"), currency=""
        )
        BudgetAlert.objects.create(
            tenant=tenant, month=date(2026, 1, 1), threshold=80, percent=Decimal("80.0")
        )
    quota_requests = {
        tenant.slug: quota_request_create(
            actor=user, tenant=tenant, gpu_model=offering.gpu_model, amount=1, reason="more"
        )
        for user, tenant in [(lead, tenant_a), (lead_b, tenant_b)]
    }
    # An extension waiting on each tenant's developer allocation (beyond policy: a lead decides).
    for name in ("developer", "outsider"):
        GpuRequestExtension.objects.create(
            request=requests[name], hours=48, reason="a long run",
            requested_by=requests[name].requester,
        )  # fmt: skip
    notebook_image_create(
        actor=admin_user, slug="retired", name="Retired", enabled=False,
        image="quay.io/jupyter/minimal-notebook:2024-01-01",
    )  # fmt: skip
    return World(
        a=tenant_a,
        b=tenant_b,
        people={
            "developer": developer,
            "lead": lead,
            "outsider": outsider,
            "finance": finance_user,
            "admin": admin_user,
        },
        requests=requests,
        notebooks=notebooks,
        quota_requests=quota_requests,
    )


class _Metrics:
    """A metrics source at the network edge: one busy GPU in kube-system, nothing else."""

    def window(self, start: datetime, *, resources: Iterable[str]) -> WindowMetrics:
        busy = DeviceUse(
            namespace="kube-system", pod="probe", node="n1", device="GPU-9", model_name="",
            mig_profile="", busy_seconds=Decimal(1800), memory_mib_seconds=Decimal(0),
        )  # fmt: skip
        return WindowMetrics(devices=[busy])


# What each persona sees, as the rules say it (DOMAIN.md), per model.


def everything(_row: Any) -> bool:
    return True


def nothing(_row: Any) -> bool:
    return False


def _of_tenants(*tenants: str) -> Callable[[Any], bool]:
    return lambda row: row.tenant.slug in tenants


def _expected_requests(w: World, persona: str) -> Callable[[GpuRequest], bool]:
    """Finance and admins: all; leads: their tenants'; everyone: their own."""
    return {
        "developer": lambda row: row.requester == w["developer"],
        "lead": _of_tenants("vision"),
        "outsider": lambda row: row.requester == w["outsider"],
        "finance": everything,
        "admin": everything,
    }[persona]


def _expected_extensions(w: World, persona: str) -> Callable[[GpuRequestExtension], bool]:
    """As their requests: finance and admins all; leads their tenants'; everyone their own."""
    see = _expected_requests(w, persona)
    return lambda row: see(row.request)


def _expected_notebooks(w: World, persona: str) -> Callable[[Notebook], bool]:
    """Admins: all; leads: their tenants'; everyone: their own; finance: none."""
    return {
        "developer": lambda row: row.owner == w["developer"],
        "lead": _of_tenants("vision"),
        "outsider": lambda row: row.owner == w["outsider"],
        "finance": nothing,
        "admin": everything,
    }[persona]


# Members see their tenants; finance and admins every tenant.
TENANTS_SEEN = {
    "developer": {"vision"},
    "lead": {"vision"},
    "outsider": {"nlp"},
    "finance": {"vision", "nlp"},
    "admin": {"vision", "nlp"},
}


def _expected_tenants(_w: World, persona: str) -> Callable[[Tenant], bool]:
    return lambda tenant: tenant.slug in TENANTS_SEEN[persona]


def _expected_tenant_rows(_w: World, persona: str) -> Callable[[Any], bool]:
    return lambda row: row.tenant.slug in TENANTS_SEEN[persona]


def _expected_results(_w: World, persona: str) -> Callable[[ProvisioningResult], bool]:
    return lambda result: result.run.tenant.slug in TENANTS_SEEN[persona]


def _expected_quota_requests(_w: World, persona: str) -> Callable[[QuotaRequest], bool]:
    """The tenant's leads, finance and admins; developers none."""
    return {
        "developer": nothing,
        "lead": _of_tenants("vision"),
        "outsider": nothing,
        "finance": everything,
        "admin": everything,
    }[persona]


def _expected_audit_events(w: World, persona: str) -> Callable[[AuditEvent], bool]:
    """Finance and admins: all; leads: their tenants' and their own; others: their own."""
    return {
        "developer": lambda row: row.actor == w["developer"],
        "lead": lambda row: row.actor == w["lead"] or row.tenant == w.a,
        "outsider": lambda row: row.actor == w["outsider"],
        "finance": everything,
        "admin": everything,
    }[persona]


def _expected_usage(w: World, persona: str) -> Callable[[UsageRecord], bool]:
    """Finance and admins: all, unattributed too; leads: their tenants'; everyone: their own."""
    return {
        "developer": lambda row: row.user == w["developer"],
        "lead": lambda row: row.tenant == w.a or row.user == w["lead"],
        "outsider": lambda row: row.user == w["outsider"],
        "finance": everything,
        "admin": everything,
    }[persona]


def _expected_daily_usage(w: World, persona: str) -> Callable[[Any], bool]:
    """The rollups with no user: finance and admins all; leads their tenants'; developers
    none."""
    return {
        "developer": nothing,
        "lead": lambda row: row.tenant == w.a,
        "outsider": nothing,
        "finance": everything,
        "admin": everything,
    }[persona]


def _expected_statements(w: World, persona: str) -> Callable[[Any], bool]:
    """Finance and admins: all; leads: their tenants'; developers: none. Statements, budgets
    and budget alerts alike."""
    return {
        "developer": nothing,
        "lead": lambda row: row.tenant == w.a,
        "outsider": nothing,
        "finance": everything,
        "admin": everything,
    }[persona]


def _expected_statement_lines(w: World, persona: str) -> Callable[[StatementLine], bool]:
    see = _expected_statements(w, persona)
    return lambda line: see(line.statement)


def _expected_images(_w: World, persona: str) -> Callable[[NotebookImage], bool]:
    """Admins: every image; everyone else: the enabled ones."""
    return (everything) if persona == "admin" else (lambda row: row.enabled)


def _expected_directory_changes(_w: World, persona: str) -> Callable[[DirectoryChange], bool]:
    """Admins only."""
    return everything if persona == "admin" else nothing


EXPECTED: dict[type[models.Model], Callable[[World, str], Callable[[Any], bool]]] = {
    Tenant: _expected_tenants,
    Membership: _expected_tenant_rows,
    Quota: _expected_tenant_rows,
    QuotaRequest: _expected_quota_requests,
    GpuRequest: _expected_requests,
    GpuRequestExtension: _expected_extensions,
    ProvisioningRun: _expected_tenant_rows,
    ProvisioningResult: _expected_results,
    Notebook: _expected_notebooks,
    AuditEvent: _expected_audit_events,
    NotebookImage: _expected_images,
    DirectoryChange: _expected_directory_changes,
    UsageRecord: _expected_usage,
    UsageDaily: _expected_daily_usage,
    UsageMonthly: _expected_daily_usage,
    UsageModelDaily: _expected_daily_usage,
    UsageModelMonthly: _expected_daily_usage,
    UsageWorkloadDaily: _expected_usage,
    Statement: _expected_statements,
    OpenMonthTotal: _expected_statements,
    StatementLine: _expected_statement_lines,
    Budget: _expected_statements,
    BudgetAlert: _expected_statements,
}


def visible(model: type[models.Model], user: User) -> VisibleQuerySet[Any]:
    rows = model._default_manager.all()
    assert isinstance(rows, VisibleQuerySet)
    return rows.visible_to(user)


@pytest.mark.parametrize("model", list(EXPECTED), ids=_label)
def test_each_persona_sees_exactly_what_the_rules_say(world, model):
    rows = list(model._default_manager.all())
    for persona in PERSONAS:
        expected = {row.pk for row in rows if EXPECTED[model](world, persona)(row)}
        seen = set(visible(model, world[persona]).values_list("pk", flat=True))
        assert seen == expected, f"{persona} sees the wrong {model._meta.verbose_name_plural}"
    # The world holds rows some personas see and others do not, so the check can fail.
    everyone = {persona: EXPECTED[model](world, persona) for persona in PERSONAS}
    assert any(see(row) for see in everyone.values() for row in rows)
    assert any(not see(row) for see in everyone.values() for row in rows)


@pytest.mark.parametrize("model", list(EXPECTED), ids=_label)
def test_get_visible_or_404_finds_what_a_persona_sees_and_404s_the_rest(world, model):
    rows = list(model._default_manager.all())
    for persona in PERSONAS:
        sees = EXPECTED[model](world, persona)
        for row in rows:
            if sees(row):
                assert get_visible_or_404(model, world[persona], pk=row.pk) == row
            else:
                with pytest.raises(NotFound):
                    get_visible_or_404(model, world[persona], pk=row.pk)


def test_get_visible_or_404_takes_a_queryset_and_404s_what_does_not_exist(world):
    developer = world["developer"]
    mine = world.requests["developer"]
    found = get_visible_or_404(GpuRequest.objects.select_related("tenant"), developer, pk=mine.pk)
    assert found == mine
    with pytest.raises(NotFound, match="There is no"):
        get_visible_or_404(GpuRequest, developer, pk=mine.pk + 10_000)
    with pytest.raises(NotFound):  # the queryset's own narrowing holds too
        get_visible_or_404(GpuRequest.objects.filter(tenant=world.b), developer, pk=mine.pk)


def test_a_member_removed_from_a_tenant_no_longer_sees_it_or_their_notebooks_there(world):
    developer = world["developer"]
    membership_remove(actor=world["admin"], tenant=world.a, username=developer.username)
    assert not Tenant.objects.visible_to(developer).exists()
    assert not Notebook.objects.visible_to(developer).exists()
    # Their own requests stay theirs to see (the record of what they asked for).
    assert GpuRequest.objects.visible_to(developer).filter(pk=world.requests["developer"].pk)
