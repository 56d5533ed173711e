"""A tenant's budget under /api/v1/: `tenants/{slug}/budget/` (GET, PUT, DELETE).

Who (DOMAIN.md, as for statements): the tenant's leads, finance and admins read it; finance and
admins set and remove it (a lead: 403). To anyone else, developers of the tenant included, it
does not exist (404), nor does a budget the tenant has not got.
"""

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from portal.billing import services
from portal.billing.budgets import BudgetStatus, budget_for, budget_status, budget_tenant
from portal.billing.models import Budget, BudgetUnit
from portal.billing.serializers import MonthField
from portal.core.errors import PermissionDenied
from portal.core.http import api_user
from portal.core.serializers import StrictFieldsMixin


@extend_schema_field({"type": "string", "example": "1500.00", "pattern": r"^\d{1,16}(\.\d{1,2})?$"})
class AmountField(serializers.DecimalField):
    """A budget's amount as a string ("1500.00"), never a JSON number: more than 0, up to 16
    whole digits and 2 decimals."""

    context_free = True  # its value alone makes its output (portal/core/rows.py)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_digits=18, decimal_places=2, min_value=Decimal("0.01"), **kwargs)

    def to_internal_value(self, data: Any) -> Decimal:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class BurnPointSerializer(serializers.Serializer[Any]):
    day = serializers.DateField()
    spent = serializers.DecimalField(
        max_digits=20, decimal_places=2, help_text="spent from the month's start to the day's end"
    )


class BudgetStatusSerializer(serializers.Serializer[BudgetStatus]):
    """This month against the budget."""

    month = MonthField()
    unit = serializers.CharField(source="unit_label", help_text="the currency, or GPU-eq-hours")
    spent = serializers.DecimalField(
        max_digits=20,
        decimal_places=2,
        help_text="so far: the provisional statement's total (money) or its GPU-eq-hours",
    )
    percent = serializers.DecimalField(max_digits=12, decimal_places=1)
    projected = serializers.DecimalField(
        max_digits=20,
        decimal_places=2,
        help_text="by the month's end, at the run-rate so far (spent x month / elapsed)",
    )
    projected_percent = serializers.DecimalField(max_digits=12, decimal_places=1)
    over = serializers.BooleanField(help_text="the budget is used up (100% or more)")
    problem = serializers.CharField(
        help_text="why the month cannot be measured against the budget (prices in another "
        "currency); empty: none"
    )
    series = BurnPointSerializer(many=True, help_text="cumulative, one point per day so far")


class BudgetSerializer(serializers.ModelSerializer[Budget]):
    tenant = serializers.SlugRelatedField(slug_field="slug", read_only=True)  # type: ignore[var-annotated]
    updated_by = serializers.SlugRelatedField(  # type: ignore[var-annotated]
        slug_field="username", read_only=True, allow_null=True
    )
    status = serializers.SerializerMethodField()

    class Meta:
        model = Budget
        fields = (
            "tenant", "unit", "amount", "currency", "approval_above", "updated_by", "updated_at",
            "status",
        )  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(BudgetStatusSerializer)
    def get_status(self, budget: Budget) -> dict[str, Any]:
        return dict(BudgetStatusSerializer(budget_status(budget)).data)


class BudgetInputSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    unit = serializers.ChoiceField(choices=BudgetUnit.choices)
    amount = AmountField(help_text='a string, e.g. "1500.00"; more than 0')
    currency = serializers.RegexField(
        r"^[A-Z]{3}\Z",
        max_length=3,
        required=False,
        allow_blank=True,
        default="",
        error_messages={"invalid": "Three capital letters (ISO 4217), e.g. EUR."},
        help_text="ISO 4217; required for money, ignored for GPU-eq-hours",
    )
    approval_above = serializers.BooleanField(
        required=False,
        default=False,
        help_text="above the budget, every new request of the tenant waits for a lead",
    )


def _writer(request: Request, slug: str) -> tuple[Any, Any]:
    user = api_user(request)
    tenant = budget_tenant(user, slug)
    if not (user.is_finance or user.is_portal_admin):
        raise PermissionDenied("Only finance and admins set budgets; leads read them.")
    return user, tenant


class BudgetDetail(GenericAPIView[Budget]):
    """The tenant's monthly budget with this month's status: spent so far, percent, the
    projection to the month's end and the daily burn-down. PUT sets or replaces it, DELETE
    removes it (finance and admins)."""

    serializer_class = BudgetSerializer
    queryset = Budget.objects.none()  # for the schema; the views read the selectors

    def get(self, request: Request, slug: str) -> Response:
        return Response(BudgetSerializer(budget_for(api_user(request), slug)).data)

    @extend_schema(request=BudgetInputSerializer, responses={200: BudgetSerializer})
    def put(self, request: Request, slug: str) -> Response:
        actor, tenant = _writer(request, slug)
        body = BudgetInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        budget = services.budget_set(actor=actor, tenant=tenant, **body.validated_data)
        return Response(BudgetSerializer(budget).data)

    @extend_schema(responses={204: OpenApiResponse(description="removed")})
    def delete(self, request: Request, slug: str) -> Response:
        actor, tenant = _writer(request, slug)
        services.budget_remove(actor=actor, tenant=tenant)
        return Response(status=status.HTTP_204_NO_CONTENT)
