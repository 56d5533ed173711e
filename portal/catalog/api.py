"""`gpu-models/`, `offerings/`, `pools/` and `notebook-images/`: everyone signed in reads the
catalog; admins change it. Disabled notebook images are for admins' eyes only."""

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import User
from portal.catalog import services
from portal.catalog.filters import GpuPoolFilter, NotebookImageFilter, OfferingFilter
from portal.catalog.models import GpuModel, GpuPool, NotebookImage, Offering
from portal.catalog.serializers import (
    GpuModelSerializer,
    GpuPoolSerializer,
    NotebookImageSerializer,
    OfferingSerializer,
)
from portal.core.errors import NotFound, PermissionDenied
from portal.core.filters import FilterBackend
from portal.core.idempotency import idempotent_post
from portal.core.visibility import get_visible_or_404


def _admin(request: Request) -> User:
    user: User = request.user  # type: ignore[assignment]
    if not user.is_portal_admin:
        raise PermissionDenied(_("Only admins change the catalog."))
    return user


class _CatalogList[M: (GpuModel, Offering, GpuPool, NotebookImage)](
    ListModelMixin, GenericAPIView[M]
):
    """List (everyone signed in) and create (admins, through `create`, one catalog service)."""

    create: Callable[..., M]
    filter_backends = [FilterBackend]

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @idempotent_post
    def post(self, request: Request) -> Response:
        actor = _admin(request)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        created = type(self).create(actor=actor, **serializer.validated_data)
        return Response(self.get_serializer(created).data, status=status.HTTP_201_CREATED)


@extend_schema_view(post=extend_schema(responses={201: GpuModelSerializer}))
class GpuModelList(_CatalogList[GpuModel]):
    """GPU models: list (everyone signed in), create (admins)."""

    serializer_class = GpuModelSerializer
    queryset = GpuModel.objects.all()
    create = staticmethod(services.gpu_model_create)


class GpuModelDetail(GenericAPIView[GpuModel]):
    """One GPU model: read (everyone signed in), change (admins)."""

    serializer_class = GpuModelSerializer
    queryset = GpuModel.objects.all()
    lookup_field = "slug"

    def get(self, request: Request, slug: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    def patch(self, request: Request, slug: str) -> Response:
        actor = _admin(request)
        gpu_model = self.get_object()
        serializer = self.get_serializer(gpu_model, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        gpu_model = services.gpu_model_update(
            actor=actor, gpu_model=gpu_model, **serializer.validated_data
        )
        return Response(self.get_serializer(gpu_model).data)


@extend_schema_view(post=extend_schema(responses={201: OfferingSerializer}))
class OfferingList(_CatalogList[Offering]):
    """Offerings with their Kubernetes resources and exact GPU-eq per unit."""

    serializer_class = OfferingSerializer
    queryset = Offering.objects.select_related("gpu_model", "backend")
    filterset_class = OfferingFilter
    create = staticmethod(services.offering_create)


class OfferingDetail(GenericAPIView[Offering]):
    serializer_class = OfferingSerializer
    queryset = Offering.objects.select_related("gpu_model", "backend")
    lookup_field = "slug"

    def get_object(self) -> Offering:
        offering = self.get_queryset().filter(slug=self.kwargs["slug"]).first()
        if offering is None:
            raise NotFound(
                _("There is no offering %(slug)s.") % {"slug": repr(self.kwargs["slug"])}
            )
        return offering

    def get(self, request: Request, slug: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    def patch(self, request: Request, slug: str) -> Response:
        actor = _admin(request)
        offering = self.get_object()
        serializer = self.get_serializer(offering, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        fields: dict[str, Any] = dict(serializer.validated_data)
        offering = services.offering_update(actor=actor, offering=offering, **fields)
        return Response(self.get_serializer(offering).data)


@extend_schema_view(post=extend_schema(responses={201: GpuPoolSerializer}))
class GpuPoolList(_CatalogList[GpuPool]):
    """GPU pools (nodes of one model in one cluster, shared with one backend): list (everyone
    signed in; `?cluster=`, `?gpu_model=`, `?backend=` narrow it), create (admins; the
    cluster must be registered)."""

    serializer_class = GpuPoolSerializer
    queryset = GpuPool.objects.select_related("gpu_model", "backend")
    filterset_class = GpuPoolFilter
    create = staticmethod(services.gpu_pool_create)


class GpuPoolDetail(GenericAPIView[GpuPool]):
    """One pool, by cluster and name: read (everyone signed in), change and delete (admins)."""

    serializer_class = GpuPoolSerializer
    queryset = GpuPool.objects.select_related("gpu_model", "backend")

    def get_object(self) -> GpuPool:
        cluster, name = self.kwargs["cluster"], self.kwargs["name"]
        pool = self.get_queryset().filter(cluster=cluster, name=name).first()
        if pool is None:
            raise NotFound(
                _("There is no pool %(name)s in cluster %(cluster)s.")
                % {"name": repr(name), "cluster": repr(cluster)}
            )
        return pool

    def get(self, request: Request, cluster: str, name: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    def patch(self, request: Request, cluster: str, name: str) -> Response:
        actor = _admin(request)
        pool = self.get_object()
        serializer = self.get_serializer(pool, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        pool = services.gpu_pool_update(actor=actor, pool=pool, **serializer.validated_data)
        return Response(self.get_serializer(pool).data)

    def delete(self, request: Request, cluster: str, name: str) -> Response:
        actor = _admin(request)
        services.gpu_pool_delete(actor=actor, pool=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(post=extend_schema(responses={201: NotebookImageSerializer}))
class NotebookImageList(_CatalogList[NotebookImage]):
    """Notebook images: list (admins: all, `?enabled=` filters; others: the enabled ones),
    create (admins)."""

    serializer_class = NotebookImageSerializer
    queryset = NotebookImage.objects.all()  # for the schema; get_queryset narrows it
    create = staticmethod(services.notebook_image_create)

    filterset_class = NotebookImageFilter

    def get_queryset(self) -> QuerySet[NotebookImage]:
        user: User = self.request.user  # type: ignore[assignment]
        return NotebookImage.objects.visible_to(user)


class NotebookImageDetail(GenericAPIView[NotebookImage]):
    """One notebook image: read (admins; others an enabled one), change (admins)."""

    serializer_class = NotebookImageSerializer
    queryset = NotebookImage.objects.all()  # for the schema; get_object narrows it
    lookup_field = "slug"

    def get_object(self) -> NotebookImage:
        user: User = self.request.user  # type: ignore[assignment]
        return get_visible_or_404(NotebookImage, user, slug=self.kwargs["slug"])

    def get(self, request: Request, slug: str) -> Response:
        return Response(self.get_serializer(self.get_object()).data)

    def patch(self, request: Request, slug: str) -> Response:
        # Looked up first: a disabled image is hidden from non-admins, so it answers 404, not 403.
        image = self.get_object()
        actor = _admin(request)
        serializer = self.get_serializer(image, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        image = services.notebook_image_update(
            actor=actor, notebook_image=image, **serializer.validated_data
        )
        return Response(self.get_serializer(image).data)
