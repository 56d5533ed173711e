"""`/api/v1/audit-events/`: the audit trail for automation; `?format=csv` exports (admins)."""

import json
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.errors import PermissionDenied
from portal.core.exports import csv_download
from portal.core.filters import AuditEventFilter, FilterBackend
from portal.core.models import AuditEvent
from portal.core.selectors import audit_events_for

CSV_LIMIT = 100_000
CSV_COLUMNS = (
    "at", "actor_name", "action", "target_type", "target_id", "target_name", "tenant",
    "changes", "comment", "request_id", "source_ip", "user_agent",
)  # fmt: skip


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    actor = serializers.CharField(source="actor_name")
    # Null for events that belong to no tenant (the catalog, users, global settings).
    tenant: "serializers.SlugRelatedField[Any]" = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )

    class Meta:
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
        events = self.filter_queryset(self.get_queryset())[:CSV_LIMIT]
        rows = (_csv_row(event) for event in events.iterator(chunk_size=2000))
        return csv_download(CSV_COLUMNS, rows, filename="audit-events.csv")


def _csv_row(event: AuditEvent) -> list[object]:
    return [
        event.at.isoformat(), event.actor_name, event.action, event.target_type,
        event.target_id, event.target_name, event.tenant.slug if event.tenant else "",
        json.dumps(event.changes, sort_keys=True), event.comment, event.request_id,
        event.source_ip or "", event.user_agent,
    ]  # fmt: skip
