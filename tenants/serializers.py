from typing import Any

from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from portal.accounts.models import User
from portal.catalog.models import GpuModel
from portal.catalog.serializers import GpuEqDisplayField, GpuEqField
from portal.core.rows import RowsListSerializer, row_writer
from portal.core.serializers import StrictFieldsMixin
from portal.core.validators import TEXT_MAX_LENGTH
from tenants.models import MemberRole, Membership, QuotaRequest, Tenant, TenantState
from tenants.selectors import QuotaLine

POLICY_FIELDS = (
    "auto_approve_gpu_eq", "auto_approve_hours", "default_duration_hours", "max_duration_hours",
    "cpu_cores_quota", "memory_gib_quota", "storage_gib_quota", "notebook_idle_minutes",
)  # fmt: skip


class QuotaLineSerializer(serializers.Serializer[QuotaLine]):
    class Meta:
        list_serializer_class = RowsListSerializer

    gpu_model = serializers.CharField(source="gpu_model.slug")
    quota = GpuEqField()
    used = GpuEqField()
    remaining = GpuEqField()
    remaining_display = GpuEqDisplayField(source="remaining")


# Planned from once (its plan needs no call): not a serializer made for each tenant's lines.
_QUOTA_LINE = QuotaLineSerializer()


@extend_schema_field(QuotaLineSerializer(many=True))
class QuotaLinesField(serializers.Field[list[QuotaLine], Any, list[dict[str, Any]], Tenant]):
    """A tenant's quota lines, read from the tenant (`quota_lines`, set on it by
    `tenants.selectors.with_quota_lines`), each written through `QuotaLineSerializer`'s plan.
    Its value alone makes its output, so a list of tenants is planned once for the process
    (portal/core/rows.py), not for every call as a method field's serializer would be."""

    context_free = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: list[QuotaLine]) -> list[dict[str, Any]]:
        write = row_writer(_QUOTA_LINE)  # the plan kept for the process
        return [write(line) for line in value]


class TenantSerializer(serializers.ModelSerializer[Tenant]):
    """A tenant with its policy and, per GPU model, quota, used and remaining GPU-eq (the
    tenants' `quota_lines`: `with_quota_lines`)."""

    auto_approve_gpu_eq = GpuEqField()
    namespace = serializers.CharField(read_only=True)
    quotas = QuotaLinesField(source="quota_lines")

    class Meta:
        list_serializer_class = RowsListSerializer
        model = Tenant
        fields = ("slug", "name", "cost_centre", "state", "namespace", *POLICY_FIELDS, "quotas",
                  "created_at", "updated_at")  # fmt: skip
        read_only_fields = ("state", "created_at", "updated_at")


class TenantPolicySerializer(StrictFieldsMixin, serializers.Serializer[Tenant]):
    """The policy fields, each optional: unset ones keep their default or current value."""

    auto_approve_gpu_eq = GpuEqField(required=False)
    auto_approve_hours = serializers.IntegerField(min_value=0, required=False)
    default_duration_hours = serializers.IntegerField(min_value=1, required=False)
    max_duration_hours = serializers.IntegerField(min_value=1, required=False)
    cpu_cores_quota = serializers.IntegerField(min_value=0, required=False)
    memory_gib_quota = serializers.IntegerField(min_value=0, required=False)
    storage_gib_quota = serializers.IntegerField(min_value=0, required=False)
    notebook_idle_minutes = serializers.IntegerField(min_value=0, required=False)


class TenantCreateSerializer(TenantPolicySerializer):
    slug = serializers.CharField(max_length=61)
    name = serializers.CharField(max_length=200)
    cost_centre = serializers.CharField(max_length=64, required=False, default="")


class TenantPatchSerializer(TenantPolicySerializer):
    """Any subset of the editable fields, a new `state`, and `quotas` by GPU model slug."""

    name = serializers.CharField(max_length=200, required=False)
    cost_centre = serializers.CharField(max_length=64, required=False, allow_blank=True)
    state = serializers.ChoiceField(choices=TenantState.choices, required=False)
    quotas = serializers.DictField(child=GpuEqField(), required=False)
    force_quotas = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Set quotas below what allocations hold (refused with 409 otherwise): the "
        "allocations over them are named in the audit event, and nothing new is approved for "
        "the model until what is held fits.",
    )

    def validate_quotas(self, value: dict[str, Any]) -> dict[GpuModel, Any]:
        models = GpuModel.objects.in_bulk(list(value), field_name="slug")
        unknown = sorted(set(value) - set(models))
        if unknown:
            raise serializers.ValidationError(
                _("Unknown GPU models: %(models)s.") % {"models": ", ".join(unknown)}
            )
        return {models[slug]: amount for slug, amount in value.items()}


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    username = serializers.CharField(source="user.username", read_only=True)
    full_name = serializers.CharField(source="user.get_full_name", read_only=True)

    class Meta:
        list_serializer_class = RowsListSerializer
        model = Membership
        fields = ("username", "full_name", "role", "created_at")


class MemberInputSerializer(StrictFieldsMixin, serializers.Serializer[Membership]):
    """Who (an active user, by username) and with which role; an unknown user names the field."""

    username = serializers.SlugRelatedField(
        slug_field="username", queryset=User.objects.filter(is_active=True)
    )
    role = serializers.ChoiceField(choices=MemberRole.choices)


class QuotaRequestSerializer(serializers.ModelSerializer[QuotaRequest]):
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)  # type: ignore[var-annotated]
    amount = GpuEqField()
    amount_display = GpuEqDisplayField(source="amount")
    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    decided_by = serializers.CharField(
        source="decided_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = QuotaRequest
        fields = ("id", "gpu_model", "amount", "amount_display", "reason", "requested_by", "state",
                  "decided_by", "decision_comment", "created_at", "decided_at")  # fmt: skip


class QuotaRequestInputSerializer(StrictFieldsMixin, serializers.Serializer[QuotaRequest]):
    multiline_fields = ("reason",)

    gpu_model = serializers.SlugRelatedField(
        slug_field="slug", queryset=GpuModel.objects.filter(enabled=True)
    )
    amount = GpuEqField()
    reason = serializers.CharField(max_length=TEXT_MAX_LENGTH)


class DecisionSerializer(StrictFieldsMixin, serializers.Serializer[QuotaRequest]):
    multiline_fields = ("comment",)

    comment = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=TEXT_MAX_LENGTH
    )
