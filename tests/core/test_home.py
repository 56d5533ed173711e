"""Each persona's home: the panels the apps register, what they show, what they hide from
outsiders, what they say when empty, and a bounded number of queries whatever the data size.

The data is made through the services where the product makes it (requests, notebooks, usage
collected from a metrics source at the network edge, budgets, quotas); rows the portal only
reads here (capacity rollups, provisioning runs, Keycloak changes, a closed month's statement)
are written as the code that owns them would leave them.
"""

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.formats import date_format

from portal.accounts.models import User
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.services import gpu_request_extend, gpu_request_submit
from portal.billing.models import Basis, Period, PeriodState, Statement
from portal.billing.pricing import current_month
from portal.billing.services import budget_set, rate_card_create
from portal.catalog.models import Offering
from portal.cluster.models import Cluster, OfferingCapacity, ProvisioningRun, RunKind, RunState
from portal.cluster.services import cluster_create
from portal.core.home import home_panels, panels_for
from portal.core.navigation import navigation_for, persona_of
from portal.directory.models import ChangeKind, ChangeState, DirectoryChange
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.workloads.home import RECENT_NOTEBOOKS
from portal.workloads.models import Notebook, NotebookState
from portal.workloads.services import notebook_delete, notebook_launch
from tenants.access import tenants_led_first
from tenants.models import MemberRole, Tenant
from tenants.services import (
    membership_set,
    quota_set,
    tenant_change_state,
    tenant_create,
    tenant_update,
)
from tests.metering.test_api import FakeSource

WHOLE = "a100-80gb-whole"
HOME = "/home/"
# The most queries the Home page may run, and each of its panels loaded (its session, user and
# roles included), on a few rows or on many. The first panel a persona loads reads the catalog
# (offerings and GPU models, then kept for the process): two queries more.
MAX_PAGE_QUERIES = 4
MAX_PANEL_QUERIES = {
    "my-notebooks": 9, "my-allocations": 7, "my-usage": 4, "my-cost": 7, "approvals": 9,
    "quota-burn": 6, "idle": 6, "spend": 8, "attention": 4, "runs": 6, "capacity": 3,
    "directory": 4,
    # Three queries for each of the first five budgets (`budgets_context`).
    "budgets": 19,
}  # fmt: skip


@dataclass
class World:
    cluster: Cluster
    mine: GpuRequest
    pending: GpuRequest
    theirs: GpuRequest
    theirs_pending: GpuRequest
    notebook: Notebook
    their_notebook: Notebook
    failed_run: ProvisioningRun
    drift_run: ProvisioningRun
    stuck_change: DirectoryChange
    suspended: Tenant
    extra: list[Tenant] = field(default_factory=list)


def _approved(user: User, tenant: Tenant, offering: Offering, count: int = 1) -> GpuRequest:
    allocation = gpu_request_submit(actor=user, tenant=tenant, offering=offering, count=count)
    assert allocation.state == RequestState.APPROVED, allocation.decision_comment
    return allocation


def _pending(user: User, tenant: Tenant, offering: Offering) -> GpuRequest:
    waiting = gpu_request_submit(actor=user, tenant=tenant, offering=offering, count=2)
    assert waiting.state == RequestState.PENDING, waiting.decision_comment
    return waiting


def _runs(cluster: Cluster, tenant: Tenant) -> tuple[ProvisioningRun, ProvisioningRun]:
    failed = ProvisioningRun.objects.create(
        cluster=cluster, tenant=tenant, kind=RunKind.BUNDLE, reason="quota changed",
        state=RunState.FAILED, error="namespaces is forbidden", finished_at=timezone.now(),
    )  # fmt: skip
    drift = ProvisioningRun.objects.create(
        cluster=cluster, tenant=tenant, kind=RunKind.REPAIR, reason="drift: ResourceQuota",
        state=RunState.SUCCEEDED, finished_at=timezone.now(),
    )  # fmt: skip
    return failed, drift


def _stuck(tenant: Tenant, username: str) -> DirectoryChange:
    return DirectoryChange.objects.create(
        kind=ChangeKind.MEMBER, tenant_slug=tenant.slug, username=username, role="developer",
        state=ChangeState.FAILED, attempts=1, last_error="403 Forbidden",
    )  # fmt: skip


