"""Chargeback under /api/v1/ (API.md): `rate-cards/`, `statements/`, `statements/{id}/`,
`statements/{id}/lines/` (`?format=csv` streams, `?format=xlsx`), `periods/` and
`periods/{YYYY-MM}/close`, `reopen`.

Who sees what (DOMAIN.md): everyone signed in reads the rate cards, finance and admins write
them. Statements: finance and admins all, a lead their tenants', developers none (an empty
list; a named tenant or statement they may not see is 404). Periods are finance's and the
admins' alone: to anyone else `periods/` and the close and reopen routes do not exist (404).
Finance and admins close a month; only admins reopen one (finance: 403), with a reason.
"""

from typing import Any

from django.db.models import QuerySet
from django.http.response import HttpResponseBase
from django.utils.translation import gettext
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import User
from portal.billing import services
from portal.billing.downloads import FORMATS, statement_download
from portal.billing.filters import RateCardFilter
from portal.billing.models import Period, RateCard
from portal.billing.pricing import current_month
from portal.billing.selectors import (
    LINE_COLUMNS,
    LineView,
    MonthStatements,
    StatementView,
    month_of,
    periods,
    rate_cards,
    statement_for,
    statement_history,
    statement_line_count,
    statement_lines,
    statements_for,
)
from portal.billing.serializers import (
    HistoryEntrySerializer,
    LinePageSerializer,
    LineSerializer,
    PeriodDetailSerializer,
    PeriodSerializer,
    RateCardInputSerializer,
    RateCardSerializer,
    ReopenSerializer,
    StatementDetailSerializer,
    StatementPageSerializer,
    StatementQuerySerializer,
    StatementSerializer,
)
from portal.core.api import choice_param
from portal.core.errors import NotFound, PermissionDenied
from portal.core.exports import XLSX_CONTENT_TYPE
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
from portal.core.pagination import PagePagination
from portal.core.serializers import body_fields_refuse

LINE_FORMATS = ("json", *FORMATS)

PAGE_PARAMETERS = [
    OpenApiParameter("page", OpenApiTypes.INT, description="page number"),
    OpenApiParameter(
        "page_size",
        OpenApiTypes.INT,
        description=f"rows per page, at most {PagePagination.max_page_size}",
    ),
]
STATEMENT_PARAMETERS = [
    OpenApiParameter(
        "period", OpenApiTypes.STR, description="the month, YYYY-MM; default: the current month"
    ),
    OpenApiParameter(
        "tenant",
        OpenApiTypes.STR,
        description="only this tenant (slug); 404 when the caller may not see its statements",
    ),
    OpenApiParameter("cost_centre", OpenApiTypes.STR, description="only this cost centre"),
    *PAGE_PARAMETERS,
]
LINE_PARAMETERS = [
    OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        enum=list(LINE_FORMATS),
        description="csv (streamed) or xlsx: every line, with a header row: "
        + ", ".join(LINE_COLUMNS)
        + ". No total row: the statement's total is the sum of the amounts. In xlsx, quantity, "
        "rate and amount are numbers (quantity to double precision; csv and json keep it exact).",
    ),
    *PAGE_PARAMETERS,
]
MONTH_PARAMETER = OpenApiParameter(
    "month", OpenApiTypes.STR, OpenApiParameter.PATH, description="YYYY-MM"
)


def _sets_prices(user: User) -> User:
    if not (user.is_finance or user.is_portal_admin):
        raise PermissionDenied(gettext("Only finance and admins set prices."))
    return user


def _sees_periods(user: User) -> User:
    """Finance and admins; to anyone else periods do not exist."""
    if not user.sees_all_tenants:
        raise NotFound(gettext("Not found."))
    return user


class RateCardList(ListModelMixin, GenericAPIView[RateCard]):
    """Rate cards, newest first per GPU model and backend (everyone signed in: the prices that
    apply); POST adds a price (finance and admins)."""

    serializer_class = RateCardSerializer
    queryset = RateCard.objects.none()  # for the schema; get_queryset reads the selector
    filter_backends = [FilterBackend]
    filterset_class = RateCardFilter

    def get_queryset(self) -> QuerySet[RateCard]:
        return rate_cards().select_related("created_by")

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=RateCardInputSerializer, responses={201: RateCardSerializer})
    @idempotent_post
    def post(self, request: Request) -> Response:
        actor = _sets_prices(api_user(request))
        serializer = RateCardInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        card = services.rate_card_create(actor=actor, **serializer.validated_data)
        return Response(RateCardSerializer(card).data, status=status.HTTP_201_CREATED)


