from fractions import Fraction
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.catalog.gpu_eq import GpuEqError, gpu_eq_display, gpu_eq_parse
from portal.catalog.models import GpuModel, GpuPool, NotebookImage, Offering, SharingBackend
from portal.core.rows import RowsListSerializer
from portal.core.serializers import StrictFieldsMixin
from portal.core.validators import LINE_MAX_LENGTH


@extend_schema_field(
    {"type": "string", "example": "1/7", "description": "exact GPU-eq: 3, 0.25 or 1/7"}
)
class GpuEqField(serializers.Field):  # type: ignore[type-arg]
    """An exact GPU-eq: written as `"1/7"`, `"0.25"` or `3`; read as the exact string."""

    context_free = True  # its value alone makes its output (portal/core/rows.py)

    default_error_messages = {"invalid": "{reason}."}

    def to_representation(self, value: Fraction) -> str:
        return str(value)

    def to_internal_value(self, data: Any) -> Fraction:
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("invalid", reason="give a string such as 1/7 or 0.25, or a whole number")
        try:
            return gpu_eq_parse(data)
        except GpuEqError as error:
            self.fail("invalid", reason=str(error).capitalize())
            raise  # unreachable: fail() raises


@extend_schema_field(OpenApiTypes.STR)
class GpuEqDisplayField(serializers.Field):  # type: ignore[type-arg]
    """The same value rounded for people, read-only."""

    context_free = True  # its value alone makes its output (portal/core/rows.py)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: Fraction) -> str:
        return gpu_eq_display(value)


class GpuModelSerializer(StrictFieldsMixin, serializers.ModelSerializer[GpuModel]):
    class Meta:
        list_serializer_class = RowsListSerializer
        model = GpuModel
        fields = (
            "slug", "name", "vendor", "memory_mib", "node_label_key", "node_label_value", "enabled",
        )  # fmt: skip


class OfferingSerializer(StrictFieldsMixin, serializers.ModelSerializer[Offering]):
    gpu_model = serializers.SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.all())
    backend = serializers.SlugRelatedField(slug_field="slug", queryset=SharingBackend.objects.all())
    gpu_eq = GpuEqField()
    gpu_eq_display = GpuEqDisplayField(source="gpu_eq")
    # Quantities are short (`1`, `10Gi`); annotation values are one line each.
    resources = serializers.DictField(child=serializers.CharField(max_length=64))
    annotations = serializers.DictField(
        child=serializers.CharField(max_length=LINE_MAX_LENGTH), required=False
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = Offering
        fields = (
            "slug", "name", "gpu_model", "backend", "size", "whole", "resources", "annotations",
            "gpu_eq", "gpu_eq_display", "max_units_per_workload", "enabled",
        )  # fmt: skip


class SharingBackendSerializer(StrictFieldsMixin, serializers.ModelSerializer[SharingBackend]):
    multiline_fields = ("description",)

    class Meta:
        model = SharingBackend
        fields = ("slug", "name", "description", "memory_isolation")


class GpuPoolSerializer(StrictFieldsMixin, serializers.ModelSerializer[GpuPool]):
    cluster = serializers.CharField(
        max_length=63, help_text="The name of a registered cluster (clusters/)"
    )
    gpu_model = serializers.SlugRelatedField(slug_field="slug", queryset=GpuModel.objects.all())
    backend = serializers.SlugRelatedField(slug_field="slug", queryset=SharingBackend.objects.all())

    class Meta:
        list_serializer_class = RowsListSerializer
        model = GpuPool
        fields = ("cluster", "name", "gpu_model", "backend", "node_count", "gpus_per_node")
        # A name taken in the cluster is the service's Conflict (409), not a 400 here.
        validators: list[Any] = []


class NotebookImageSerializer(StrictFieldsMixin, serializers.ModelSerializer[NotebookImage]):
    multiline_fields = ("description",)

    vendors = serializers.ListField(
        child=serializers.CharField(max_length=32),
        required=False,
        max_length=20,
        help_text='GPU vendors the image suits, as GPU models name them ("NVIDIA", "AMD"), '
        "matched case-insensitively; empty for every vendor",
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = NotebookImage
        fields = ("slug", "name", "image", "description", "vendors", "enabled")