def build_world(
    *, extra: int, tenant: Tenant, tenant_b: Tenant, developer: User, lead: User,
    outsider: User, finance: User, admin: User, catalog: dict[str, Offering],
) -> World:  # fmt: skip
    """Tenant A (vision) with the developer's allocation, notebook and a pending request, tenant B
    (nlp) with the outsider's; `extra` more tenants led by the lead, each with the same and
    more; usage of all of them collected for the last two hours and priced by a rate card."""
    offering = catalog[WHOLE]
    model = offering.gpu_model
    cluster = cluster_create(actor=None, name="gpu-1")
    rate_card_create(
        actor=finance, gpu_model=model, backend=None, currency="EUR",
        price_per_gpu_eq_hour="2.00", effective_from=current_month() - timedelta(days=40),
    )  # fmt: skip
    quota_set(actor=admin, tenant=tenant_b, gpu_model=model, gpu_eq=4)
    tenant_update(actor=admin, tenant=tenant_b, auto_approve_gpu_eq="1", auto_approve_hours=8)
    mine = _approved(developer, tenant, offering)
    pending = _pending(developer, tenant, offering)
    theirs = _approved(outsider, tenant_b, offering)
    theirs_pending = _pending(outsider, tenant_b, offering)
    notebook = notebook_launch(actor=developer, allocation_id=mine.pk, image="minimal-python")
    their_notebook = notebook_launch(
        actor=outsider, allocation_id=theirs.pk, image="minimal-python"
    )
    budget_set(actor=finance, tenant=tenant, unit="money", amount="100", currency="EUR")
    pods = [
        ("t-vision", f"nb-{notebook.pk}-0"),
        ("t-nlp", f"nb-{their_notebook.pk}-0"),
    ]
    failed_run, drift_run = _runs(cluster, tenant)
    stuck_change = _stuck(tenant, developer.username)
    suspended = tenant_create(actor=None, slug="old-lab", name="Old Lab", cost_centre="CC-1")
    tenant_change_state(actor=admin, tenant=suspended, action="suspend")
    extras = []
    for index in range(extra):
        more = tenant_create(
            actor=None, slug=f"team-{index}", name=f"Team {index}", cost_centre=f"CC-9{index}"
        )
        membership_set(actor=None, tenant=more, user=lead, role=MemberRole.LEAD)
        membership_set(actor=None, tenant=more, user=developer, role=MemberRole.DEVELOPER)
        quota_set(actor=admin, tenant=more, gpu_model=model, gpu_eq=6)
        tenant_update(actor=admin, tenant=more, auto_approve_gpu_eq="1", auto_approve_hours=8)
        for _ in range(2):
            allocation = _approved(developer, more, offering)
            their = notebook_launch(
                actor=developer, allocation_id=allocation.pk, image="minimal-python"
            )
            pods.append((f"t-{more.slug}", f"nb-{their.pk}-0"))
        _approved(developer, more, offering)  # held and never used: idle
        _pending(developer, more, offering)
        budget_set(actor=finance, tenant=more, unit="money", amount="50", currency="EUR")
        _runs(cluster, more)
        _stuck(more, developer.username)
        old = tenant_create(actor=None, slug=f"old-{index}", name=f"Old {index}")
        tenant_change_state(actor=admin, tenant=old, action="suspend")
        extras.append(more)
    for pool in range(1 + extra):
        for offering_slug in (WHOLE, "a100-80gb-mig-1g-10gb"):
            OfferingCapacity.objects.create(
                cluster=cluster, pool=f"pool-{pool}", gpu_model=model.name,
                offering=catalog[offering_slug], nodes=1,
                total=8 if offering_slug == WHOLE else 56,
                free=3 if offering_slug == WHOLE else 21, collected_at=timezone.now(),
            )  # fmt: skip
    now = hour_floor(datetime.now(UTC))
    starts = [now - timedelta(hours=1), now]
    metering_begin(cluster=cluster, at=starts[0])
    source = FakeSource(pods)
    for start in starts:
        window_collect(cluster, start, source)
    return World(
        cluster, mine, pending, theirs, theirs_pending, notebook, their_notebook, failed_run,
        drift_run, stuck_change, suspended, extras,
    )  # fmt: skip


@pytest.fixture
def world(
    a100_tenant, tenant_b, developer, lead, outsider, finance_user, admin_user, catalog
) -> World:
    return build_world(
        extra=0, tenant=a100_tenant, tenant_b=tenant_b, developer=developer, lead=lead,
        outsider=outsider, finance=finance_user, admin=admin_user, catalog=catalog,
    )  # fmt: skip


