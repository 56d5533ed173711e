"""`directory/changes/`, `directory/changes/{id}/retry`, `directory/reports/` and
`directory/reconcile`: the Keycloak directory sync, for admins (404 for everyone else)."""

from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
from portal.core.serializers import body_fields_refuse
from portal.directory import services
from portal.directory.filters import DirectoryChangeFilter
from portal.directory.models import DirectoryChange, DirectoryReport
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


class DirectoryChangeList(ListModelMixin, GenericAPIView[DirectoryChange]):
    """Changes queued for Keycloak, newest first; `?state=pending|sent|failed`."""

    serializer_class = DirectoryChangeSerializer
    queryset = DirectoryChange.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = DirectoryChangeFilter

    def get_queryset(self) -> QuerySet[DirectoryChange]:
        return directory_changes_for(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class DirectoryChangeRetry(GenericAPIView[DirectoryChange]):
    """Send a failed change again; 409 unless it has failed."""

    serializer_class = DirectoryChangeSerializer

    @extend_schema(request=None, responses={202: DirectoryChangeSerializer})
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        body_fields_refuse(request.data)
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
        body_fields_refuse(request.data)
        services.directory_reconcile_request(actor=api_user(request))
        body = {
            "queued": True,
            "detail": _("The report appears in %(path)s.") % {"path": "directory/reports/"},
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)
