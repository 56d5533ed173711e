"""Chargeback's writes: rate cards, closing and reopening months, and budgets with their
notifications. Each one transaction with its audit event."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext

from portal.accounts.models import GlobalRole, User
from portal.accounts.selectors import emails_by_language
from portal.billing.budgets import BudgetStatus, budget_status
from portal.billing.models import (
    Budget,
    BudgetAlert,
    BudgetUnit,
    Period,
    PeriodState,
    RateCard,
    Statement,
    StatementLine,
)
from portal.billing.pricing import (
    currency_problem,
    current_month,
    month_bounds,
    month_priced,
    tenants_with_usage,
)
from portal.billing.provisional import provisional_totals
from portal.catalog.models import GpuModel, SharingBackend
from portal.core.audit import audit_record, changes_between, snapshot
from portal.core.bulk import rows_insert
from portal.core.errors import (
    Conflict,
    InvalidTransition,
    NotFound,
    PermissionDenied,
    ValidationFailed,
)
from portal.core.validators import model_problems
from portal.metering.models import MeteringState
from portal.metering.selectors import usage_complete_until
from tenants.models import MemberRole, Membership, Tenant


def _may_price(actor: User) -> None:
    if not (actor.is_finance or actor.is_portal_admin):
        raise PermissionDenied(gettext("Only finance and admins set prices and close months."))


@transaction.atomic
def rate_card_create(
    *,
    actor: User,
    gpu_model: GpuModel,
    backend: SharingBackend | None,
    currency: str,
    price_per_gpu_eq_hour: Decimal | str,
    effective_from: date,
    price_per_cpu_core_hour: Decimal | str | None = None,
    price_per_ram_gib_hour: Decimal | str | None = None,
) -> RateCard:
    """A new price from `effective_from` on, with optional prices of the CPU core-hours and
    memory GiB-hours the pods request (None or empty: not charged). A month already closed
    keeps the prices it used: a card may not take effect inside or before a closed month."""
    _may_price(actor)
    amount = _price("price_per_gpu_eq_hour", price_per_gpu_eq_hour)
    cpu_price = _optional_price("price_per_cpu_core_hour", price_per_cpu_core_hour)
    ram_price = _optional_price("price_per_ram_gib_hour", price_per_ram_gib_hour)
    closed = Period.objects.filter(
        state=PeriodState.CLOSED, month__gte=effective_from.replace(day=1)
    )
    if closed.exists():
        raise Conflict(
            gettext("%(month)s is closed: a new price takes effect after the last closed month.")
            % {"month": closed.order_by("-month").first()},
            fields={"effective_from": [gettext("After the last closed month.")]},
        )
    card = RateCard(
        gpu_model=gpu_model,
        backend=backend,
        currency=currency.strip().upper(),
        price_per_gpu_eq_hour=amount,
        price_per_cpu_core_hour=cpu_price,
        price_per_ram_gib_hour=ram_price,
        effective_from=effective_from,
        created_by=actor,
    )
    try:
        card.full_clean(exclude=["created_by"])
    except ValidationError as error:
        raise ValidationFailed.of("rate card", error.message_dict) from error
    card.save()
    audit_record(
        actor=actor,
        action="rate_card.create",
        target=card,
        changes={
            "gpu_model": [None, gpu_model.slug],
            "backend": [None, backend.slug if backend else None],
            "currency": [None, card.currency],
            "price_per_gpu_eq_hour": [None, str(card.price_per_gpu_eq_hour)],
            "price_per_cpu_core_hour": [None, _text(card.price_per_cpu_core_hour)],
            "price_per_ram_gib_hour": [None, _text(card.price_per_ram_gib_hour)],
            "effective_from": [None, effective_from.isoformat()],
        },
    )
    return card


def _price(field: str, value: Decimal | str) -> Decimal:
    """`value` as a Decimal; ValidationFailed naming `field` when it is not a number (its
    range, digits and sign are the model's to check)."""
    try:
        return Decimal(str(value).strip())
    except InvalidOperation:
        raise ValidationFailed.on(field, gettext("Give a price like 2.50.")) from None


def _optional_price(field: str, value: Decimal | str | None) -> Decimal | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _price(field, value)


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _metering_holds_back(end: Any) -> list[str]:
    """The metered clusters whose usage is not complete up to `end`."""
    states = MeteringState.objects.filter(cluster__enabled=True).select_related("cluster")
    return sorted(
        f"{state.cluster.name} (complete until "
        f"{state.complete_until:%Y-%m-%d %H:%M} UTC)" if state.complete_until else
        f"{state.cluster.name} (nothing collected yet)"
        for state in states
        if state.complete_until is None or state.complete_until < end
    )  # fmt: skip


# A stored statement line's columns, in the order period_close writes them.
LINE_FIELDS = (
    "statement_id",
    "position",
    "gpu_model",
    "offering",
    "user",
    "workload",
    "quantity_num",
    "quantity_den",
    "unit",
    "rate_card_id",
    "rate",
    "currency",
    "amount",
    "used_gpu_hours",
)


@transaction.atomic
def period_close(*, actor: User, month: date) -> Period:
    """Freeze `month`: store every tenant's statement and lines on the charge basis in force.

    Refused (409) while the month runs, while a cluster's usage is not complete up to its end
    (naming the clusters), when it is closed already, or when a statement would mix currencies.
    """
    _may_price(actor)
    first = month.replace(day=1)
    end = month_bounds(first)[1]
    if end > timezone.now():
        raise Conflict(gettext("%(month)s has not ended yet.") % {"month": f"{first:%Y-%m}"})
    behind = _metering_holds_back(end)
    if behind:
        raise Conflict(
            gettext("Usage of %(month)s is not complete yet: %(clusters)s.")
            % {"month": f"{first:%Y-%m}", "clusters": "; ".join(behind)}
        )
    period, _ = Period.objects.get_or_create(month=first)
    period = Period.objects.select_for_update().get(pk=period.pk)
    if period.state == PeriodState.CLOSED:
        raise InvalidTransition(
            gettext("%(month)s is closed already.") % {"month": f"{first:%Y-%m}"}
        )
    basis = settings.PORTAL_CHARGE_BASIS
    tenants = list(tenants_with_usage(first))
    month_prices = month_priced(tenants, first, basis=basis)
    problems = [
        problem for priced in month_prices.values() if (problem := currency_problem(priced))
    ]
    if problems:
        raise Conflict(" ".join(problems))
    # Every tenant's statement in one insert, then all their lines in one COPY (`rows_insert`):
    # a month of a thousand tenants and 40,000 lines is two statements to the database, and
    # the lines are never made into model instances.
    priced_by_tenant = [(tenant, month_prices[tenant.pk]) for tenant in tenants]
    statements = Statement.objects.bulk_create(
        Statement(
            period=period,
            tenant=tenant,
            cost_centre=tenant.cost_centre,
            currency=priced.currency,
            basis=basis,
            total=priced.total,
            line_count=len(priced.lines),
        )
        for tenant, priced in priced_by_tenant
    )
    rows_insert(
        StatementLine,
        LINE_FIELDS,
        (
            (
                statement.pk,
                position,
                line.gpu_model,
                line.offering,
                line.user,
                line.workload,
                line.quantity.numerator,
                line.quantity.denominator,
                line.unit,
                line.rate_card.pk if line.rate_card else None,
                line.rate,
                line.currency,
                line.amount,
                line.used_gpu_hours,
            )
            for statement, (_tenant, priced) in zip(statements, priced_by_tenant, strict=True)
            for position, line in enumerate(priced.lines, start=1)
        ),
    )
    totals = {
        tenant.slug: f"{priced.total} {priced.currency}".strip()
        for tenant, priced in priced_by_tenant
    }
    period.state = PeriodState.CLOSED
    period.basis = basis
    period.closed_at = timezone.now()
    period.closed_by = actor
    period.save()
    audit_record(
        actor=actor,
        action="period.close",
        target=period,
        changes={"state": [PeriodState.OPEN, PeriodState.CLOSED], "totals": [None, totals]},
    )
    return period


@transaction.atomic
def period_reopen(*, actor: User, month: date, reason: str) -> Period:
    """Open a closed month again (admins, with a reason): its stored statements are deleted and
    it is provisional until closed again; the close and this reopening stay in the audit."""
    if not actor.is_portal_admin:
        raise PermissionDenied(gettext("Only admins reopen a closed month."))
    if not reason.strip():
        raise ValidationFailed.on("reason", gettext("Say why the month is reopened."))
    first = month.replace(day=1)
    period = Period.objects.select_for_update().filter(month=first).first()
    if period is None or period.state != PeriodState.CLOSED:
        raise InvalidTransition(gettext("%(month)s is not closed.") % {"month": f"{first:%Y-%m}"})
    totals = {
        statement.tenant.slug: f"{statement.total} {statement.currency}".strip()
        for statement in period.statements.select_related("tenant")
    }
    period.statements.all().delete()
    period.state = PeriodState.OPEN
    period.closed_at = None
    period.closed_by = None
    period.save()
    audit_record(
        actor=actor,
        action="period.reopen",
        target=period,
        changes={"state": [PeriodState.CLOSED, PeriodState.OPEN], "totals": [totals, None]},
        comment=reason.strip(),
    )
    return period


# Budgets


def _may_budget(actor: User) -> None:
    if not (actor.is_finance or actor.is_portal_admin):
        raise PermissionDenied(gettext("Only finance and admins set budgets; leads read them."))


BUDGET_FIELDS = ("unit", "amount", "currency", "approval_above")


@transaction.atomic
def budget_set(
    *,
    actor: User,
    tenant: Tenant,
    unit: str,
    amount: Decimal | str,
    currency: str = "",
    approval_above: bool = False,
) -> Budget:
    """Give `tenant` a monthly budget, or change it: `amount` (more than 0, at most 16 whole
    digits and 2 decimals) of money in `currency` (ISO 4217, required for money) or of
    GPU-eq-hours (no currency). With `approval_above`, once the month has used the budget up
    every new request of the tenant waits for a lead. A new amount or unit starts the month's
    80% and 100% notifications afresh."""
    _may_budget(actor)
    problems: dict[str, list[str]] = {}
    try:
        value = Decimal(str(amount).strip())
        if not value.is_finite():
            raise InvalidOperation
    except InvalidOperation:
        problems["amount"] = [gettext("Give an amount like 1500 or 1500.50.")]
        value = Decimal(1)
    currency = currency.strip().upper() if unit == BudgetUnit.MONEY else ""
    if unit == BudgetUnit.MONEY and not currency:
        problems["currency"] = [
            gettext("A budget in money needs its currency (ISO 4217), e.g. EUR.")
        ]
    budget = Budget.objects.select_for_update().filter(tenant=tenant).first() or Budget(
        tenant=tenant
    )
    before = {} if budget._state.adding else snapshot(budget, BUDGET_FIELDS)
    budget.unit, budget.amount, budget.currency = unit, value, currency
    budget.approval_above = approval_above
    budget.updated_by = actor
    for name, messages in model_problems(budget, exclude=["tenant", "updated_by"]).items():
        problems.setdefault(name, []).extend(messages)
    if problems:
        raise ValidationFailed.of("budget", problems)
    budget.amount = value.quantize(Decimal("0.01"))  # as stored, for the audit
    changed = changes_between(before, snapshot(budget, BUDGET_FIELDS), BUDGET_FIELDS)
    if before and not changed:
        return budget
    budget.save()
    if "unit" in changed or "amount" in changed:
        BudgetAlert.objects.filter(tenant=tenant, month=current_month()).delete()
    audit_record(actor=actor, action="budget.set", target=budget, tenant=tenant, changes=changed)
    return budget


@transaction.atomic
def budget_remove(*, actor: User, tenant: Tenant) -> None:
    """Take `tenant`'s budget away (finance, admins); NotFound when it has none."""
    _may_budget(actor)
    budget = Budget.objects.select_for_update().filter(tenant=tenant).first()
    if budget is None:
        raise NotFound(gettext("This tenant has no budget."))
    audit_record(
        actor=actor,
        action="budget.remove",
        target=budget,
        tenant=tenant,
        changes=changes_between(snapshot(budget, BUDGET_FIELDS), {}, BUDGET_FIELDS),
    )
    BudgetAlert.objects.filter(tenant=tenant, month=current_month()).delete()
    budget.delete()


def _months_to_check(now: datetime) -> list[datetime]:
    """The moments whose month `budgets_check` measures: now, and the last instant of last
    month while its usage is still being collected (a metering watermark before its end) and
    it is not closed, so a threshold crossed in its last hours is still announced."""
    this_month = now.astimezone(UTC).date().replace(day=1)
    previous = (this_month - timedelta(days=1)).replace(day=1)
    end = month_bounds(previous)[1]
    complete = usage_complete_until()
    closed = Period.objects.filter(month=previous, state=PeriodState.CLOSED).exists()
    if closed or (complete is not None and complete >= end):
        return [now]
    return [end - timedelta(microseconds=1), now]


def budgets_check(*, now: datetime | None = None) -> int:
    """Periodic: for every tenant with a budget, this month's spending so far (and last month's,
    while its usage is still coming in); a threshold (80%, 100%) reached for the first time in
    a month is recorded (a BudgetAlert row, unique per tenant, month and threshold), audited
    and mailed to the tenant's leads and to finance once the transaction commits. Running it
    twice, or twice at once, records nobody twice; an alert whose mail has not gone out (the
    task lost or out of retries) is sent again by the next check. A tenant whose month cannot
    be priced is skipped. Returns how many alerts it made."""
    from portal.billing.tasks import send_budget_alert  # noqa: PLC0415  (services send tasks)

    now = now or timezone.now()
    made = 0
    moments = _months_to_check(now)
    for budget in Budget.objects.select_related("tenant").order_by("tenant__slug"):
        # Last month only for a budget it already had (set or changed before this month).
        for moment in (m for m in moments if m == now or budget.updated_at <= m):
            status = budget_status(budget, now=moment)
            if status.problem:
                continue
            for threshold in BudgetAlert.THRESHOLDS:
                if status.reached(threshold):
                    made += _alert_record(budget, status, threshold)
    # Mails that never went out: queued again once the first attempt had time to finish.
    unsent = BudgetAlert.objects.filter(
        notified_at__isnull=True, sent_at__lt=now - UNSENT_ALERT_GRACE
    ).values_list("pk", flat=True)
    for alert_id in unsent:
        send_budget_alert.delay(alert_id)
    return made


def open_months_price() -> int:
    """Periodic: store the provisional totals of the current month, and of the month before it
    while it is open, on the configured basis, where they are not current
    (`provisional.provisional_totals`); how many tenants' totals are current now."""
    current = current_month()
    previous = (current - timedelta(days=1)).replace(day=1)
    closed = set(
        Period.objects.filter(month__in=[previous, current], state=PeriodState.CLOSED)
        .values_list("month", flat=True)
    )  # fmt: skip
    priced = 0
    for month in (previous, current):
        if month not in closed:
            tenants = list(tenants_with_usage(month))
            priced += len(provisional_totals(tenants, month, basis=settings.PORTAL_CHARGE_BASIS))
    return priced


# How long an alert's first email may take before the next check sends it again.
UNSENT_ALERT_GRACE = timedelta(minutes=30)


@transaction.atomic
def _alert_record(budget: Budget, status: BudgetStatus, threshold: int) -> int:
    """The alert for `threshold` in the status's month, made once (1) or found (0)."""
    from portal.billing.tasks import send_budget_alert  # noqa: PLC0415  (services send tasks)

    alert, created = BudgetAlert.objects.get_or_create(
        tenant=budget.tenant,
        month=status.month,
        threshold=threshold,
        defaults={"percent": status.percent},
    )
    if not created:
        return 0
    audit_record(
        actor=None,
        action="budget.alert",
        target=alert,
        tenant=budget.tenant,
        changes={"percent": [None, str(status.percent)]},
        comment=f"{status.spent} of {budget.amount} {status.unit_label} spent in "
        f"{status.month:%Y-%m}; {status.projected} projected by the month's end.",
    )
    send_budget_alert.delay(alert.pk)
    return 1


def budget_alert_recipients(tenant: Tenant) -> list[str]:
    """The tenant's leads and every finance user, by email."""
    leads = Membership.objects.filter(tenant=tenant, role=MemberRole.LEAD, user__is_active=True)
    finance = User.objects.filter(global_role=GlobalRole.FINANCE, is_active=True)
    emails = {
        *leads.values_list("user__email", flat=True),
        *finance.values_list("email", flat=True),
    }
    return sorted(email for email in emails if email)


def budget_alert_send(*, alert_id: int) -> int:
    """Email one budget alert to the tenant's leads and finance; how many messages went out
    (none when the alert is gone, e.g. the budget was changed since)."""
    with transaction.atomic():
        # Locked, so a resend and the first attempt never both mail it.
        alert = (
            BudgetAlert.objects.select_for_update(of=("self",))
            .select_related("tenant")
            .filter(pk=alert_id, notified_at__isnull=True)
            .first()
        )
        budget = Budget.objects.filter(tenant_id=alert.tenant_id).first() if alert else None
        if alert is None or budget is None:
            return 0
        sent = _alert_mail(alert, budget)
        alert.notified_at = timezone.now()
        alert.save(update_fields=["notified_at"])
        return sent


def _alert_mail(alert: BudgetAlert, budget: Budget) -> int:
    to = budget_alert_recipients(alert.tenant)
    if not to:
        return 0
    # The alert's month, as it stands now (or at its end, for a mail sent after it).
    now = min(timezone.now(), month_bounds(alert.month)[1] - timedelta(seconds=1))
    status = budget_status(budget, now=now)
    link = f"{settings.PORTAL_BASE_URL}{reverse('tenants:detail', args=[alert.tenant.slug])}"
    sent = 0
    for language, addresses in emails_by_language(to).items():
        with translation.override(language):
            subject, body = _alert_text(alert, budget, status)
            sent += send_mail(subject, f"{body}\n{link}\n", None, addresses)
    return sent


def _alert_text(alert: BudgetAlert, budget: Budget, status: BudgetStatus) -> tuple[str, str]:
    """A budget alert's subject and body, in the active language."""
    values = {
        "tenant": alert.tenant.slug,
        "name": alert.tenant.name,
        "threshold": alert.threshold,
        "month": f"{alert.month:%Y-%m}",
        "spent": status.spent,
        "amount": budget.amount,
        "unit": status.unit_label,
        "percent": status.percent,
        "projected": status.projected,
        "projected_percent": status.projected_percent,
    }
    subject = gettext("Budget of %(tenant)s: %(threshold)s%% reached in %(month)s") % values
    lines = [
        gettext(
            "%(name)s has spent %(spent)s of its %(amount)s %(unit)s budget for %(month)s "
            "(%(percent)s%%)."
        )
        % values,
        gettext(
            "At the rate so far it will reach %(projected)s %(unit)s by the month's end "
            "(%(projected_percent)s%%)."
        )
        % values,
    ]
    if budget.approval_above:
        lines.append(
            gettext("Once the budget is used up, every new request waits for a lead's approval.")
        )
    return subject, "\n".join(lines) + "\n"