def home(client: Client) -> str:
    """The Home as a browser with JavaScript shows it: the page, then each panel it names
    loaded as htmx loads it, in its place."""
    response = client.get(HOME)
    assert response.status_code == 200
    page = response.content.decode()
    for name in re.findall(r'hx-get="/home/panels/([a-z-]+)/"', page):
        loaded = client.get(f"/home/panels/{name}/", headers={"HX-Request": "true"})
        assert loaded.status_code == 200, name
        fragment = loaded.content.decode()
        assert fragment.startswith(
            f'<section class="card home-panel" data-testid="home-panel-{name}">'
        )
        start = page.index(f'<section class="card home-panel" data-testid="home-panel-{name}" ')
        end = page.index("</section>", start) + len("</section>")
        page = page[:start] + fragment + page[end:]
    return page


# Where people land


@pytest.mark.parametrize("persona", ["developer", "lead", "finance_user", "admin_user"])
def test_every_persona_starts_on_home(request, client_for, persona) -> None:
    user = request.getfixturevalue(persona)
    response = client_for(user).get("/")
    assert response.status_code == 302
    assert response["Location"] == HOME


def test_home_comes_first_in_every_personas_navigation() -> None:
    for persona in ("developer", "lead", "finance", "admin"):
        assert navigation_for(persona)[0].url_name == "home"


def test_anonymous_visitors_are_sent_to_sign_in(client, db) -> None:
    response = client.get(HOME)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_each_persona_has_its_own_panels() -> None:
    names = {persona: [panel.name for panel in panels_for(persona)] for persona in (
        "developer", "lead", "finance", "admin"
    )}  # fmt: skip
    assert names == {
        "developer": ["my-notebooks", "my-allocations", "my-usage", "my-cost"],
        "lead": [
            "approvals", "quota-burn", "budgets", "idle", "my-notebooks", "my-allocations",
            "my-usage", "my-cost",
        ],
        "finance": ["spend"],
        "admin": ["attention", "runs", "capacity", "directory"],
    }  # fmt: skip


def test_each_panel_is_registered_by_the_app_that_owns_its_data() -> None:
    owners = {panel.name: panel.context.__module__ for panel in home_panels.values()}
    assert owners == {
        "approvals": "portal.allocations.home",
        "my-allocations": "portal.allocations.home",
        "my-notebooks": "portal.workloads.home",
        "my-usage": "portal.metering.home",
        "idle": "portal.metering.home",
        "quota-burn": "tenants.home",
        "attention": "tenants.home",
        "spend": "portal.billing.home",
        "budgets": "portal.billing.home",
        "my-cost": "portal.billing.home",
        "capacity": "portal.cluster.home",
        "runs": "portal.cluster.home",
        "directory": "portal.directory.home",
    }


# What each persona sees


def test_a_developer_sees_their_notebooks_allocations_usage_cost_and_launch_again(
    client_for, developer, world: World
) -> None:
    page = home(client_for(developer))
    for panel in ("my-notebooks", "my-allocations", "my-usage", "my-cost"):
        assert f'data-testid="home-panel-{panel}"' in page
    assert f'data-testid="home-notebook-{world.notebook.pk}"' in page
    assert f'data-testid="home-allocation-{world.mine.pk}"' in page
    assert f'data-testid="home-allocation-{world.pending.pk}"' in page
    assert "waiting for a lead" in page
    # Time left on the allocation (8 hours by default), not its end date.
    assert "hours" in page
    assert 'data-testid="home-usage-vision"' in page
    assert 'data-testid="home-cost-vision"' in page
    assert "EUR" in page
    # Launch again and request again lead into the existing forms, filled in.
    assert f'data-testid="launch-again-{world.notebook.pk}"' in page
    assert "/notebooks/new/?tenant=vision&amp;offering=a100-80gb-whole&amp;count=1" in page
    assert "/requests/new/?tenant=vision&amp;offering=a100-80gb-whole" in page
    # Not the lead's, finance's or admin's panels.
    for panel in ("approvals", "spend", "attention"):
        assert f"home-panel-{panel}" not in page


def test_request_again_and_launch_again_fill_in_the_forms(client_for, developer, world) -> None:
    client = client_for(developer)
    form = client.get("/requests/new/?tenant=vision&offering=a100-80gb-whole&count=3").content
    assert b'<option value="vision" selected>' in form
    assert b'value="a100-80gb-whole" selected' in form
    assert b'name="count" value="3"' in form
    launch = client.get(
        "/notebooks/new/?tenant=vision&offering=a100-80gb-whole&count=1"
        "&image=minimal-python&cpu_cores=2&memory_gib=8"
    ).content
    assert b'value="minimal-python" selected' in launch
    assert b'name="memory_gib" value="8"' in launch


