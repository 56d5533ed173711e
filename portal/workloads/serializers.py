from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.allocations.serializers import ProvisioningRunBriefSerializer
from portal.catalog.serializers import GpuEqDisplayField
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
        model = Notebook
        fields: tuple[str, ...] = (
            "id", "name", "tenant", "owner", "allocation", "offering", "gpu_model", "units",
            "gpu_eq_display", "cluster", "kubernetes_name", "image", "image_reference",
            "cpu_cores", "memory_gib", "workspace_gib", "desired", "state", "reason", "url",
            "running_since", "stopped_at", "idle_since", "cull_at", "snoozed_until",
            "keep_workspace", "created_at", "updated_at",
        )  # fmt: skip
        read_only_fields: tuple[str, ...] = fields


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


class NotebookLaunchSerializer(serializers.Serializer[Notebook]):
    """Launch on `allocation`, or request `count` x `offering` in `tenant` and launch on it."""

    image = serializers.SlugField()
    allocation = serializers.IntegerField(required=False)
    tenant = serializers.SlugField(required=False)
    offering = serializers.SlugField(required=False)
    count = serializers.IntegerField(required=False, default=1)
    duration_hours = serializers.IntegerField(required=False)
    justification = serializers.CharField(required=False, allow_blank=True, default="")
    name = serializers.CharField(required=False, allow_blank=True, default="")
    cpu_cores = serializers.CharField(required=False, default="4")
    memory_gib = serializers.CharField(required=False, default="16")
    workspace_gib = serializers.CharField(required=False, default="20")
