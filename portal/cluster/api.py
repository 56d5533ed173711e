"""`provisioning-runs/`, `capacity/` and `clusters/` (API.md)."""

from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.cluster import services
from portal.cluster.filters import CapacityFilter, ProvisioningRunFilter
from portal.cluster.models import Cluster, OfferingCapacity, ProvisioningRun
from portal.cluster.selectors import (
    capacities_for,
    capacity_rows_of,
    cluster_for,
    clusters_for_admin,
    provisioning_run_for,
    provisioning_runs_for,
)
from portal.cluster.serializers import (
    CapacitySerializer,
    ClusterDetailSerializer,
    ClusterSerializer,
    ProvisioningRunDetailSerializer,
    ProvisioningRunSerializer,
)
from portal.core.errors import ValidationFailed
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.idempotency import idempotent_post
from portal.core.serializers import body_fields_refuse


class ProvisioningRunList(ListModelMixin, GenericAPIView[ProvisioningRun]):
    """Runs of the tenants the caller sees, newest first."""

    serializer_class = ProvisioningRunSerializer
    queryset = ProvisioningRun.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = ProvisioningRunFilter

    def get_queryset(self) -> QuerySet[ProvisioningRun]:
        return provisioning_runs_for(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class ProvisioningRunDetail(GenericAPIView[ProvisioningRun]):
    """One run with its per-object results (and the rendered manifests, as YAML)."""

    serializer_class = ProvisioningRunDetailSerializer

    def get(self, request: Request, pk: int) -> Response:
        return Response(self.get_serializer(provisioning_run_for(api_user(request), pk)).data)


class ProvisioningRunRetry(GenericAPIView[ProvisioningRun]):
    """Queue a failed run again (admins); 409 when the run has not failed."""

    serializer_class = ProvisioningRunDetailSerializer

    @extend_schema(request=None, responses={202: ProvisioningRunDetailSerializer})
    @idempotent_post
    def post(self, request: Request, pk: int) -> Response:
        body_fields_refuse(request.data)
        user = api_user(request)
        run = provisioning_run_for(user, pk)
        retried = services.provisioning_run_retry(actor=user, run=run)
        return Response(self.get_serializer(retried).data, status=status.HTTP_202_ACCEPTED)


class CapacityList(ListModelMixin, GenericAPIView[OfferingCapacity]):
    """Per cluster, pool and offering: total, allocated and free units (and GPU-eq), from the
    last read of the cluster's nodes and pods, a page at a time. For those who may request
    GPUs."""

    serializer_class = CapacitySerializer  # type: ignore[assignment]
    queryset = OfferingCapacity.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = CapacityFilter

    def get_queryset(self) -> QuerySet[OfferingCapacity]:
        return capacities_for(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(capacity_rows_of(self.filter_queryset(self.get_queryset())))
        return self.get_paginated_response(
            CapacitySerializer(page, many=True).data  # type: ignore[arg-type]
        )


class ClusterList(ListModelMixin, GenericAPIView[Cluster]):
    """Clusters (admins): list and register."""

    serializer_class = ClusterSerializer

    def get(self, request: Request) -> Response:
        clusters = clusters_for_admin(api_user(request))
        page = self.paginate_queryset(clusters)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(responses={201: ClusterSerializer})
    @idempotent_post
    def post(self, request: Request) -> Response:
        user = api_user(request)
        clusters_for_admin(user)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        cluster = services.cluster_create(actor=user, **serializer.validated_data)
        return Response(self.get_serializer(cluster).data, status=status.HTTP_201_CREATED)


class ClusterDetail(GenericAPIView[Cluster]):
    """One cluster with its nodes as last read (admins); PATCH changes it."""

    serializer_class = ClusterDetailSerializer

    def get(self, request: Request, name: str) -> Response:
        return Response(self.get_serializer(cluster_for(api_user(request), name)).data)

    @extend_schema(request=ClusterSerializer)
    def patch(self, request: Request, name: str) -> Response:
        user = api_user(request)
        cluster = cluster_for(user, name)
        serializer = ClusterSerializer(cluster, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        fields = dict(serializer.validated_data)
        if "name" in fields and fields.pop("name") != cluster.name:
            raise ValidationFailed(
                _("name: a cluster's name cannot change."), fields={"name": [_("Cannot change.")]}
            )
        cluster = services.cluster_update(actor=user, cluster=cluster, **fields)
        return Response(self.get_serializer(cluster).data)