def test_a_lead_sees_pending_approvals_with_the_quota_left_quotas_budgets_and_idle(
    client_for, lead, world: World
) -> None:
    page = home(client_for(lead))
    for panel in ("approvals", "quota-burn", "budgets", "idle"):
        assert f'data-testid="home-panel-{panel}"' in page
    assert f'data-testid="home-pending-request-{world.pending.pk}"' in page
    # 10 GPU-eq quota, 1 held by the developer's allocation: 9 left beside the request.
    assert "9 of 10 GPU-eq" in page
    assert 'data-testid="home-quota-vision-a100-80gb"' in page
    assert "1 / 10" in page
    assert 'data-testid="home-budget-vision"' in page
    assert "/ 100.00 EUR" in page


def test_a_lead_sees_an_extension_waiting_beside_the_requests(
    client_for, developer, lead, world: World
) -> None:
    asked = gpu_request_extend(
        actor=developer, gpu_request=world.mine, hours=12, reason="a long run"
    ).extension_pending
    assert asked is not None

    page = home(client_for(lead))

    assert f'data-testid="home-pending-extension-{world.mine.pk}"' in page
    assert "extension by 12 h" in page
    assert f'data-testid="home-pending-request-{world.pending.pk}"' in page
    assert '<small data-testid="pending-count">2</small>' in page


def test_finance_sees_this_month_per_tenant_and_the_last_closed_month(
    client_for, finance_user, world: World
) -> None:
    closed = (current_month() - timedelta(days=1)).replace(day=1)
    period = Period.objects.create(month=closed, state=PeriodState.CLOSED, basis=Basis.RESERVED)
    Statement.objects.create(
        period=period, tenant=world.mine.tenant, cost_centre="CC-4100", currency="EUR",
        basis=Basis.RESERVED, total=Decimal("123.45"),
    )  # fmt: skip
    page = home(client_for(finance_user))
    assert 'data-testid="home-panel-spend"' in page
    assert 'data-testid="home-spend-vision"' in page
    assert 'data-testid="home-spend-nlp"' in page
    assert "Total so far (provisional, approx.)" in page
    assert f"{date_format(closed, 'YEAR_MONTH_FORMAT')}</a>: 123.45 EUR" in page


def test_an_admin_sees_capacity_failed_runs_drift_stuck_changes_and_tenants_needing_attention(
    client_for, admin_user, settings, world: World
) -> None:
    settings.KEYCLOAK_SYNC = True
    page = home(client_for(admin_user))
    for panel in ("attention", "runs", "capacity", "directory"):
        assert f'data-testid="home-panel-{panel}"' in page
    assert 'data-testid="home-suspended-old-lab"' in page
    assert f'data-testid="home-failed-run-{world.failed_run.pk}"' in page
    assert "namespaces is forbidden" in page
    assert f'data-testid="home-drift-run-{world.drift_run.pk}"' in page
    assert f'data-testid="home-stuck-change-{world.stuck_change.pk}"' in page
    # One pool of 8 A100s with 3 free, counted once although two offerings describe it.
    assert 'data-testid="home-capacity-nvidia-a100-sxm4-80gb"' in page
    assert "3 / 8" in page


def test_an_admin_sees_a_tenant_over_its_quota(client_for, admin_user, world: World) -> None:
    quota_set(
        actor=admin_user, tenant=world.theirs.tenant, gpu_model=world.theirs.gpu_model,
        gpu_eq=0, force=True,
    )  # fmt: skip
    page = home(client_for(admin_user))
    assert 'data-testid="home-over-quota-nlp"' in page


def test_a_developer_whose_latest_notebooks_are_deleted_still_sees_their_older_live_one(
    client_for, developer, a100_tenant, catalog
) -> None:
    """The panel reads the latest notebooks once for its rows and "launch again"; when deleted
    ones fill that read, the live ones are read on their own."""
    cluster_create(actor=None, name="gpu-1")
    slice_ = catalog["a100-80gb-mig-1g-10gb"]
    live = notebook_launch(
        actor=developer,
        allocation_id=_approved(developer, a100_tenant, slice_).pk,
        image="minimal-python",
    )
    for _ in range(RECENT_NOTEBOOKS):
        gone = notebook_launch(
            actor=developer,
            allocation_id=_approved(developer, a100_tenant, slice_).pk,
            image="minimal-python",
        )
        notebook_delete(actor=developer, notebook=gone, keep_workspace=False)
    # As their provisioning runs leave them once the cluster has removed them.
    Notebook.objects.filter(state=NotebookState.DELETING).update(state=NotebookState.DELETED)
    assert Notebook.objects.filter(state=NotebookState.DELETED).count() == RECENT_NOTEBOOKS

    page = home(client_for(developer))

    assert f'data-testid="home-notebook-{live.pk}"' in page
    assert '<small data-testid="notebook-count">1</small>' in page
    assert page.count('data-testid="home-notebook-') == 1


