from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.core.rows import RowsListSerializer
from portal.directory.models import ChangeKind, DirectoryChange, DirectoryReport


# A pattern, not an enum: drf-spectacular names enums after the field, and this `kind` would
# collide with the provisioning runs' (ENUM_NAME_OVERRIDES in the settings could name it).
@extend_schema_field(
    {
        "type": "string",
        "pattern": f"^({'|'.join(ChangeKind.values)})$",
        "description": "tenant: make sure the tenant's groups exist; member: make the user's "
        "groups in the tenant match `role`",
    }
)
class ChangeKindField(serializers.CharField):
    pass


class DirectoryChangeSerializer(serializers.ModelSerializer[DirectoryChange]):
    kind = ChangeKindField(read_only=True)
    tenant = serializers.CharField(source="tenant_slug", read_only=True)
    actor = serializers.CharField(
        source="actor.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        list_serializer_class = RowsListSerializer
        model = DirectoryChange
        fields = (
            "id", "kind", "tenant", "username", "role", "state", "attempts", "last_error",
            "actor", "created_at", "sent_at",
        )  # fmt: skip
        read_only_fields = fields


class DifferenceSerializer(serializers.Serializer[dict[str, str]]):
    tenant = serializers.CharField()
    role = serializers.CharField()
    username = serializers.CharField()
    where = serializers.ChoiceField(
        choices=["portal", "keycloak"], help_text="Where the membership exists only"
    )


class DirectoryReportSerializer(serializers.ModelSerializer[DirectoryReport]):
    differences = DifferenceSerializer(many=True, read_only=True)

    class Meta:
        list_serializer_class = RowsListSerializer
        model = DirectoryReport
        fields = (
            "id", "started_at", "finished_at", "ok", "error", "tenants", "groups_created",
            "changes_queued", "differences",
        )  # fmt: skip
        read_only_fields = fields


class ReconcileQueuedSerializer(serializers.Serializer[dict[str, object]]):
    queued = serializers.BooleanField()
    detail = serializers.CharField()
