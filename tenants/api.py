"""`tenants/`, `tenants/{slug}/members/`, `tenants/{slug}/quota-requests/` (API.md).

Every lookup goes through tenants.access: an invisible tenant answers 404, a visible one the
caller may not act on answers 403. Every write is one service call.
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

from portal.core.errors import PermissionDenied
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
from portal.core.visibility import get_visible_or_404
from tenants import services
from tenants.access import Access, tenant_for
from tenants.filters import TenantFilter
from tenants.models import MemberRole, Membership, QuotaRequest, Tenant
from tenants.selectors import quota_requests_for, with_quota_lines
from tenants.serializers import (
    DecisionSerializer,
    MemberInputSerializer,
    MembershipSerializer,
    QuotaRequestInputSerializer,
    QuotaRequestSerializer,
    TenantCreateSerializer,
    TenantPatchSerializer,
    TenantSerializer,
)


def _tenant_response(tenant: Tenant, *, status_code: int = status.HTTP_200_OK) -> Response:
    with_quota_lines([tenant])
    return Response(TenantSerializer(tenant).data, status=status_code)


class TenantList(ListModelMixin, GenericAPIView[Tenant]):
    """Tenants the caller may see, with quotas and remaining GPU-eq per model; admins create."""

    serializer_class = TenantSerializer
    queryset = Tenant.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = TenantFilter

    def get_queryset(self) -> QuerySet[Tenant]:
        return Tenant.objects.visible_to(api_user(self.request)).order_by("slug")

    def get(self, request: Request) -> Response:
        page = with_quota_lines(
            self.paginate_queryset(self.filter_queryset(self.get_queryset())) or []
        )
        return self.get_paginated_response(TenantSerializer(page, many=True).data)

    @extend_schema(request=TenantCreateSerializer, responses={201: TenantSerializer})
    @idempotent_post
    def post(self, request: Request) -> Response:
        user = api_user(request)
        if not user.is_portal_admin:
            raise PermissionDenied(_("Only admins create tenants."))
        serializer = TenantCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tenant = services.tenant_create(actor=user, **serializer.validated_data)
        return _tenant_response(tenant, status_code=status.HTTP_201_CREATED)


class TenantDetail(GenericAPIView[Tenant]):
    """One tenant; admins change its fields, state and quotas (all or nothing)."""

    serializer_class = TenantSerializer

    def get(self, request: Request, slug: str) -> Response:
        return _tenant_response(tenant_for(api_user(request), slug))

    @extend_schema(request=TenantPatchSerializer, responses=TenantSerializer)
    def patch(self, request: Request, slug: str) -> Response:
        user = api_user(request)
        tenant = tenant_for(user, slug, Access.ADMIN)
        serializer = TenantPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields: dict[str, Any] = dict(serializer.validated_data)
        state = fields.pop("state", None)
        quotas = fields.pop("quotas", None)
        force_quotas = fields.pop("force_quotas", False)
        tenant = services.tenant_apply_changes(
            actor=user,
            tenant=tenant,
            fields=fields,
            state=state,
            quotas=quotas,
            force_quotas=force_quotas,
        )
        return _tenant_response(tenant)


class MemberList(ListModelMixin, GenericAPIView[Membership]):
    """A tenant's members (those who see it); its leads and admins add or change them."""

    serializer_class = MembershipSerializer

    def get(self, request: Request, slug: str) -> Response:
        tenant = tenant_for(api_user(request), slug)
        members = tenant.memberships.select_related("user").order_by("user__username")
        page = self.paginate_queryset(members)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=MemberInputSerializer, responses={200: MembershipSerializer})
    @idempotent_post
    def post(self, request: Request, slug: str) -> Response:
        actor = api_user(request)
        tenant = tenant_for(actor, slug, Access.LEAD)
        serializer = MemberInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = services.membership_set(
            actor=actor,
            tenant=tenant,
            user=serializer.validated_data["username"],
            role=MemberRole(serializer.validated_data["role"]),
        )
        return Response(self.get_serializer(membership).data)


class MemberDetail(GenericAPIView[Membership]):
    serializer_class = MembershipSerializer

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str, username: str) -> Response:
        actor = api_user(request)
        tenant = tenant_for(actor, slug, Access.LEAD)
        services.membership_remove(actor=actor, tenant=tenant, username=username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class QuotaRequestList(ListModelMixin, GenericAPIView[QuotaRequest]):
    """A tenant's quota-increase requests: its leads ask; leads, finance and admins read."""

    serializer_class = QuotaRequestSerializer

    def get(self, request: Request, slug: str) -> Response:
        user = api_user(request)
        tenant = tenant_for(user, slug, Access.READ_QUOTA_REQUESTS)
        page = self.paginate_queryset(quota_requests_for(tenant))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(request=QuotaRequestInputSerializer, responses={201: QuotaRequestSerializer})
    @idempotent_post
    def post(self, request: Request, slug: str) -> Response:
        user = api_user(request)
        tenant = tenant_for(user, slug, Access.ASK_QUOTA)
        serializer = QuotaRequestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        quota_request = services.quota_request_create(
            actor=user, tenant=tenant, **serializer.validated_data
        )
        return Response(self.get_serializer(quota_request).data, status=status.HTTP_201_CREATED)


class QuotaRequestDecision(GenericAPIView[QuotaRequest]):
    """Approve or reject a pending quota request (admins); a decided one answers 409."""

    serializer_class = QuotaRequestSerializer
    decision = "approve"

    @extend_schema(request=DecisionSerializer, responses=QuotaRequestSerializer)
    @idempotent_post
    def post(self, request: Request, slug: str, pk: int) -> Response:
        user = api_user(request)
        tenant = tenant_for(user, slug, Access.ADMIN)
        quota_request = get_visible_or_404(quota_requests_for(tenant), user, pk=pk)
        serializer = DecisionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        decide = (
            services.quota_request_approve
            if self.decision == "approve"
            else services.quota_request_reject
        )
        decided = decide(
            actor=user, quota_request=quota_request, comment=serializer.validated_data["comment"]
        )
        return Response(self.get_serializer(decided).data)
