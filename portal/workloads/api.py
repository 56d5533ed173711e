"""`notebooks/`, `notebooks/{id}/` and the actions (API.md): the same services as the pages."""

import functools
from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.core.errors import ValidationFailed
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
from portal.core.rows import names_listed
from portal.core.serializers import body_fields_refuse
from portal.workloads import services
from portal.workloads.filters import NotebookFilter
from portal.workloads.models import Notebook
from portal.workloads.selectors import notebook_for, notebooks_for
from portal.workloads.serializers import (
    LISTED_NAMES_OF_NOTEBOOK,
    NotebookDetailSerializer,
    NotebookLaunchSerializer,
    NotebookListSerializer,
    NotebookSerializer,
)

# The columns a list of notebooks writes nothing from: the notebook's token, events and
# bookkeeping times, and of its allocation all but what `NotebookListSerializer` reads (its
# offering, count and GPU-eq). Half the columns of a page, and most of its date-times.
_LISTED_OF_ALLOCATION = {"id", "offering_id", "count", "gpu_eq_num", "gpu_eq_den"}
_UNLISTED_OF_NOTEBOOK = ("token", "events", "observed_at", "observe_requested_at", "cull_notice_at")


@functools.cache
def _unlisted() -> tuple[str, ...]:
    allocation = Notebook._meta.get_field("allocation").related_model._meta
    return _UNLISTED_OF_NOTEBOOK + tuple(
        f"allocation__{field.name}"
        for field in allocation.concrete_fields
        if field.attname not in _LISTED_OF_ALLOCATION
    )


class NotebookList(ListModelMixin, GenericAPIView[Notebook]):
    """Notebooks the caller may see (own; a lead's tenants'; all for admins). POST launches."""

    serializer_class = NotebookSerializer
    queryset = Notebook.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = NotebookFilter

    def get_queryset(self) -> QuerySet[Notebook]:
        # The tenant's slug and the owner's name as values of each row, not joined instances
        # (`names_listed`; a page of 50 made 200 model instances), read by the list's own
        # serializer: the same JSON. The allocation stays joined (its offering and count).
        listed = names_listed(notebooks_for(api_user(self.request)), LISTED_NAMES_OF_NOTEBOOK)
        return listed.select_related("allocation").defer(*_unlisted())

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(NotebookListSerializer(page, many=True).data)

    @extend_schema(request=NotebookLaunchSerializer, responses={201: NotebookDetailSerializer})
    @idempotent_post
    def post(self, request: Request) -> Response:
        user = api_user(request)
        serializer = NotebookLaunchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data: dict[str, Any] = dict(serializer.validated_data)
        notebook = services.notebook_launch(
            actor=user, allocation_id=data.pop("allocation", None), **data
        )
        body = NotebookDetailSerializer(notebook_for(user, notebook.pk), context={"user": user})
        return Response(body.data, status=status.HTTP_201_CREATED)


def _keep_workspace(request: Request) -> bool:
    value = request.query_params.get("keep_workspace", "true").lower()
    if value not in ("true", "false"):
        raise ValidationFailed.on("keep_workspace", _("Write true or false."))
    return value == "true"


class NotebookDetail(GenericAPIView[Notebook]):
    """One notebook: state, URL, warnings. DELETE removes it, keeping the workspace unless
    `?keep_workspace=false`."""

    serializer_class = NotebookDetailSerializer

    def _body(self, request: Request, notebook: Notebook) -> Any:
        return self.get_serializer(notebook, context={"user": api_user(request)}).data

    def get(self, request: Request, pk: int) -> Response:
        notebook = notebook_for(api_user(request), pk)
        services.notebook_observe_request(notebook=notebook)
        return Response(self._body(request, notebook))

    @extend_schema(
        parameters=[OpenApiParameter("keep_workspace", OpenApiTypes.BOOL, default=True)],
        responses={202: NotebookDetailSerializer},
    )
    def delete(self, request: Request, pk: int) -> Response:
        user = api_user(request)
        keep = _keep_workspace(request)
        services.notebook_delete(actor=user, notebook=notebook_for(user, pk), keep_workspace=keep)
        return Response(
            self._body(request, notebook_for(user, pk)), status=status.HTTP_202_ACCEPTED
        )


class NotebookAction(GenericAPIView[Notebook]):
    """start, stop or snooze (culling) one notebook; 409 when its state does not allow it."""

    serializer_class = NotebookDetailSerializer
    action_name = "stop"

    @extend_schema(request=None, responses=NotebookDetailSerializer)
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        body_fields_refuse(request.data)
        user = api_user(request)
        notebook = notebook_for(user, pk)
        if self.action_name == "start":
            services.notebook_start(actor=user, notebook=notebook)
        elif self.action_name == "stop":
            services.notebook_stop(actor=user, notebook=notebook)
        else:
            services.notebook_snooze(actor=user, notebook=notebook)
        body = self.get_serializer(notebook_for(user, pk), context={"user": user})
        return Response(body.data)
