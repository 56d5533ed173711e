"""The two baselines every portal scenario of `make bench` is measured beside, served by
gunicorn exactly as the portal is (tests/bench/baseline_settings.py):

- a bare Django JSON view: no middleware, no database, `{"status": "ok"}` as /healthz answers;
- a DRF view that runs one indexed query and serialises 50 rows: the newest 50 audit events of
  one tenant (the `(tenant, -at)` index), with DRF's JSON renderer and no authentication,
  permission or throttle, behind the same empty middleware.

What the portal adds over these (middleware, sessions or tokens, rate limits, visibility
filters, more queries, templates) is what the benchmark's table shows.
"""

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import path
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.models import AuditEvent

ROWS = 50


def bare(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


class EventSerializer(serializers.ModelSerializer[AuditEvent]):
    class Meta:
        model = AuditEvent
        fields = (
            "id", "at", "actor_name", "action", "target_type", "target_id", "target_name",
            "tenant_id", "changes", "comment", "request_id", "source_ip", "user_agent",
        )  # fmt: skip


class IndexedRows(APIView):
    authentication_classes = ()
    permission_classes = (AllowAny,)
    throttle_classes = ()

    def get(self, request: Request) -> Response:
        tenant = int(request.query_params.get("tenant", "0"))
        rows = AuditEvent.objects.filter(tenant_id=tenant).order_by("-at")[:ROWS]
        data: Any = EventSerializer(rows, many=True).data
        return Response({"results": data})


urlpatterns = [
    path("bench/bare", bare),
    path("bench/drf", IndexedRows.as_view()),
]
