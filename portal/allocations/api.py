"""`requests/`, `requests/{id}/` and the transitions (API.md). POST answers with the decision."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import User
from portal.allocations import services
from portal.allocations.filters import GpuRequestFilter
from portal.allocations.models import GpuRequest, RequestState
from portal.allocations.selectors import (
    gpu_request_for,
    gpu_request_preview,
    gpu_requests_for,
)
from portal.allocations.serializers import (
    CommentSerializer,
    ExtendSerializer,
    GpuRequestDetailSerializer,
    GpuRequestInputSerializer,
    GpuRequestPreviewSerializer,
    GpuRequestSerializer,
)
from portal.catalog.models import Offering
from portal.core.api import error_response
from portal.core.errors import ValidationFailed
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
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
    offering = Offering.objects.select_related("gpu_model").filter(slug=offering_slug).first()
    if offering is None:
        raise ValidationFailed(
            f"offering: there is no offering {offering_slug!r}.",
            fields={"offering": [f"There is no offering {offering_slug!r}."]},
        )
    return tenant, offering, data


class GpuRequestList(ListModelMixin, GenericAPIView[GpuRequest]):
    """GPU requests the caller may see; POST asks for GPUs and answers with the decision."""

    serializer_class = GpuRequestSerializer
    queryset = GpuRequest.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = GpuRequestFilter

    def get_queryset(self) -> QuerySet[GpuRequest]:
        return gpu_requests_for(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=GpuRequestInputSerializer, responses={201: GpuRequestSerializer})
    @idempotent_post
    def post(self, request: Request) -> Response:
        user = api_user(request)
        tenant, offering, data = _request_input(request, user)
        gpu_request = services.gpu_request_submit(
            actor=user, tenant=tenant, offering=offering, **data
        )
        body = GpuRequestSerializer(gpu_request).data
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
    """approve, reject, cancel, release, revoke (with `comment`) and extend (with `hours`)."""

    serializer_class = GpuRequestSerializer
    transition = "approve"

    @extend_schema(request=CommentSerializer, responses=GpuRequestSerializer)
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        user = api_user(request)
        gpu_request = gpu_request_for(user, pk)
        body_class = ExtendSerializer if self.transition == "extend" else CommentSerializer
        comment = body_class(data=request.data)
        comment.is_valid(raise_exception=True)
        hours = comment.validated_data.get("hours", 0)
        done = services.gpu_request_transition(
            actor=user,
            gpu_request=gpu_request,
            action=self.transition,
            comment=comment.validated_data["comment"],
            hours=hours,
        )
        return Response(self.get_serializer(done).data)


class GpuRequestExtend(GpuRequestTransition):
    """extend, which alone takes `hours`; a requester asking beyond what the tenant grants at
    once is refused by policy (422): a lead extends it."""

    transition = "extend"

    @extend_schema(
        request=ExtendSerializer, responses={200: GpuRequestSerializer, 422: documented_error(422)}
    )
    def post(self, request: Request, pk: int) -> Response:
        return super().post(request, pk)
