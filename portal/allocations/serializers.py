from collections.abc import Collection
from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.allocations.decisions import RequestPath
from portal.allocations.models import GpuRequest, GpuRequestExtension, Purpose
from portal.allocations.selectors import GpuRequestPreview, PriceQuote
from portal.catalog.serializers import GpuEqDisplayField, GpuEqField
from portal.core.rows import RowsListSerializer
from portal.core.serializers import StrictFieldsMixin
from portal.core.validators import INTEGER_MAX, TEXT_MAX_LENGTH


class GpuRequestSerializer(serializers.ModelSerializer[GpuRequest]):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    requester = serializers.CharField(source="requester.username", read_only=True)
    offering = serializers.CharField(source="offering.slug", read_only=True)
    gpu_model = serializers.CharField(source="gpu_model.slug", read_only=True)
    gpu_eq = GpuEqField(read_only=True)
    gpu_eq_display = GpuEqDisplayField(source="gpu_eq")
    decided_by = serializers.CharField(
        source="decided_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = GpuRequest
        fields: tuple[str, ...] = (
            "id", "tenant", "requester", "offering", "gpu_model", "count", "gpu_eq",
            "gpu_eq_display", "state", "purpose", "justification", "duration_hours", "starts_at",
            "ends_at", "decided_by", "decided_at", "decision_comment", "created_at", "updated_at",
        )  # fmt: skip
        read_only_fields: tuple[str, ...] = fields


# The names a list of requests shows of the rows it joins, read as values (`names_listed`).
LISTED_NAMES_OF_REQUEST = {
    "tenant_slug": "tenant__slug",
    "requester_username": "requester__username",
    "decided_by_username": "decided_by__username",
}


class GpuRequestListSerializer(GpuRequestSerializer):
    """`GpuRequestSerializer`'s rows for a list read with `names_listed`: the same JSON."""

    tenant = serializers.CharField(source="tenant_slug", read_only=True)
    requester = serializers.CharField(source="requester_username", read_only=True)
    decided_by = serializers.CharField(
        source="decided_by_username", read_only=True, allow_null=True, default=None
    )

    class Meta(GpuRequestSerializer.Meta):
        pass


class ProvisioningRunBriefSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    cluster = serializers.CharField(source="cluster.name")
    kind = serializers.CharField()
    state = serializers.CharField()
    error = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class GpuRequestDetailSerializer(GpuRequestSerializer):
    """One request with the provisioning runs that applied its allocation to the clusters."""

    provisioning_runs = serializers.SerializerMethodField()

    class Meta(GpuRequestSerializer.Meta):
        fields = (*GpuRequestSerializer.Meta.fields, "provisioning_runs")
        read_only_fields = fields

    @extend_schema_field(ProvisioningRunBriefSerializer(many=True))
    def get_provisioning_runs(self, gpu_request: GpuRequest) -> Any:
        runs = gpu_request.provisioning_runs.select_related("cluster").order_by("-created_at")
        return ProvisioningRunBriefSerializer(runs, many=True).data


class GpuRequestInputSerializer(StrictFieldsMixin, serializers.Serializer[GpuRequest]):
    multiline_fields = ("justification",)

    tenant = serializers.SlugField(max_length=61)
    offering = serializers.SlugField(max_length=61)
    count = serializers.IntegerField(min_value=1, max_value=INTEGER_MAX)
    duration_hours = serializers.IntegerField(required=False, min_value=1, max_value=INTEGER_MAX)
    purpose = serializers.ChoiceField(choices=Purpose.choices, default=Purpose.NOTEBOOK)
    justification = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=TEXT_MAX_LENGTH
    )


class CommentSerializer(StrictFieldsMixin, serializers.Serializer[GpuRequest]):
    multiline_fields: ClassVar[Collection[str]] = ("comment",)

    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=TEXT_MAX_LENGTH
    )


class ExtendSerializer(CommentSerializer):
    multiline_fields = ("comment", "reason")

    hours = serializers.IntegerField(min_value=1, max_value=INTEGER_MAX)
    reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=TEXT_MAX_LENGTH,
        help_text="why more time is needed: required when the extension goes to a lead "
        "(beyond the tenant's auto-approve hours, or held by its budget)",
    )


class GpuRequestExtensionSerializer(serializers.ModelSerializer[GpuRequestExtension]):
    """An extension of an allocation that waits for (or got) a lead's decision."""

    request = serializers.IntegerField(source="request_id", read_only=True)
    tenant = serializers.CharField(source="request.tenant.slug", read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    request_ends_at = serializers.DateTimeField(
        source="request.ends_at",
        read_only=True,
        allow_null=True,
        help_text="the allocation's end now (later by `hours` once approved)",
    )
    decided_by = serializers.CharField(
        source="decided_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = GpuRequestExtension
        fields: tuple[str, ...] = (
            "id", "request", "tenant", "requested_by", "hours", "reason", "state",
            "request_ends_at", "decided_by", "decided_at", "decision_comment", "created_at",
            "updated_at",
        )  # fmt: skip
        read_only_fields: tuple[str, ...] = fields


class PriceQuoteSerializer(serializers.Serializer[PriceQuote]):
    currency = serializers.CharField()
    per_hour = serializers.DecimalField(max_digits=18, decimal_places=2)
    total = serializers.DecimalField(
        max_digits=18, decimal_places=2, help_text="for the request's whole duration"
    )
    hours = serializers.IntegerField()


class GpuRequestPreviewSerializer(serializers.Serializer[GpuRequestPreview]):
    """What `POST requests/` would decide now. GPU-eq figures are exact strings (with a rounded
    `_display` twin); quota figures are null when the tenant has no quota for the model."""

    path = serializers.ChoiceField(
        choices=[(path.value, path.value) for path in RequestPath],
        help_text="approved: at once; lead: waits for a lead; exceeds: refused, beyond the "
        "remaining quota; unserved: refused, no GPU pool of any cluster serves the offering; "
        "no-quota: refused, the tenant has no quota for the model",
    )
    tenant = serializers.CharField(source="tenant.slug")
    offering = serializers.CharField(source="offering.slug")
    gpu_model = serializers.CharField(source="offering.gpu_model.slug")
    count = serializers.IntegerField()
    duration_hours = serializers.IntegerField()
    gpu_eq = GpuEqField(help_text="GPU-eq of this request")
    gpu_eq_display = GpuEqDisplayField(source="gpu_eq")
    quota = GpuEqField(allow_null=True)
    used = GpuEqField(allow_null=True, help_text="held by the tenant's allocations of the model")
    remaining = GpuEqField(allow_null=True, help_text="before this request")
    remaining_after = GpuEqField(allow_null=True, help_text="after this request")
    remaining_after_display = GpuEqDisplayField(source="remaining_after", allow_null=True)
    auto_approve_gpu_eq = GpuEqField()
    auto_approve_hours = serializers.IntegerField()
    max_duration_hours = serializers.IntegerField()
    free_units = serializers.IntegerField(
        allow_null=True, help_text="free units of the offering on the clusters; null: not read"
    )
    can_ask_quota = serializers.BooleanField(help_text="the caller leads the tenant")
    message = serializers.CharField()
    price = PriceQuoteSerializer(
        allow_null=True, help_text="at today's rate card; null when the model has no price"
    )
