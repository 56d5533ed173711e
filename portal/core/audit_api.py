"""`/api/v1/audit-events/`: the audit trail for automation; `?format=csv` exports (admins)."""

from typing import Any

from django.conf import settings
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.errors import Conflict, PermissionDenied
from portal.core.exports import csv_query_download
from portal.core.filters import AuditEventFilter, FilterBackend
from portal.core.models import AuditEvent
from portal.core.rows import RowsListSerializer
from portal.core.selectors import audit_events_for

CSV_COLUMNS = (
    "at", "actor_name", "action", "target_type", "target_id", "target_name", "tenant",
    "changes", "comment", "request_id", "source_ip", "user_agent",
)  # fmt: skip

# The text columns of the query behind the CSV columns from `actor_name` to `request_id`.
CSV_TEXT_COLUMNS = (
    "actor_name", "action", "target_type", "target_id", "target_name", "tenant__slug",
    "changes_text", "comment", "request_id",
)  # fmt: skip


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.CharField(source="actor_name")
    # Null for events that belong to no tenant (the catalog, users, global settings).
    # Read as text (not a related field), so that the list's plan is kept (portal/core/rows.py).
    tenant = serializers.CharField(
        source="tenant.slug", read_only=True, allow_null=True, default=None
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = AuditEvent
        fields = (
            "id", "at", "actor", "action", "target_type", "target_id", "target_name", "tenant",
            "changes", "comment", "request_id", "source_ip", "user_agent",
        )  # fmt: skip


FORMAT = OpenApiParameter(
    "format", OpenApiTypes.STR, enum=["csv"], description="csv to download (admins)"
)


class AuditEventList(ListAPIView[AuditEvent]):
    """Audit events the caller may see, newest first, filtered by query parameters."""

    serializer_class = AuditEventSerializer
    queryset = AuditEvent.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = AuditEventFilter

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_events_for(self.request.user)  # type: ignore[arg-type]

    @extend_schema(
        parameters=[FORMAT],
        responses={
            (200, "application/json"): AuditEventSerializer,
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR, description="format=csv: every event, with a header row"
            ),
        },
    )
    def get(  # type: ignore[override]
        self, request: Request, *args: object, **kwargs: object
    ) -> Response | StreamingHttpResponse:
        if request.query_params.get("format") == "csv":
            return self._csv(request)
        return super().get(request, *args, **kwargs)

    def _csv(self, request: Request) -> StreamingHttpResponse:
        if not request.user.is_portal_admin:  # type: ignore[union-attr]
            raise PermissionDenied(_("Only admins export the audit log."))
        events = self.filter_queryset(self.get_queryset())
        limit: int = settings.PORTAL_AUDIT_EXPORT_LIMIT
        if events[: limit + 1].count() > limit:
            raise Conflict(
                _(
                    "More than %(limit)s events match: narrow the export with its filters"
                    " (since, until, tenant, action)."
                )
                % {"limit": f"{limit:,}"}
            )
        # The changes as the database writes JSON: no decoding and encoding again per row.
        rows = events.annotate(changes_text=Cast("changes", TextField())).values_list(
            "at", "actor_name", "action", "target_type", "target_id", "target_name",
            "tenant__slug", "changes_text", "comment", "request_id", "source_ip", "user_agent",
        )  # fmt: skip
        return csv_query_download(
            CSV_COLUMNS,
            rows,
            [
                ("time", "at"),
                *[("text", name) for name in CSV_TEXT_COLUMNS],
                ("address", "source_ip"),
                ("text", "user_agent"),
            ],
            filename="audit-events.csv",
            rows=lambda: (_csv_row(row) for row in rows.iterator(chunk_size=5000)),
        )


def _csv_row(row: tuple[Any, ...]) -> tuple[object, ...]:
    at, actor, action, target_type, target_id, name, tenant, changes, *rest = row
    comment, request_id, source_ip, user_agent = rest
    return (
        at.isoformat(), actor, action, target_type, target_id, name, tenant or "",
        changes, comment, request_id, source_ip or "", user_agent,
    )  # fmt: skip
