"""Budgets: where a month stands against a tenant's budget (spent, percent, projection, the
daily burn-down), the 80% and 100% notifications (once each, however often the check runs),
the policy that sends requests to a lead above the budget, and the API and pages per persona.

Usage comes from the allocation ledger as in test_pricing: allocations made through the
services, moved in time, their hours collected with a metrics source that sees no pods.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.test import Client

from portal.accounts.models import User
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.selectors import gpu_request_preview
from portal.allocations.services import gpu_request_extend, gpu_request_submit
from portal.billing.budgets import budget_status
from portal.billing.models import Budget, BudgetAlert, Period, PeriodState
from portal.billing.pricing import current_month, month_bounds, tenant_month_priced
from portal.billing.services import budget_remove, budget_set, budgets_check, rate_card_create
from portal.billing.tasks import check_budgets
from portal.catalog.models import GpuModel
from portal.cluster.services import cluster_create
from portal.core.errors import NotFound, PermissionDenied, PolicyRefused, ValidationFailed
from portal.core.models import AuditEvent
from portal.metering.collection import hour_floor, metering_begin, window_collect
from portal.metering.sources import MetricsSource
from tenants.models import Tenant
from tests.billing.test_pricing import BEGIN, DAY, END, MONTH, NoPods
from tests.billing.test_unreserved import A100, GpusOnly
from tests.conftest import wait_until
from tests.loaded import page_loaded

API = "/api/v1/"
WHOLE = "a100-80gb-whole"
MIG = "a100-80gb-mig-1g-10gb"
NOW_BEGIN, NOW_END = month_bounds(current_month())
SECOND = timedelta(seconds=1)


@dataclass
class Spend:
    tenant: Tenant
    allocate: Callable[..., GpuRequest]
    collect: Callable[..., None]


@pytest.fixture
def spend(a100_tenant, developer, lead, finance_user, catalog) -> Spend:
    """Allocations of tenant A (vision) at any time, priced at 2.00 EUR per A100-eq-hour since
    before last month; `collect` meters the hours they held."""
    cluster = cluster_create(actor=None, name="east")
    metering_begin(cluster=cluster, at=BEGIN)
    rate_card_create(
        actor=finance_user, gpu_model=GpuModel.objects.get(slug="a100-80gb"), backend=None,
        currency="EUR", price_per_gpu_eq_hour="2.00", effective_from=MONTH - 40 * DAY,
    )  # fmt: skip
    hours: set[datetime] = set()

    def allocate(offering: str, starts: datetime, hours_held: int) -> GpuRequest:
        allocation = gpu_request_submit(
            actor=developer, tenant=a100_tenant, offering=catalog[offering], count=1
        )
        assert allocation.state == RequestState.APPROVED
        GpuRequest.objects.filter(pk=allocation.pk).update(
            starts_at=starts, ends_at=starts + timedelta(hours=hours_held)
        )
        hours.update(hour_floor(starts) + timedelta(hours=h) for h in range(hours_held))
        return allocation

    def collect(source: MetricsSource | None = None) -> None:
        for hour in sorted(hours):
            window_collect(cluster, hour, source or NoPods())

    return Spend(a100_tenant, allocate, collect)


def budget(actor: User, tenant: Tenant, amount: str, **options) -> Budget:
    options.setdefault("unit", "money")
    options.setdefault("currency", "EUR" if options["unit"] == "money" else "")
    return budget_set(actor=actor, tenant=tenant, amount=amount, **options)


# Where the month stands


def test_status_in_money_spent_percent_run_rate_projection_and_the_burn_down(
    spend: Spend, finance_user
) -> None:
    # Day 2: 10 whole A100-hours (20.00 EUR); from 20:00 on day 3, 10 hours of a 1/7 slice
    # across midnight (10/7 GPU-eq-hours: 2.857 EUR, rounded once on the line: 2.86).
    spend.allocate(WHOLE, BEGIN + DAY, 10)
    spend.allocate(MIG, BEGIN + 2 * DAY + timedelta(hours=20), 10)
    spend.collect()
    now = BEGIN + 10 * DAY  # the start of day 11: ten days gone
    status = budget_status(budget(finance_user, spend.tenant, "100"), now=now)

    assert status.month == MONTH
    assert status.spent == Decimal("22.86")
    assert status.spent == tenant_month_priced(spend.tenant, MONTH, basis="reserved").total
    assert status.percent == Decimal("22.9")
    days = (END - BEGIN).days
    assert status.projected == (Decimal("22.86") * days / 10).quantize(Decimal("0.01"))
    assert [point.day for point in status.series] == [(BEGIN + n * DAY).date() for n in range(11)]
    # The slice's line is rounded once on its running quantity: 4/7 h by day 3's end, all by
    # day 4's, so the last point is the statement's total.
    assert [point.spent for point in status.series[:5]] == [
        Decimal("0.00"), Decimal("20.00"), Decimal("21.14"), Decimal("22.86"), Decimal("22.86"),
    ]  # fmt: skip
    assert status.series[-1].spent == status.spent
    assert status.level == "ok"
    assert not status.over


def test_the_months_share_of_unreserved_capacity_counts_on_the_last_day(
    spend: Spend, finance_user, settings
) -> None:
    settings.PORTAL_CHARGE_UNRESERVED = True
    spend.allocate(WHOLE, BEGIN + DAY, 10)  # 20.00 EUR, of two A100s present all along
    spend.collect(GpusOnly({A100: 2}))  # the other 10 GPU-hours nobody reserved: 20.00 EUR
    status = budget_status(budget(finance_user, spend.tenant, "100"), now=BEGIN + 5 * DAY)

    assert status.spent == Decimal("40.00")
    assert [point.spent for point in status.series] == [
        Decimal("0.00"), *[Decimal("20.00")] * 4, Decimal("40.00"),
    ]  # fmt: skip


def test_status_in_gpu_eq_hours_sums_the_exact_quantities(spend: Spend, finance_user) -> None:
    spend.allocate(MIG, BEGIN + DAY, 10)  # exactly 10/7 GPU-eq-hours
    status = budget_status(
        budget(finance_user, spend.tenant, "1.50", unit="gpu_eq_hours"), now=BEGIN + 5 * DAY
    )
    assert status.spent == Decimal(0)  # nothing collected yet
    spend.collect()

    status = budget_status(Budget.objects.get(), now=BEGIN + 5 * DAY)

    assert status.spent == Decimal("1.43")
    assert status.percent == Decimal("95.3")  # of the figures shown: 1.43 of 1.50
    assert status.unit_label == "GPU-eq-hours"
    assert status.level == "warning"


def test_in_the_months_first_hour_nothing_is_extrapolated(spend: Spend, finance_user) -> None:
    spend.allocate(WHOLE, BEGIN, 1)
    spend.collect()
    plan = budget(finance_user, spend.tenant, "10")

    assert budget_status(plan, now=BEGIN + timedelta(minutes=30)).projected == Decimal("2.00")
    assert budget_status(plan, now=BEGIN + 2 * DAY).projected > Decimal("2.00")


def test_prices_in_another_currency_than_the_budget_are_a_problem_not_a_number(
    spend: Spend, finance_user
) -> None:
    spend.allocate(WHOLE, BEGIN + DAY, 10)
    spend.collect()
    status = budget_status(
        budget(finance_user, spend.tenant, "100", currency="USD"), now=BEGIN + 5 * DAY
    )
    assert "EUR" in status.problem
    assert "USD" in status.problem
    assert status.series == []
    assert budgets_check(now=BEGIN + 5 * DAY) == 0


# Setting and removing


def test_finance_sets_changes_and_removes_a_budget_audited(spend: Spend, finance_user) -> None:
    made = budget(finance_user, spend.tenant, "1500.5", approval_above=True)
    budget(finance_user, spend.tenant, "2000")
    budget(finance_user, spend.tenant, "2000")  # unchanged: nothing recorded
    budget_remove(actor=finance_user, tenant=spend.tenant)

    events = list(AuditEvent.objects.filter(action__startswith="budget.").order_by("pk"))
    assert [event.action for event in events] == ["budget.set", "budget.set", "budget.remove"]
    assert events[0].changes["amount"] == [None, "1500.50"]
    assert events[0].tenant == spend.tenant
    assert events[1].changes == {"amount": ["1500.50", "2000.00"], "approval_above": [True, False]}
    assert made.updated_by == finance_user
    assert not Budget.objects.exists()
    with pytest.raises(NotFound):
        budget_remove(actor=finance_user, tenant=spend.tenant)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"amount": "a lot"}, "amount"),
        ({"amount": "0"}, "amount"),
        ({"amount": "-5"}, "amount"),
        ({"amount": "12.345"}, "amount"),
        ({"amount": "1" * 17}, "amount"),
        ({"amount": "NaN"}, "amount"),
        ({"amount": "10", "currency": ""}, "currency"),
        ({"amount": "10", "currency": "euro"}, "currency"),
        ({"amount": "10", "unit": "hours"}, "unit"),
    ],
)
def test_bad_input_names_the_field(tenant_a, finance_user, options, field) -> None:
    arguments = {"unit": "money", "currency": "EUR", **options}
    with pytest.raises(ValidationFailed) as refused:
        budget_set(actor=finance_user, tenant=tenant_a, **arguments)
    assert field in refused.value.fields
    assert not Budget.objects.exists()


def test_leads_and_developers_may_not_set_budgets(tenant_a, lead, developer, admin_user) -> None:
    for person in (lead, developer):
        with pytest.raises(PermissionDenied):
            budget_set(actor=person, tenant=tenant_a, unit="money", amount="5", currency="EUR")
    budget_set(actor=admin_user, tenant=tenant_a, unit="gpu_eq_hours", amount="5", currency="EUR")
    assert Budget.objects.get().currency == ""  # GPU-eq-hours carry no currency


# Notifications


def test_80_and_100_percent_notify_the_leads_and_finance_once_each(
    spend: Spend,
    finance_user,
    lead,
    developer,
    tasks_in_process,
    django_capture_on_commit_callbacks,
) -> None:
    spend.allocate(WHOLE, BEGIN + DAY, 8)  # 16.00 of 20.00 EUR: 80%
    spend.collect()
    budget(finance_user, spend.tenant, "20")
    now = BEGIN + 5 * DAY

    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check(now=now) == 1
        assert budgets_check(now=now) == 0  # a second run (or a retry) tells nobody again

    [warning] = mail.outbox
    assert sorted(warning.to) == ["finance@example.org", "lead@example.org"]
    assert "vision: 80% reached" in warning.subject
    assert "16.00 of its 20.00 EUR budget" in warning.body
    assert BudgetAlert.objects.get().threshold == 80

    spend.allocate(WHOLE, BEGIN + 2 * DAY, 2)  # 20.00 EUR: 100%
    spend.collect()
    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check(now=now) == 1
        assert budgets_check(now=now) == 0

    assert len(mail.outbox) == 2
    assert "100% reached" in mail.outbox[1].subject
    assert sorted(BudgetAlert.objects.values_list("threshold", flat=True)) == [80, 100]
    events = AuditEvent.objects.filter(action="budget.alert", tenant=spend.tenant)
    assert events.count() == 2


def test_thresholds_compare_exactly_not_the_rounded_percent(
    spend: Spend, finance_user, tasks_in_process, django_capture_on_commit_callbacks
) -> None:
    spend.allocate(WHOLE, BEGIN + DAY, 8)  # 16.00 of 20.01 EUR: 79.96%, shown as 80.0%
    spend.collect()
    budget(finance_user, spend.tenant, "20.01")
    status = budget_status(Budget.objects.get(), now=BEGIN + 5 * DAY)
    assert status.percent == Decimal("80.0")
    assert (status.reached(80), status.level) == (False, "ok")

    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check(now=BEGIN + 5 * DAY) == 0
    assert mail.outbox == []


def test_an_alert_whose_mail_never_went_out_is_sent_by_the_next_check(
    spend: Spend, finance_user, lead, tasks_in_process, django_capture_on_commit_callbacks
) -> None:
    spend.allocate(WHOLE, BEGIN + DAY, 8)  # 80% of 20.00 EUR
    spend.collect()
    budget(finance_user, spend.tenant, "20")
    now = BEGIN + 5 * DAY
    # The check recorded the alert, but its mail was lost (the broker was down after commit).
    with django_capture_on_commit_callbacks(execute=False):
        assert budgets_check(now=now) == 1
    alert = BudgetAlert.objects.get()
    assert (alert.notified_at, mail.outbox) == (None, [])

    with django_capture_on_commit_callbacks(execute=True):
        budgets_check(now=now)  # too soon: the first attempt may still be on its way
    assert mail.outbox == []
    BudgetAlert.objects.filter(pk=alert.pk).update(sent_at=now - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check(now=now) == 0
        budgets_check(now=now)  # sent once, whatever runs next

    [sent] = mail.outbox
    assert "80% reached" in sent.subject
    alert.refresh_from_db()
    assert alert.notified_at is not None


@pytest.mark.parametrize("closed", [False, True], ids=["collecting", "closed"])
def test_last_months_threshold_is_announced_while_its_usage_still_comes_in(
    spend: Spend,
    finance_user,
    tasks_in_process,
    django_capture_on_commit_callbacks,
    closed: bool,
) -> None:
    spend.allocate(WHOLE, END - 8 * 3600 * SECOND, 8)  # last month's last 8 hours: 80%
    spend.collect()
    budget(finance_user, spend.tenant, "20")
    Budget.objects.update(updated_at=BEGIN)  # the budget it had all last month
    if closed:
        Period.objects.create(month=MONTH, state=PeriodState.CLOSED)
    early_this_month = END + 2 * 3600 * SECOND

    with django_capture_on_commit_callbacks(execute=True):
        made = budgets_check(now=early_this_month)

    if closed:
        assert (made, mail.outbox) == (0, [])
    else:
        assert made == 1
        assert BudgetAlert.objects.get().month == MONTH
        assert f"80% reached in {MONTH:%Y-%m}" in mail.outbox[0].subject


def test_a_new_amount_starts_the_months_notifications_afresh(
    spend: Spend, finance_user, tasks_in_process, django_capture_on_commit_callbacks
) -> None:
    spend.allocate(WHOLE, NOW_BEGIN, 5)  # 10.00 EUR this month
    spend.collect()
    budget(finance_user, spend.tenant, "10")
    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check() == 2  # 80% and 100% at once
    budget(finance_user, spend.tenant, "10", approval_above=True)  # same amount: kept
    assert BudgetAlert.objects.count() == 2

    budget(finance_user, spend.tenant, "12")

    assert BudgetAlert.objects.count() == 0
    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check() == 1  # 83%: the 80% notice again, for the new amount
    assert len(mail.outbox) == 3


@pytest.mark.django_db(transaction=True)
def test_the_periodic_task_notifies_through_a_real_worker(
    spend: Spend, finance_user, celery_worker
) -> None:
    spend.allocate(WHOLE, NOW_BEGIN, 5)
    spend.collect()
    budget(finance_user, spend.tenant, "12")  # 10.00 EUR: 83%

    check_budgets.delay()

    wait_until(lambda: len(mail.outbox) == 1, what="the budget mail")
    assert "80% reached" in mail.outbox[0].subject
    check_budgets.delay()
    check_budgets.delay()
    wait_until(
        lambda: AuditEvent.objects.filter(action="budget.alert").count() == 1,
        what="the alert's audit event",
    )
    assert BudgetAlert.objects.get().threshold == 80


# The policy


def test_above_the_budget_with_the_policy_a_small_request_waits_for_a_lead(
    spend: Spend, finance_user, developer, catalog
) -> None:
    spend.allocate(WHOLE, NOW_BEGIN, 3)  # 3 GPU-eq-hours this month
    spend.collect()
    budget(finance_user, spend.tenant, "2", unit="gpu_eq_hours", approval_above=True)

    preview = gpu_request_preview(
        user=developer, tenant=spend.tenant, offering=catalog[MIG], count=1
    )
    submitted = gpu_request_submit(
        actor=developer, tenant=spend.tenant, offering=catalog[MIG], count=1
    )

    assert preview.path == "lead"
    assert "above this month's budget" in preview.message
    assert "a lead decides" in preview.message
    assert submitted.state == RequestState.PENDING
    event = AuditEvent.objects.get(action="gpu_request.submit", target_id=str(submitted.pk))
    assert "above this month's budget" in event.comment


@pytest.mark.parametrize("policy", [True, False], ids=["policy", "no-policy"])
def test_above_the_budget_with_the_policy_only_a_lead_extends(
    spend: Spend, finance_user, developer, lead, policy: bool
) -> None:
    allocation = spend.allocate(WHOLE, NOW_BEGIN, 3)  # 3 GPU-eq-hours this month
    spend.collect()
    GpuRequest.objects.filter(pk=allocation.pk).update(ends_at=NOW_END + DAY)
    allocation.refresh_from_db()
    budget(finance_user, spend.tenant, "2", unit="gpu_eq_hours", approval_above=policy)

    if policy:
        with pytest.raises(PolicyRefused, match="above this month's budget") as refused:
            gpu_request_extend(actor=developer, gpu_request=allocation, hours=1)
        assert list(refused.value.fields) == ["hours"]
    else:
        gpu_request_extend(actor=developer, gpu_request=allocation, hours=1)
    extended = gpu_request_extend(actor=lead, gpu_request=allocation, hours=1)

    assert extended.duration_hours == allocation.duration_hours + (1 if policy else 2)


def test_above_the_budget_without_the_policy_requests_are_decided_as_usual(
    spend: Spend, finance_user, developer, catalog
) -> None:
    spend.allocate(WHOLE, NOW_BEGIN, 3)
    spend.collect()
    budget(finance_user, spend.tenant, "2", unit="gpu_eq_hours", approval_above=False)

    submitted = gpu_request_submit(
        actor=developer, tenant=spend.tenant, offering=catalog[MIG], count=1
    )

    assert submitted.state == RequestState.APPROVED


def test_below_the_budget_the_policy_holds_nothing(
    spend: Spend, finance_user, developer, catalog
) -> None:
    spend.allocate(WHOLE, NOW_BEGIN, 1)  # 2.00 of 10.00 EUR
    spend.collect()
    budget(finance_user, spend.tenant, "10", approval_above=True)

    submitted = gpu_request_submit(
        actor=developer, tenant=spend.tenant, offering=catalog[MIG], count=1
    )

    assert submitted.state == RequestState.APPROVED


# The API


def url(slug: str = "vision") -> str:
    return f"{API}tenants/{slug}/budget/"


@pytest.fixture
def with_budget(spend: Spend, finance_user) -> Budget:
    spend.allocate(WHOLE, NOW_BEGIN, 5)  # 10.00 EUR this month
    spend.collect()
    return budget(finance_user, spend.tenant, "40")


def test_leads_finance_and_admins_read_the_budget_with_its_status(
    with_budget, client_for: Callable[[User], Client], lead, admin_user, finance_user,
    django_assert_max_num_queries,
) -> None:  # fmt: skip
    for person in (lead, finance_user, admin_user):
        client = client_for(person)
        with django_assert_max_num_queries(12):
            answer = client.get(url())
        assert answer.status_code == 200, answer.content
        body = answer.json()
        assert body["tenant"] == "vision"
        assert (body["unit"], body["amount"], body["currency"]) == ("money", "40.00", "EUR")
        status = body["status"]
        assert (status["spent"], status["percent"], status["unit"]) == ("10.00", "25.0", "EUR")
        assert status["month"] == f"{current_month():%Y-%m}"
        assert status["series"][-1]["spent"] == "10.00"
        assert Decimal(status["projected"]) >= Decimal("10.00")


def test_developers_and_outsiders_do_not_find_the_budget(
    with_budget, client_for, developer, outsider
) -> None:
    for person in (developer, outsider):
        client = client_for(person)
        assert client.get(url()).status_code == 404
        assert client.put(
            url(), {"unit": "money"}, content_type="application/json"
        ).status_code == (404)
        assert client.delete(url()).status_code == 404
    assert client_for(developer).get(url("nobody")).status_code == 404


def test_a_tenant_without_a_budget_answers_404(spend, client_for, lead, finance_user) -> None:
    assert client_for(lead).get(url()).status_code == 404
    assert client_for(finance_user).get(url()).status_code == 404
    assert client_for(finance_user).delete(url()).status_code == 404


def test_finance_puts_and_deletes_a_budget_and_a_lead_may_not(
    spend, client_for, lead, finance_user
) -> None:
    body = {"unit": "gpu_eq_hours", "amount": "120", "approval_above": True}
    refused = client_for(lead).put(url(), body, content_type="application/json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"

    answer = client_for(finance_user).put(url(), body, content_type="application/json")

    assert answer.status_code == 200, answer.content
    assert answer.json()["amount"] == "120.00"
    assert answer.json()["status"]["unit"] == "GPU-eq-hours"
    assert Budget.objects.get().approval_above
    assert AuditEvent.objects.filter(action="budget.set", actor=finance_user).count() == 1
    assert client_for(lead).delete(url()).status_code == 403
    assert client_for(finance_user).delete(url()).status_code == 204
    assert not Budget.objects.exists()
    assert AuditEvent.objects.filter(action="budget.remove").count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"unit": "money", "amount": "10"}, "currency"),
        ({"unit": "money", "amount": 10, "currency": "EUR"}, "amount"),
        ({"unit": "money", "amount": "0", "currency": "EUR"}, "amount"),
        ({"unit": "money", "amount": "1.234", "currency": "EUR"}, "amount"),
        ({"unit": "money", "amount": "10", "currency": "eur"}, "currency"),
        ({"unit": "coins", "amount": "10"}, "unit"),
        ({"amount": "10"}, "unit"),
    ],
)
def test_bad_api_input_names_the_field(spend, client_for, finance_user, body, field) -> None:
    answer = client_for(finance_user).put(url(), body, content_type="application/json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"]
    assert not Budget.objects.exists()


def test_the_schema_documents_the_budget(client_for, finance_user) -> None:
    answer = client_for(finance_user).get(
        "/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"
    )
    schema = json.loads(answer.content)
    operations = schema["paths"]["/api/v1/tenants/{slug}/budget/"]
    assert set(operations) >= {"get", "put", "delete"}


# The pages


def test_a_lead_sees_the_burn_down_on_the_tenant_page_and_a_developer_does_not(
    with_budget, client_for, lead, developer, django_assert_max_num_queries
) -> None:
    page = page_loaded(client_for(lead), "/tenants/vision/")
    with django_assert_max_num_queries(30):  # the section, loaded on its own
        client_for(lead).get("/tenants/vision/sections/budget/", HTTP_HX_REQUEST="true")
    assert 'data-testid="budget-chart"' in page
    assert "&quot;spent&quot;: [" in page  # the chart's figures, in its data attribute
    assert '<span data-testid="budget-spent">10.00</span>' in page
    assert "25.0%" in page
    assert 'data-testid="budget-form"' not in page  # leads read
    other = page_loaded(client_for(developer), "/tenants/vision/")
    assert 'data-testid="budget"' not in other
    assert "tenant-section-budget" not in other  # not even its placeholder


def test_the_running_months_statement_shows_the_budget(with_budget, client_for, lead) -> None:
    page = client_for(lead).get(f"/chargeback/statements/{current_month():%Y-%m}-vision/")
    assert page.status_code == 200
    assert 'data-testid="budget-chart"' in page.content.decode()


def test_finance_sets_a_budget_from_the_tenant_page_with_errors_beside_the_field(
    spend, client_for, finance_user, lead
) -> None:
    client = client_for(finance_user)
    assert 'data-testid="budget-form"' in page_loaded(client, "/tenants/vision/")
    form = {"unit": "money", "amount": "50", "currency": ""}

    refused = client.post("/chargeback/budgets/vision/", form, HTTP_HX_REQUEST="true")
    assert refused.status_code == 400
    assert "needs its currency" in refused.content.decode()

    saved = client.post(
        "/chargeback/budgets/vision/", {**form, "currency": "EUR"}, HTTP_HX_REQUEST="true"
    )
    assert saved.status_code == 200
    assert 'data-testid="budget-amount">50.00 EUR a month' in saved.content.decode()
    assert client_for(lead).post("/chargeback/budgets/vision/", form).status_code == 403
    asked = client.post("/chargeback/budgets/vision/remove/", HTTP_HX_REQUEST="true")
    assert asked.content.decode().lstrip().startswith("<dialog")
    assert Budget.objects.exists()
    removed = client.post("/chargeback/budgets/vision/remove/", {"confirmed": "yes"})
    again = client.post("/chargeback/budgets/vision/remove/", {"confirmed": "yes"})
    assert (removed.status_code, again.status_code) == (302, 302)
    assert not Budget.objects.exists()
    assert AuditEvent.objects.filter(action="budget.remove").count() == 1


def test_the_chargeback_page_shows_the_budget_used(with_budget, client_for, finance_user) -> None:
    page = client_for(finance_user).get("/chargeback/").content.decode()
    assert 'data-testid="budget-used-vision">25.0%<' in page


def test_budget_status_reads_a_bounded_number_of_queries(
    spend: Spend, finance_user, django_assert_max_num_queries
) -> None:
    for day in range(6):
        spend.allocate(WHOLE, BEGIN + day * DAY, 2)
        spend.allocate(MIG, BEGIN + day * DAY + timedelta(hours=3), 2)
    spend.collect()
    plan = Budget.objects.select_related("tenant").get(
        pk=budget(finance_user, spend.tenant, "9").pk
    )
    with django_assert_max_num_queries(3):
        status = budget_status(plan, now=BEGIN + 20 * DAY)
    assert len(status.series) == 21


def test_a_budget_alert_reaches_each_reader_in_their_saved_language(
    spend: Spend,
    finance_user,
    lead,
    tasks_in_process,
    django_capture_on_commit_callbacks,
) -> None:
    lead.language = "zh-hans"
    lead.save(update_fields=["language"])
    spend.allocate(WHOLE, BEGIN + DAY, 8)  # 80%
    spend.collect()
    budget(finance_user, spend.tenant, "20")

    with django_capture_on_commit_callbacks(execute=True):
        assert budgets_check(now=BEGIN + 5 * DAY) == 1

    by_recipient = {message.to[0]: message for message in mail.outbox}
    assert sorted(by_recipient) == ["finance@example.org", "lead@example.org"]
    assert "80% reached" in by_recipient["finance@example.org"].subject
    chinese = by_recipient["lead@example.org"]
    assert "已达到 80%" in chinese.subject, chinese.subject
    assert "预算为 20.00 EUR" in chinese.body, chinese.body