class StatementList(GenericAPIView[Any]):
    """A month's statements the caller may see, by tenant: final ones for a closed month,
    provisional ones (priced from the usage so far) for an open one, for the tenants with usage
    in it. The totals per cost centre and currency cover every statement of the answer, not
    only the page's."""

    serializer_class = StatementSerializer

    @extend_schema(
        operation_id="statements_list",
        parameters=STATEMENT_PARAMETERS,
        responses={200: StatementPageSerializer},
    )
    def get(self, request: Request) -> Response:
        user = api_user(request)
        params = StatementQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        values = params.validated_data
        month = month_of(values["period"], field="period") if "period" in values else None
        month = month or current_month()
        statements = MonthStatements(
            user, month, tenant_slug=values.get("tenant"), cost_centre=values.get("cost_centre")
        )
        page = self.paginate_queryset(statements) or []  # type: ignore[arg-type]
        paged = self.get_paginated_response(self.get_serializer(page, many=True).data)
        paged.data = {
            **{key: value for key, value in paged.data.items() if key != "results"},
            "period": f"{month:%Y-%m}",
            "cost_centres": [
                {
                    "cost_centre": row.cost_centre,
                    "currency": row.currency,
                    "total": f"{row.total:.2f}",
                }
                for row in statements.centre_totals()
            ],
            "results": paged.data["results"],
        }
        return paged


class StatementDetail(GenericAPIView[Any]):
    """One statement (`<YYYY-MM>-<tenant slug>`) with its history: the month's closes and
    reopenings from the audit, with this tenant's total in each."""

    serializer_class = StatementDetailSerializer

    def get(self, request: Request, statement_id: str) -> Response:
        statement = statement_for(api_user(request), statement_id)
        history = HistoryEntrySerializer(statement_history(statement), many=True).data  # type: ignore[arg-type]
        return Response({**StatementSerializer(statement).data, "history": history})


class _LinePages:
    """A statement's lines as the sequence the paginator slices: a final statement's page is
    read from the database by position; a provisional one is priced once."""

    def __init__(self, statement: StatementView) -> None:
        self.statement = statement
        self.priced = None if statement.final else list(statement_lines(statement))

    def __len__(self) -> int:
        if self.priced is not None:
            return len(self.priced)
        return statement_line_count(self.statement)

    def __getitem__(self, part: slice) -> list[LineView]:
        if self.priced is not None:
            return self.priced[part]
        return list(statement_lines(self.statement, start=part.start or 0, stop=part.stop))


class StatementLines(GenericAPIView[Any]):
    """A statement's lines, in order: GPU model x offering x user x workload x rate, with the
    exact quantity, the rate and the amount (rounded once, half up, to the cent)."""

    serializer_class = LineSerializer

    @extend_schema(
        operation_id="statement_lines",
        parameters=LINE_PARAMETERS,
        responses={
            (200, "application/json"): OpenApiResponse(LinePageSerializer, description="a page"),
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="format=csv: every line, with a header row"
            ),
            (200, XLSX_CONTENT_TYPE): OpenApiResponse(
                OpenApiTypes.BINARY, description="format=xlsx: every line, with a header row"
            ),
        },
    )
    def get(self, request: Request, statement_id: str) -> HttpResponseBase:
        user = api_user(request)
        fmt = choice_param(request, "format", LINE_FORMATS) or "json"
        statement = statement_for(user, statement_id)
        if fmt in FORMATS:
            return statement_download(statement, fmt)
        page = self.paginate_queryset(_LinePages(statement)) or []  # type: ignore[arg-type]
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class PeriodList(ListModelMixin, GenericAPIView[Period]):
    """The months chargeback knows (finance and admins), newest first: open or closed, the
    charge basis a close used, when and by whom. A month nobody closed yet is not listed."""

    serializer_class = PeriodSerializer
    queryset = Period.objects.none()  # for the schema; get_queryset reads the selector

    def get_queryset(self) -> QuerySet[Period]:
        return periods().select_related("closed_by")

    def get(self, request: Request) -> Response:
        _sees_periods(api_user(request))
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


def _period_answer(user: User, period: Period) -> Response:
    statements = statements_for(user, period.month)
    return Response(PeriodDetailSerializer({"period": period, "statements": statements}).data)


class PeriodClose(GenericAPIView[Period]):
    """Close a month (finance and admins): its statements are stored and never recomputed.
    409 while the month runs, while a cluster's usage is not complete up to its end (the
    message names the clusters), when it is closed already, or when a statement would mix
    currencies."""

    serializer_class = PeriodDetailSerializer

    @extend_schema(
        operation_id="period_close",
        request=None,
        parameters=[MONTH_PARAMETER],
        responses={200: PeriodDetailSerializer},
    )
    @idempotent_post
    def post(self, request: Request, month: str) -> Response:
        body_fields_refuse(request.data)
        actor = _sees_periods(api_user(request))
        period = services.period_close(actor=actor, month=month_of(month, field="period"))
        return _period_answer(actor, period)


class PeriodReopen(GenericAPIView[Period]):
    """Reopen a closed month (admins; finance: 403) with a `reason`: its stored statements are
    deleted and it is provisional until closed again. 409 when it is not closed."""

    serializer_class = PeriodDetailSerializer

    @extend_schema(
        operation_id="period_reopen",
        request=ReopenSerializer,
        parameters=[MONTH_PARAMETER],
        responses={200: PeriodDetailSerializer},
    )
    @idempotent_post
    def post(self, request: Request, month: str) -> Response:
        actor = _sees_periods(api_user(request))
        if not actor.is_portal_admin:
            raise PermissionDenied(gettext("Only admins reopen a closed month."))
        first = month_of(month, field="period")
        body = ReopenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        reason = body.validated_data["reason"]
        period = services.period_reopen(actor=actor, month=first, reason=reason)
        return _period_answer(actor, period)
