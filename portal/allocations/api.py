"""`requests/`, `requests/{id}/` and the transitions (API.md). POST answers with the decision.

`requests/{id}/extend` answers 200 with the allocation when it is extended at once, and 202
with the pending extension when a lead decides; `extensions/` lists extensions, and
`extensions/{id}/approve`, `reject` and `cancel` decide or withdraw a pending one.
"""

from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import User
from portal.allocations import services
from portal.allocations.filters import GpuRequestExtensionFilter, GpuRequestFilter
from portal.allocations.models import GpuRequest, GpuRequestExtension, RequestState
from portal.allocations.selectors import (
    extension_for,
    extensions_for,
    gpu_request_for,
    gpu_request_preview,
    gpu_requests_for,
)
from portal.allocations.serializers import (
    LISTED_NAMES_OF_REQUEST,
    CommentSerializer,
    ExtendSerializer,
    GpuRequestDetailSerializer,
    GpuRequestExtensionSerializer,
    GpuRequestInputSerializer,
    GpuRequestListSerializer,
    GpuRequestPreviewSerializer,
    GpuRequestSerializer,
)
from portal.catalog.cache import offering_by_slug
from portal.catalog.models import Offering
from portal.core.api import error_response
from portal.core.errors import ValidationFailed
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
from portal.core.rows import names_listed, row_writer
from portal.core.schema import documented_error
from tenants.access import Access, tenant_for
from tenants.models import Tenant


def _request_input(request: Request, user: User) -> tuple[Tenant, Offering, dict[str, Any]]:
    """A request's body, checked: the tenant (404 when the caller may not see it), the offering
    (bad input when there is none) and the other fields."""
    serializer = GpuRequestInputSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data: dict[str, Any] = dict(serializer.validated_data)
    tenant = tenant_for(user, data.pop("tenant"), Access.REQUEST)
    offering_slug = data.pop("offering")
    offering = offering_by_slug(offering_slug)  # the process's catalog rows
    if offering is None:
        message = _("There is no offering %(slug)r.") % {"slug": offering_slug}
        raise ValidationFailed(f"offering: {message}", fields={"offering": [message]})
    return tenant, offering, data


class GpuRequestList(ListModelMixin, GenericAPIView[GpuRequest]):
    """GPU requests the caller may see; POST asks for GPUs and answers with the decision."""

    serializer_class = GpuRequestSerializer
    queryset = GpuRequest.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = GpuRequestFilter

    def get_queryset(self) -> QuerySet[GpuRequest]:
        # The names of the tenant, the requester and the decider as values of each row, not
        # joined instances (`names_listed`), read by the list's own serializer: the same JSON.
        return names_listed(gpu_requests_for(api_user(self.request)), LISTED_NAMES_OF_REQUEST)

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(GpuRequestListSerializer(page, many=True).data)

    @extend_schema(request=GpuRequestInputSerializer, responses={201: GpuRequestSerializer})
    @idempotent_post
    def post(self, request: Request) -> Response:
        user = api_user(request)
        tenant, offering, data = _request_input(request, user)
        gpu_request = services.gpu_request_submit(
            actor=user, tenant=tenant, offering=offering, **data
        )
        # Written through the list's plan, kept for the process (portal/core/rows.py).
        body = row_writer(GpuRequestSerializer())(gpu_request)
        if gpu_request.state == RequestState.REJECTED:
            # Refused for quota, or for an offering no pool serves: on record, and a conflict
            # for the caller.
            unserved = gpu_request.refused_for == "unserved"
            response = error_response(
                status_code=status.HTTP_409_CONFLICT,
                code="offering_unserved" if unserved else "quota_exceeded",
                message=gpu_request.decision_comment,
                fields={"offering" if unserved else "count": [gpu_request.decision_comment]},
            )
            response.data["request"] = body
            return response
        return Response(body, status=status.HTTP_201_CREATED)


