from typing import Any

from rest_framework import serializers

from portal.allocations.models import GpuRequest
from portal.catalog.serializers import GpuEqField
from portal.cluster.models import Cluster, NodeCapacity, ProvisioningResult, ProvisioningRun
from portal.cluster.selectors import CapacityRow
from portal.core.rows import RowsListSerializer
from portal.core.serializers import StrictFieldsMixin


class ProvisioningResultSerializer(serializers.ModelSerializer[ProvisioningResult]):
    class Meta:
        model = ProvisioningResult
        fields = ("api_version", "kind", "namespace", "name", "outcome", "message", "drift")
        read_only_fields = fields


class ProvisioningRunSerializer(serializers.ModelSerializer[ProvisioningRun]):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = ProvisioningRun
        fields: tuple[str, ...] = (
            "id", "cluster", "tenant", "kind", "reason", "state", "dry_run", "requested_by",
            "attempts", "error", "api_requests", "created_at", "started_at", "finished_at",
        )  # fmt: skip
        read_only_fields: tuple[str, ...] = fields


class ProvisioningRunDetailSerializer(ProvisioningRunSerializer):
    results = ProvisioningResultSerializer(many=True, read_only=True)
    gpu_requests = serializers.PrimaryKeyRelatedField[GpuRequest](many=True, read_only=True)

    class Meta(ProvisioningRunSerializer.Meta):
        fields = (*ProvisioningRunSerializer.Meta.fields, "gpu_requests", "results", "manifests")
        read_only_fields = fields


class NodeSerializer(serializers.ModelSerializer[NodeCapacity]):
    class Meta:
        model = NodeCapacity
        fields = ("name", "labels", "allocatable", "requested", "schedulable", "collected_at")
        read_only_fields = fields


class ClusterSerializer(StrictFieldsMixin, serializers.ModelSerializer[Cluster]):
    applies = serializers.BooleanField(
        read_only=True, help_text="Whether runs apply (false: dry-run, by the cluster or globally)"
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = Cluster
        fields: tuple[str, ...] = (
            "name", "mode", "applies", "connection", "kubeconfig_path", "kubeconfig_context",
            "namespace_prefix", "ingress_namespace_labels", "monitoring_namespace_labels",
            "identity_prefix", "pods_per_namespace", "volumes_per_namespace",
            "notebook_host_pattern", "notebook_ingress_class", "notebook_url_scheme",
            "prometheus_url", "metrics_interval_seconds", "enabled",
            "capacity_collected_at", "reconciled_at", "created_at",
        )  # fmt: skip
        read_only_fields: tuple[str, ...] = (
            "applies",
            "capacity_collected_at",
            "reconciled_at",
            "created_at",
        )
        # Uniqueness is the service's to answer (409 naming the field), not the serializer's.
        extra_kwargs: dict[str, Any] = {"name": {"validators": []}}


class ClusterDetailSerializer(ClusterSerializer):
    nodes = NodeSerializer(many=True, read_only=True)

    class Meta(ClusterSerializer.Meta):
        fields = (*ClusterSerializer.Meta.fields, "nodes")
        read_only_fields = (*ClusterSerializer.Meta.read_only_fields, "nodes")


class CapacitySerializer(serializers.Serializer[CapacityRow]):
    cluster = serializers.CharField()
    pool = serializers.CharField()
    gpu_model = serializers.CharField()
    offering = serializers.CharField(source="offering.slug")
    nodes = serializers.IntegerField()
    total = serializers.IntegerField(help_text="units of the offering")
    allocated = serializers.IntegerField()
    free = serializers.IntegerField()
    total_gpu_eq = GpuEqField()
    allocated_gpu_eq = GpuEqField()
    free_gpu_eq = GpuEqField()