# Outsiders


def test_a_lead_of_another_tenant_sees_none_of_this_tenants_data(
    client_for, tenant_b, world: World
) -> None:
    other_lead = User.objects.create_user(username="nlp-lead", password="x")
    membership_set(actor=None, tenant=tenant_b, user=other_lead, role=MemberRole.LEAD)
    page = home(client_for(other_lead))
    assert f"home-pending-request-{world.theirs_pending.pk}" in page
    assert f"home-pending-request-{world.pending.pk}" not in page
    assert "vision<" not in page
    assert "/tenants/vision/" not in page
    assert "Computer Vision Lab" not in page
    assert f"home-notebook-{world.notebook.pk}" not in page
    assert f"home-allocation-{world.mine.pk}" not in page


def test_a_developer_sees_only_their_own_work(client_for, outsider, world: World) -> None:
    page = home(client_for(outsider))
    assert f"home-notebook-{world.their_notebook.pk}" in page
    assert f"home-notebook-{world.notebook.pk}" not in page
    assert f"home-allocation-{world.mine.pk}" not in page
    assert "home-cost-vision" not in page
    assert "home-usage-vision" not in page


def test_a_panel_of_another_persona_or_of_none_is_not_found(
    client, client_for, developer, finance_user, world: World
) -> None:
    for user, name in ((developer, "approvals"), (developer, "attention"), (finance_user, "idle")):
        for headers in ({}, {"HX-Request": "true"}):
            response = client_for(user).get(f"/home/panels/{name}/", headers=headers)
            assert response.status_code == 404, (user.username, name)
    assert client_for(developer).get("/home/panels/no-such-panel/").status_code == 404
    anonymous = client.get("/home/panels/my-notebooks/")
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/accounts/login/")


# The page, and each panel loaded on its own


def test_the_home_names_each_panel_and_leaves_its_rows_to_the_panel(
    client_for, developer, world: World
) -> None:
    response = client_for(developer).get(HOME)
    page = response.content.decode()
    for name, title in (("my-notebooks", "My notebooks"), ("my-cost", "My cost this month")):
        assert f'hx-get="/home/panels/{name}/" hx-trigger="load" hx-swap="outerHTML"' in page
        assert f'<h2 id="home-title-{name}">{title}</h2>' in page
        assert f'<a href="/home/panels/{name}/" data-testid="home-show-{name}">' in page
    assert f"home-notebook-{world.notebook.pk}" not in page


def test_a_panel_loaded_by_htmx_is_its_card_alone(client_for, developer, world: World) -> None:
    response = client_for(developer).get(
        "/home/panels/my-notebooks/", headers={"HX-Request": "true"}
    )
    fragment = response.content.decode()
    assert fragment.startswith(
        '<section class="card home-panel" data-testid="home-panel-my-notebooks">'
    )
    assert fragment.rstrip().endswith("</section>")
    assert f'data-testid="home-notebook-{world.notebook.pk}"' in fragment
    assert "<html" not in fragment
    assert "hx-get" not in fragment  # loaded once, not again
    assert "HX-Request" in response["Vary"]


def test_without_javascript_a_panel_opens_on_a_page_of_its_own(
    client_for, developer, world: World
) -> None:
    response = client_for(developer).get("/home/panels/my-notebooks/")
    page = response.content.decode()
    assert response.status_code == 200
    assert "<html" in page
    assert 'data-testid="home-heading"' in page
    assert '<a href="/home/" data-testid="home-back">Back to Home</a>' in page
    assert f'data-testid="home-notebook-{world.notebook.pk}"' in page
    assert "home-panel-my-cost" not in page
    assert "HX-Request" in response["Vary"]


# Empty states say what to do next


