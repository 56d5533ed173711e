"""`directory/changes/`, `directory/changes/{id}/retry`, `directory/reports/` and
`directory/reconcile`: the Keycloak directory sync, for admins (404 for everyone else)."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.api import choice_param
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
from portal.directory import services
from portal.directory.models import ChangeState, DirectoryChange, DirectoryReport
from portal.directory.selectors import (
    directory_change_for,
    directory_changes_for,
    directory_reports_for,
)
from portal.directory.serializers import (
    DirectoryChangeSerializer,
    DirectoryReportSerializer,
    ReconcileQueuedSerializer,
)

CHANGE_FILTERS = [OpenApiParameter("state", OpenApiTypes.STR, enum=ChangeState.values)]


class DirectoryChangeList(ListModelMixin, GenericAPIView[DirectoryChange]):
    """Changes queued for Keycloak, newest first; `?state=pending|sent|failed`."""

    serializer_class = DirectoryChangeSerializer

    def get_queryset(self) -> QuerySet[DirectoryChange]:
        user = api_user(self.request)
        state = choice_param(self.request, "state", ChangeState.values)
        return directory_changes_for(user, states=(state,) if state else None)

    @extend_schema(parameters=CHANGE_FILTERS)
    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class DirectoryChangeRetry(GenericAPIView[DirectoryChange]):
    """Send a failed change again; 409 unless it has failed."""

    serializer_class = DirectoryChangeSerializer

    @extend_schema(request=None, responses={202: DirectoryChangeSerializer})
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        user = api_user(request)
        change = directory_change_for(user, pk)
        retried = services.directory_change_retry(actor=user, change_id=change.pk)
        return Response(self.get_serializer(retried).data, status=status.HTTP_202_ACCEPTED)


class DirectoryReportList(ListModelMixin, GenericAPIView[DirectoryReport]):
    """Reconcile reports, newest first, with the differences each found."""

    serializer_class = DirectoryReportSerializer

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(directory_reports_for(api_user(request)))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class DirectoryReconcile(GenericAPIView[Any]):
    """Queue a reconcile now (202); its report appears in `directory/reports/`. 409 when the
    sync is off."""

    serializer_class = ReconcileQueuedSerializer

    @extend_schema(request=None, responses={202: ReconcileQueuedSerializer})
    @idempotent_post
    def post(self, request: Request) -> Response:
        services.directory_reconcile_request(actor=api_user(request))
        body = {"queued": True, "detail": "The report appears in directory/reports/."}
        return Response(body, status=status.HTTP_202_ACCEPTED)
