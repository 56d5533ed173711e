"""`usage/` (usage totals grouped as asked; `?format=csv` downloads) and `usage/windows/` (the
metering windows, admins) under /api/v1/ (API.md).

Every answer says up to when its numbers are final: the earliest watermark of the metered
clusters in the `Usage-Complete-Until` header (JSON and CSV alike), and in the JSON also as
`complete_until` with the per-cluster `watermarks` beside the page.
"""

from datetime import UTC, datetime
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.errors import ValidationFailed
from portal.core.exports import csv_download
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.pagination import PagePagination
from portal.metering.filters import UsageWindowFilter
from portal.metering.models import UsageWindow
from portal.metering.selectors import (
    GROUPS,
    UsageQuery,
    UsageQueryError,
    usage_complete_until,
    usage_totals,
    usage_watermarks,
    usage_windows_for,
)
from portal.metering.serializers import (
    DEFAULT_DAYS,
    UsagePageSerializer,
    UsageQuerySerializer,
    UsageRowSerializer,
    UsageWindowSerializer,
    WatermarkSerializer,
    group_by_values,
    row_columns,
    row_values,
)
from tenants.access import tenant_for

COMPLETE_UNTIL_HEADER = "Usage-Complete-Until"
MAX_PAGE_SIZE = PagePagination.max_page_size

USAGE_PARAMETERS = [
    OpenApiParameter(
        "from",
        OpenApiTypes.DATE,
        description=f"first day, inclusive (UTC); default: {DEFAULT_DAYS - 1} days before `to`",
    ),
    OpenApiParameter("to", OpenApiTypes.DATE, description="last day, inclusive; default: today"),
    OpenApiParameter(
        "group_by",
        OpenApiTypes.STR,
        many=True,
        explode=True,
        description="any of "
        + ", ".join(GROUPS)
        + "; repeated and/or comma-separated, e.g. `group_by=tenant,day`; none: one total row",
    ),
    OpenApiParameter("tenant", OpenApiTypes.STR, description="only this tenant (slug)"),
    OpenApiParameter(
        "format",
        OpenApiTypes.STR,
        enum=["json", "csv"],
        description="csv: every row, unpaginated, with a header row (the JSON rows' columns)",
    ),
    OpenApiParameter("page", OpenApiTypes.INT, description="page number (JSON)"),
    OpenApiParameter(
        "page_size", OpenApiTypes.INT, description=f"rows per page (JSON), at most {MAX_PAGE_SIZE}"
    ),
]


def _header_value(moment: datetime | None) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else ""


class UsageList(GenericAPIView[Any]):
    """Usage the caller may see (a developer their own, a lead their tenants', finance and
    admins all), summed over the days from `from` to `to` and grouped by `group_by`, in group
    order. Reserved and requested GPU-eq-hours are exact fractions; used GPU-hours and GPU
    memory GiB-hours decimals. Numbers after `complete_until` may still grow as windows are
    collected."""

    serializer_class = UsageRowSerializer

    @extend_schema(
        operation_id="usage_list",
        parameters=USAGE_PARAMETERS,
        responses={
            (200, "application/json"): OpenApiResponse(
                UsagePageSerializer, description="a page of rows, with the watermarks"
            ),
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="format=csv: every row, with a header row"
            ),
        },
    )
    def get(self, request: Request) -> Response | StreamingHttpResponse:
        user = api_user(request)
        params = UsageQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        values = params.validated_data
        groups = group_by_values(request.query_params.getlist("group_by"))
        tenant = tenant_for(user, values["tenant"]) if values.get("tenant") else None
        query = UsageQuery(start=values["from"], end=values["to"], group_by=groups, tenant=tenant)
        try:
            rows = usage_totals(user, query)
        except UsageQueryError as error:
            raise ValidationFailed.on(error.field, str(error)) from error
        marks = usage_watermarks()
        complete_until = usage_complete_until(marks)
        columns = row_columns(groups)
        response: Response | StreamingHttpResponse
        if values["format"] == "csv":
            response = self._csv(rows=[row.as_dict() for row in rows], columns=columns)
        else:
            page = self.paginate_queryset(rows) or []
            paged = self.get_paginated_response(
                [row_values(row.as_dict(), columns) for row in page]
            )
            paged.data = {
                **{key: value for key, value in paged.data.items() if key != "results"},
                "complete_until": _header_value(complete_until) or None,
                "watermarks": WatermarkSerializer(marks, many=True).data,  # type: ignore[arg-type]
                "results": paged.data["results"],
            }
            response = paged
        response[COMPLETE_UNTIL_HEADER] = _header_value(complete_until)
        return response

    def _csv(self, *, rows: list[dict[str, Any]], columns: list[str]) -> StreamingHttpResponse:
        values = (
            ["" if value is None else value for value in row_values(row, columns).values()]
            for row in rows
        )
        return csv_download(columns, values, filename="usage.csv")


class UsageWindowList(ListModelMixin, GenericAPIView[UsageWindow]):
    """Every cluster's hourly metering windows, newest first (admins): how far collecting each
    got (`started`, `done`, `failed` with Prometheus's reason), the attempts, the queries it
    took and the records it wrote."""

    serializer_class = UsageWindowSerializer
    queryset = UsageWindow.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = UsageWindowFilter

    def get_queryset(self) -> QuerySet[UsageWindow]:
        return usage_windows_for(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