def test_empty_homes_say_what_to_do_next(
    client_for, developer, lead, finance_user, admin_user, settings
) -> None:
    settings.KEYCLOAK_SYNC = True
    developer_page = home(client_for(developer))
    assert "You have no notebooks." in developer_page
    assert "Launch a notebook" in developer_page
    assert "Request GPUs" in developer_page
    lead_page = home(client_for(lead))
    assert "Nothing is waiting for your approval." in lead_page
    assert "ask an admin for quota" in lead_page
    assert "Finance sets budgets" in lead_page
    finance_page = home(client_for(finance_user))
    assert "No usage this month yet." in finance_page
    assert "No month is closed yet." in finance_page
    admin_page = home(client_for(admin_user))
    assert "No capacity read yet." in admin_page
    assert "Register a cluster" in admin_page
    assert "No failed runs lately." in admin_page
    assert "No stuck changes" in admin_page


# A bounded number of queries whatever the data size: the page, and each panel it loads


@pytest.mark.parametrize("extra", [0, 8])
@pytest.mark.parametrize("persona", ["developer", "lead", "finance_user", "admin_user"])
def test_every_home_and_each_of_its_panels_run_a_bounded_number_of_queries(
    request, client_for, django_assert_max_num_queries, settings, persona, extra,
    a100_tenant, tenant_b, developer, lead, outsider, finance_user, admin_user, catalog,
) -> None:  # fmt: skip
    settings.KEYCLOAK_SYNC = True
    build_world(
        extra=extra, tenant=a100_tenant, tenant_b=tenant_b, developer=developer, lead=lead,
        outsider=outsider, finance=finance_user, admin=admin_user, catalog=catalog,
    )  # fmt: skip
    user = request.getfixturevalue(persona)
    client = client_for(user)
    with django_assert_max_num_queries(MAX_PAGE_QUERIES):
        response = client.get(HOME)
    assert response.status_code == 200
    for panel in panels_for(persona_of(user)):
        with django_assert_max_num_queries(MAX_PANEL_QUERIES[panel.name]):
            loaded = client.get(f"/home/panels/{panel.name}/", headers={"HX-Request": "true"})
        assert loaded.status_code == 200, panel.name


def test_a_lead_of_many_tenants_is_shown_their_first_tenants_without_a_budget(
    client_for, lead, finance_user
) -> None:
    """Each of the lead's panels reads the tenants they lead at most once (the first by slug,
    enough for the panel's rows, its "more" and the tenants without a budget beside up to
    five with one)."""
    for number in range(12):
        lab = tenant_create(actor=None, slug=f"lab-{number:02d}", name=f"Lab {number}")
        membership_set(actor=None, tenant=lab, user=lead, role=MemberRole.LEAD)
        if number in (0, 1, 2, 3, 5):
            budget_set(actor=finance_user, tenant=lab, unit="money", amount="10", currency="EUR")
    client = client_for(lead)

    reads = {}
    for panel in panels_for("lead"):
        with CaptureQueriesContext(connection) as queries:
            loaded = client.get(f"/home/panels/{panel.name}/", headers={"HX-Request": "true"})
        assert loaded.status_code == 200
        reads[panel.name] = [
            query["sql"]
            for query in queries.captured_queries
            if query["sql"].startswith('SELECT "tenants_tenant"."id"') and "'lead'" in query["sql"]
        ]

    page = home(client)
    # Five budgets in lab-00 to lab-05: the first five without one run to the tenth tenant.
    assert "No budget: lab-04, lab-06, lab-07, lab-08, lab-09</p>" in page
    assert 'data-testid="home-budget-lab-05"' in page
    assert all(len(found) <= 1 for found in reads.values()), reads
    assert len(reads["budgets"]) == 1


def test_the_tenants_a_lead_leads_are_read_once_and_again_after_a_membership_changes(
    lead, tenant_a
) -> None:
    read: list[str] = []

    def record(execute: Any, sql: str, *args: Any) -> Any:
        read.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(record):
        first = tenants_led_first(lead, 3)
        again = tenants_led_first(lead, 2)
        lab = tenant_create(actor=None, slug="aaa-lab", name="A lab")
        membership_set(actor=None, tenant=lab, user=lead, role=MemberRole.LEAD)
        before_reading = len(read)
        after = tenants_led_first(lead, 2)
        more = tenants_led_first(lead, 5)

    assert (first, again, after, more) == ([tenant_a], [tenant_a], [lab, tenant_a], [lab, tenant_a])
    led_reads = [sql for sql in read if sql.startswith('SELECT "tenants_tenant"."id"')]
    assert len(led_reads) == 3  # the first, after the change, and for more than were read
    assert len(read) == before_reading + 2
