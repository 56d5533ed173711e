"""Chargeback's writes: rate cards, and closing and reopening months. Each one transaction
with its audit event."""

from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from portal.accounts.models import User
from portal.billing.models import Period, PeriodState, RateCard, Statement, StatementLine
from portal.billing.pricing import currency_problem, month_bounds, month_priced
from portal.catalog.models import GpuModel, SharingBackend
from portal.core.audit import audit_record
from portal.core.errors import (
    Conflict,
    InvalidTransition,
    PermissionDenied,
    ValidationFailed,
)
from portal.metering.models import MeteringState, UsageRecord
from tenants.models import Tenant


def _may_price(actor: User) -> None:
    if not (actor.is_finance or actor.is_portal_admin):
        raise PermissionDenied("Only finance and admins set prices and close months.")


@transaction.atomic
def rate_card_create(
    *,
    actor: User,
    gpu_model: GpuModel,
    backend: SharingBackend | None,
    currency: str,
    price_per_gpu_eq_hour: Decimal | str,
    effective_from: date,
) -> RateCard:
    """A new price from `effective_from` on. A month already closed keeps the prices it used:
    a card may not take effect inside or before a closed month."""
    _may_price(actor)
    try:
        amount = Decimal(str(price_per_gpu_eq_hour).strip())
    except InvalidOperation:
        raise ValidationFailed.on("price_per_gpu_eq_hour", "Give a price like 2.50.") from None
    closed = Period.objects.filter(
        state=PeriodState.CLOSED, month__gte=effective_from.replace(day=1)
    )
    if closed.exists():
        raise Conflict(
            f"{closed.order_by('-month').first()} is closed: a new price takes effect after "
            "the last closed month.",
            fields={"effective_from": ["After the last closed month."]},
        )
    card = RateCard(
        gpu_model=gpu_model,
        backend=backend,
        currency=currency.strip().upper(),
        price_per_gpu_eq_hour=amount,
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
            "effective_from": [None, effective_from.isoformat()],
        },
    )
    return card


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


@transaction.atomic
def period_close(*, actor: User, month: date) -> Period:
    """Freeze `month`: store every tenant's statement and lines on the charge basis in force.

    Refused (409) while the month runs, while a cluster's usage is not complete up to its end
    (naming the clusters), when it is closed already, or when a statement would mix currencies.
    """
    _may_price(actor)
    first = month.replace(day=1)
    begin, end = month_bounds(first)
    if end > timezone.now():
        raise Conflict(f"{first:%Y-%m} has not ended yet.")
    behind = _metering_holds_back(end)
    if behind:
        raise Conflict(f"Usage of {first:%Y-%m} is not complete yet: {'; '.join(behind)}.")
    period, _ = Period.objects.get_or_create(month=first)
    period = Period.objects.select_for_update().get(pk=period.pk)
    if period.state == PeriodState.CLOSED:
        raise InvalidTransition(f"{first:%Y-%m} is closed already.")
    basis = settings.PORTAL_CHARGE_BASIS
    tenant_ids = (
        UsageRecord.objects.filter(hour__gte=begin, hour__lt=end, tenant__isnull=False)
        .order_by()
        .values_list("tenant_id", flat=True)
        .distinct()
    )
    tenants = list(Tenant.objects.filter(pk__in=tenant_ids).order_by("slug"))
    month_prices = month_priced(tenants, first, basis=basis)
    problems = [
        problem for priced in month_prices.values() if (problem := currency_problem(priced))
    ]
    if problems:
        raise Conflict(" ".join(problems))
    totals = {}
    for tenant in tenants:
        priced = month_prices[tenant.pk]
        statement = Statement.objects.create(
            period=period,
            tenant=tenant,
            cost_centre=tenant.cost_centre,
            currency=priced.currency,
            basis=basis,
            total=priced.total,
        )
        StatementLine.objects.bulk_create(
            StatementLine(
                statement=statement,
                position=position,
                gpu_model=line.gpu_model,
                offering=line.offering,
                user=line.user,
                workload=line.workload,
                quantity_num=line.quantity.numerator,
                quantity_den=line.quantity.denominator,
                unit=priced.unit,
                rate_card=line.rate_card,
                rate=line.rate,
                currency=line.currency,
                amount=line.amount,
                used_gpu_hours=line.used_gpu_hours,
            )
            for position, line in enumerate(priced.lines, start=1)
        )
        totals[tenant.slug] = f"{priced.total} {priced.currency}".strip()
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
        raise PermissionDenied("Only admins reopen a closed month.")
    if not reason.strip():
        raise ValidationFailed.on("reason", "Say why the month is reopened.")
    first = month.replace(day=1)
    period = Period.objects.select_for_update().filter(month=first).first()
    if period is None or period.state != PeriodState.CLOSED:
        raise InvalidTransition(f"{first:%Y-%m} is not closed.")
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
