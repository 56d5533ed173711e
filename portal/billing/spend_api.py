"""`GET /api/v1/spend/`: each tenant's total per month over a range of months, the numbers of
the chargeback page's spend chart (portal.billing.spend).

Who sees what: as `statements/` (finance and admins every tenant, a lead their tenants', anyone
else an empty answer; a named tenant they may not see is 404).
"""

from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from portal.billing.api import PAGE_PARAMETERS
from portal.billing.models import Basis
from portal.billing.pricing import current_month
from portal.billing.serializers import MonthField
from portal.billing.spend import CHART_MONTHS, MAX_MONTHS, Spend, SpendRow, spend_for, spend_range
from portal.core.http import api_user


class SpendQuerySerializer(serializers.Serializer[Any]):
    """`spend/`'s query parameters (`from` and `to` are read by `spend_range`)."""

    to = serializers.CharField(required=False, max_length=7)
    tenant = serializers.SlugField(required=False, max_length=63)
    cost_centre = serializers.CharField(required=False, max_length=64)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField(required=False, max_length=7)  # a Python keyword
        return fields


class SpendRowSerializer(serializers.Serializer[SpendRow]):
    """A tenant's total for a month."""

    period = MonthField(source="month")
    tenant = serializers.SlugField(source="tenant.slug")
    tenant_name = serializers.CharField(source="tenant.name")
    cost_centre = serializers.CharField()
    currency = serializers.CharField(help_text="empty: nothing priced")
    total = serializers.DecimalField(
        max_digits=18,
        decimal_places=2,
        help_text="final: the stored statement's total; provisional: priced from the daily "
        "usage rollup, rounded once (may differ from the statement's sum of rounded lines by "
        "less than a cent per line)",
    )
    final = serializers.BooleanField(help_text="the month is closed: the statement's total")
    approximate = serializers.BooleanField(help_text="the month is open: provisional, approx.")
    problem = serializers.CharField(
        help_text="why it is not priced (rate cards in two currencies); empty: none"
    )


class SpendMonthSerializer(serializers.Serializer[Any]):
    period = serializers.CharField(help_text="YYYY-MM")
    final = serializers.BooleanField(help_text="closed: its numbers are the statements'")


class SpendTotalSerializer(serializers.Serializer[Any]):
    period = serializers.CharField(help_text="YYYY-MM")
    currency = serializers.CharField()
    total = serializers.DecimalField(max_digits=18, decimal_places=2)


class SpendPageSerializer(serializers.Serializer[Any]):
    """A page of per month x tenant totals, with every month of the range and the totals per
    month and currency of all of them (every page)."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    to = serializers.CharField(help_text="the last month, YYYY-MM")
    basis = serializers.ChoiceField(
        choices=Basis.choices, help_text="the charge basis of the open months"
    )
    months = SpendMonthSerializer(many=True)
    totals = SpendTotalSerializer(many=True)
    results = SpendRowSerializer(many=True)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = serializers.CharField(help_text="the first month, YYYY-MM")
        return fields


def _totals(spend: Spend) -> list[dict[str, str]]:
    totals: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for row in spend.rows:
        if row.currency:
            totals[(f"{row.month:%Y-%m}", row.currency)] += row.total
    return [
        {"period": period, "currency": currency, "total": f"{total:.2f}"}
        for (period, currency), total in sorted(totals.items())
    ]


class SpendList(GenericAPIView[Any]):
    """Each tenant's total per month from `from` to `to`: a closed month's stored statements'
    totals, an open month's priced from the daily usage rollup (provisional, approx.)."""

    serializer_class = SpendRowSerializer

    @extend_schema(
        operation_id="spend_list",
        parameters=[
            OpenApiParameter(
                "from",
                OpenApiTypes.STR,
                description=f"the first month, YYYY-MM; default: {CHART_MONTHS} months up to `to`",
            ),
            OpenApiParameter(
                "to",
                OpenApiTypes.STR,
                description=f"the last month, YYYY-MM; default: the current month; at most "
                f"{MAX_MONTHS} months in all",
            ),
            OpenApiParameter(
                "tenant",
                OpenApiTypes.STR,
                description="only this tenant (slug); 404 when the caller may not see its "
                "statements",
            ),
            OpenApiParameter("cost_centre", OpenApiTypes.STR, description="only this cost centre"),
            *PAGE_PARAMETERS,
        ],
        responses={200: SpendPageSerializer},
    )
    def get(self, request: Request) -> Response:
        user = api_user(request)
        params = SpendQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        values = params.validated_data
        first, last = spend_range(
            values.get("from"), values.get("to"), default_last=current_month()
        )
        spend = spend_for(
            user, first, last, tenant_slug=values.get("tenant"),
            cost_centre=values.get("cost_centre"),
        )  # fmt: skip
        page = self.paginate_queryset(spend.rows) or []
        paged = self.get_paginated_response(self.get_serializer(page, many=True).data)
        paged.data = {
            **{key: value for key, value in paged.data.items() if key != "results"},
            "from": f"{first:%Y-%m}",
            "to": f"{last:%Y-%m}",
            "basis": settings.PORTAL_CHARGE_BASIS,
            "months": [
                {"period": f"{month:%Y-%m}", "final": month in spend.closed}
                for month in spend.months
            ],
            "totals": _totals(spend),
            "results": paged.data["results"],
        }
        return paged
