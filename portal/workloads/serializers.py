from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.allocations.serializers import ProvisioningRunBriefSerializer
from portal.catalog.serializers import GpuEqDisplayField
from portal.core.rows import RowsListSerializer
from portal.core.serializers import StrictFieldsMixin
from portal.core.validators import BIGINT_MAX, INTEGER_MAX, TEXT_MAX_LENGTH
from portal.workloads.models import Notebook
from portal.workloads.selectors import notebook_runs


class NotebookSerializer(serializers.ModelSerializer[Notebook]):
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    allocation = serializers.IntegerField(source="allocation_id", read_only=True)
    offering = serializers.CharField(source="allocation.offering.slug", read_only=True)
    gpu_model = serializers.CharField(source="allocation.offering.gpu_model.slug", read_only=True)
    units = serializers.IntegerField(source="allocation.count", read_only=True)
    gpu_eq_display = GpuEqDisplayField(source="allocation.gpu_eq")
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    kubernetes_name = serializers.CharField(read_only=True)
    image = serializers.CharField(source="image.slug", read_only=True)
    cpu_cores = serializers.DecimalField(max_digits=6, decimal_places=3, read_only=True)

    class Meta:
        list_serializer_class = RowsListSerializer
        model = Notebook
        fields: tuple[str, ...] = (
            "id", "name", "tenant", "owner", "allocation", "offering", "gpu_model", "units",
            "gpu_eq_display", "cluster", "kubernetes_name", "image", "image_reference",
            "cpu_cores", "memory_gib", "workspace_gib", "desired", "state", "reason", "url",
            "running_since", "stopped_at", "idle_since", "cull_at", "snoozed_until",
            "keep_workspace", "created_at", "updated_at",
        )  # fmt: skip
        read_only_fields: tuple[str, ...] = fields


# The names a list of notebooks shows of its tenant and owner, read as values (`names_listed`).
LISTED_NAMES_OF_NOTEBOOK = {"tenant_slug": "tenant__slug", "owner_username": "owner__username"}


class NotebookListSerializer(NotebookSerializer):
    """`NotebookSerializer`'s rows for a list read with `names_listed`: the same JSON."""

    tenant = serializers.CharField(source="tenant_slug", read_only=True)
    owner = serializers.CharField(source="owner_username", read_only=True)

    class Meta(NotebookSerializer.Meta):
        pass


class NotebookDetailSerializer(NotebookSerializer):
    """One notebook with its warnings, its runs and, for its owner only, the token."""

    events = serializers.JSONField(read_only=True)
    token = serializers.SerializerMethodField()
    provisioning_runs = serializers.SerializerMethodField()

    class Meta(NotebookSerializer.Meta):
        fields = (*NotebookSerializer.Meta.fields, "events", "token", "provisioning_runs")
        read_only_fields = fields

    def get_token(self, notebook: Notebook) -> str | None:
        user = self.context.get("user")
        return notebook.token if user is not None and user.pk == notebook.owner_id else None

    @extend_schema_field(ProvisioningRunBriefSerializer(many=True))
    def get_provisioning_runs(self, notebook: Notebook) -> Any:
        return ProvisioningRunBriefSerializer(notebook_runs(notebook, limit=10), many=True).data


class NotebookLaunchSerializer(StrictFieldsMixin, serializers.Serializer[Notebook]):
    """Launch on `allocation`, or request `count` x `offering` in `tenant` and launch on it."""

    multiline_fields = ("justification",)

    image = serializers.SlugField(max_length=61)
    allocation = serializers.IntegerField(required=False, min_value=1, max_value=BIGINT_MAX)
    tenant = serializers.SlugField(required=False, max_length=61)
    offering = serializers.SlugField(required=False, max_length=61)
    count = serializers.IntegerField(required=False, default=1, min_value=1, max_value=INTEGER_MAX)
    duration_hours = serializers.IntegerField(required=False, min_value=1, max_value=INTEGER_MAX)
    justification = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=TEXT_MAX_LENGTH
    )
    name = serializers.CharField(required=False, allow_blank=True, default="", max_length=40)
    # As the notebook's columns store them (the service checks the portal's and tenant's limits).
    cpu_cores = serializers.DecimalField(
        max_digits=6, decimal_places=3, min_value=Decimal(0), required=False, default=Decimal(4)
    )
    memory_gib = serializers.IntegerField(
        required=False, default=16, min_value=1, max_value=INTEGER_MAX
    )
    workspace_gib = serializers.IntegerField(
        required=False, default=20, min_value=1, max_value=INTEGER_MAX
    )