class GpuRequestPreviewView(GenericAPIView[GpuRequest]):
    """What `POST requests/` would decide now for the same body: the path (approved at once,
    waiting for a lead, beyond the remaining quota) and the numbers. Nothing is written."""

    serializer_class = GpuRequestPreviewSerializer  # type: ignore[assignment]

    @extend_schema(request=GpuRequestInputSerializer, responses={200: GpuRequestPreviewSerializer})
    def post(self, request: Request) -> Response:
        user = api_user(request)
        tenant, offering, data = _request_input(request, user)
        data.pop("justification", None)
        preview = gpu_request_preview(user=user, tenant=tenant, offering=offering, **data)
        return Response(GpuRequestPreviewSerializer(preview).data)


class GpuRequestDetail(GenericAPIView[GpuRequest]):
    """One request with its allocation's times and its provisioning runs."""

    serializer_class = GpuRequestDetailSerializer

    def get(self, request: Request, pk: int) -> Response:
        return Response(self.get_serializer(gpu_request_for(api_user(request), pk)).data)


class GpuRequestTransition(GenericAPIView[GpuRequest]):
    """approve, reject, cancel, release, revoke (with `comment`); extend is GpuRequestExtend."""

    serializer_class = GpuRequestSerializer
    transition = "approve"

    @extend_schema(request=CommentSerializer, responses=GpuRequestSerializer)
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        user = api_user(request)
        gpu_request = gpu_request_for(user, pk)
        comment = CommentSerializer(data=request.data)
        comment.is_valid(raise_exception=True)
        done = services.gpu_request_transition(
            actor=user,
            gpu_request=gpu_request,
            action=self.transition,
            comment=comment.validated_data["comment"],
        )
        return Response(self.get_serializer(done).data)


class GpuRequestExtend(GpuRequestTransition):
    """extend by `hours`: 200 with the allocation when it is extended at once (within the
    tenant's policy, or asked by a lead of the tenant or an admin); beyond that, 202 with the
    extension that now waits for a lead, when a `reason` says why, and 422 (refused by policy)
    without one. 409 when an extension already waits on the allocation."""

    transition = "extend"

    @extend_schema(
        request=ExtendSerializer,
        responses={
            200: GpuRequestSerializer,
            202: GpuRequestExtensionSerializer,
            422: documented_error(422),
        },
    )
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        user = api_user(request)
        gpu_request = gpu_request_for(user, pk)
        body = ExtendSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        done = services.gpu_request_extend(
            actor=user,
            gpu_request=gpu_request,
            hours=body.validated_data["hours"],
            # `comment` came before `reason`: read as the reason when no reason is given.
            reason=body.validated_data["reason"] or body.validated_data["comment"],
        )
        if done.extension_pending is not None:
            return Response(
                GpuRequestExtensionSerializer(done.extension_pending).data,
                status=status.HTTP_202_ACCEPTED,
            )
        return Response(GpuRequestSerializer(done).data)


class GpuRequestExtensionList(ListModelMixin, GenericAPIView[GpuRequestExtension]):
    """Extensions the caller may see (as their allocations): their own, their tenants' for a
    lead, all for admins and finance. Filter by state, tenant, mine; oldest or newest first."""

    serializer_class = GpuRequestExtensionSerializer
    queryset = GpuRequestExtension.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = GpuRequestExtensionFilter

    def get_queryset(self) -> QuerySet[GpuRequestExtension]:
        return extensions_for(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class GpuRequestExtensionDetail(GenericAPIView[GpuRequestExtension]):
    """One extension."""

    serializer_class = GpuRequestExtensionSerializer

    def get(self, request: Request, pk: int) -> Response:
        return Response(self.get_serializer(extension_for(api_user(request), pk)).data)


class GpuRequestExtensionTransition(GenericAPIView[GpuRequestExtension]):
    """approve or reject a pending extension (a lead of the tenant, not the requester, or an
    admin; with `comment`), or cancel it (whoever asked). Anything but pending answers 409;
    approving an extension whose allocation ended, or that no longer fits the tenant's maximum
    duration or quota, 409 too."""

    serializer_class = GpuRequestExtensionSerializer
    transition = "approve"

    @extend_schema(request=CommentSerializer, responses=GpuRequestExtensionSerializer)
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        user = api_user(request)
        extension = extension_for(user, pk)
        body = CommentSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        done = services.gpu_request_extension_transition(
            actor=user,
            extension=extension,
            action=self.transition,
            comment=body.validated_data["comment"],
        )
        return Response(self.get_serializer(done).data)
