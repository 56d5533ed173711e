"""The usage API's input and output: the question `usage/` is asked, its rows, the watermarks,
and the metering windows (`usage/windows/`)."""

from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _
from rest_framework import serializers

from portal.core.rows import RowsListSerializer
from portal.metering.models import UsageWindow
from portal.metering.selectors import EARLIEST, GROUPS, LATEST, MAX_DAYS, Watermark

DEFAULT_DAYS = 14
# Beyond these the dates are certainly a mistake (and the day after `to` must still exist).
# The longest `group_by` worth reading: every group once, comma-separated, with room to spare.
GROUP_BY_MAX_CHARS = 200

# The columns of a row, in the order the CSV writes them: the group's columns first (only those
# the grouping asks for), then the measures.
GROUP_COLUMNS = (
    "tenant", "namespace", "user", "workload_kind", "workload", "model", "offering", "day", "hour",
)  # fmt: skip
MEASURE_COLUMNS = (
    "reserved_gpu_eq_hours", "reserved_display", "requested_gpu_eq_hours", "requested_display",
    "used_gpu_hours", "memory_gib_hours", "utilisation", "cpu_core_hours", "ram_gib_hours",
)  # fmt: skip
# Which columns each group adds.
COLUMNS_OF_GROUP = {
    "tenant": ("tenant", "namespace"),
    "user": ("user",),
    "workload": ("workload_kind", "workload"),
    "model": ("model",),
    "offering": ("offering",),
    "day": ("day",),
    "hour": ("hour",),
}


def group_by_values(raw: list[str]) -> list[str]:
    """`group_by` as given (repeated and/or comma-separated), in order, each once."""
    if sum(len(value) for value in raw) > GROUP_BY_MAX_CHARS:
        raise serializers.ValidationError(
            {
                "group_by": [
                    _("At most %(count)s characters: use %(groups)s.")
                    % {"count": GROUP_BY_MAX_CHARS, "groups": ", ".join(GROUPS)}
                ]
            }
        )
    groups: list[str] = []
    for value in raw:
        for part in value.split(","):
            name = part.strip()
            if name and name not in groups:
                groups.append(name)
    unknown = [name for name in groups if name not in GROUPS]
    if unknown:
        shown = unknown[0].encode("unicode_escape").decode("ascii")[:40]
        raise serializers.ValidationError(
            {
                "group_by": [
                    _("Unknown grouping %(group)s: use %(groups)s.")
                    % {"group": repr(shown), "groups": ", ".join(GROUPS)}
                ]
            }
        )
    return groups


def row_columns(groups: list[str]) -> list[str]:
    """The columns of the answer's rows for `groups`, in a fixed order (JSON and CSV alike)."""
    wanted = {column for group in groups for column in COLUMNS_OF_GROUP[group]}
    return [column for column in GROUP_COLUMNS if column in wanted] + list(MEASURE_COLUMNS)


class UsageQuerySerializer(serializers.Serializer[Any]):
    """`usage/`'s query parameters but `group_by` (read as a list by the view)."""

    from_ = serializers.DateField(required=False)
    to = serializers.DateField(required=False)
    tenant = serializers.SlugField(required=False, max_length=61)
    format = serializers.ChoiceField(choices=["json", "csv"], required=False, default="json")

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")  # a Python keyword
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        end = attrs.get("to") or timezone.now().astimezone(UTC).date()
        start = attrs.get("from") or end - timedelta(days=DEFAULT_DAYS - 1)
        for name, value in (("from", start), ("to", end)):
            if not EARLIEST <= value <= LATEST:
                raise serializers.ValidationError(
                    {
                        name: [
                            _("Give a date from %(first)s to %(last)s.")
                            % {"first": EARLIEST, "last": LATEST}
                        ]
                    }
                )
        if (end - start).days + 1 > MAX_DAYS:
            raise serializers.ValidationError(
                {"to": [_("Ask for at most %(days)s days.") % {"days": MAX_DAYS}]}
            )
        return {**attrs, "from": start, "to": end}


class UsageRowSerializer(serializers.Serializer[Any]):
    """One group's totals. Only the columns of the groups asked for are present; GPU-eq-hours
    are exact fractions as strings ("7/2"), used and memory decimals to the microhour."""

    class Meta:
        list_serializer_class = RowsListSerializer

    tenant = serializers.CharField(
        required=False, allow_null=True, help_text="tenant slug; null: unattributed"
    )
    namespace = serializers.CharField(required=False, help_text="with tenant")
    user = serializers.CharField(required=False, allow_null=True, help_text="username")
    workload_kind = serializers.ChoiceField(
        choices=["notebook", "pod", "allocation", "unattributed"], required=False
    )
    workload = serializers.CharField(
        required=False, help_text="notebook name, pod name or allocation-<id>"
    )
    model = serializers.CharField(required=False, allow_null=True, help_text="GPU model slug")
    offering = serializers.CharField(required=False, allow_null=True, help_text="offering slug")
    day = serializers.DateField(required=False)
    hour = serializers.DateTimeField(required=False, help_text="the hour's start, UTC")
    reserved_gpu_eq_hours = serializers.CharField(help_text="exact fraction, e.g. 7/2")
    reserved_display = serializers.CharField()
    requested_gpu_eq_hours = serializers.CharField(help_text="exact fraction")
    requested_display = serializers.CharField()
    used_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    memory_gib_hours = serializers.DecimalField(max_digits=20, decimal_places=6)
    utilisation = serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        allow_null=True,
        help_text="used over reserved GPU-hours (1 = all); null when nothing was reserved",
    )
    cpu_core_hours = serializers.DecimalField(
        max_digits=20, decimal_places=6, help_text="CPU cores the GPU pods requested x hours"
    )
    ram_gib_hours = serializers.DecimalField(
        max_digits=20,
        decimal_places=6,
        help_text="memory (RAM, GiB) the GPU pods requested x hours; not GPU memory",
    )


def row_values(row: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    """A row's JSON values: `columns` only, dates and hours in ISO 8601 (UTC)."""
    values = {}
    for column in columns:
        value = row.get(column)
        if isinstance(value, datetime):
            value = value.astimezone(UTC).isoformat().replace("+00:00", "Z")
        elif isinstance(value, date):
            value = value.isoformat()
        values[column] = value
    return values


class WatermarkSerializer(serializers.Serializer[Watermark]):
    cluster = serializers.CharField()
    complete_until = serializers.DateTimeField(
        allow_null=True, help_text="usage before this instant is final; null: nothing yet"
    )
    demo = serializers.BooleanField(help_text="collected from the demo's synthetic metrics")


class UsagePageSerializer(serializers.Serializer[Any]):
    """A page of usage rows with the watermarks that say up to when they are final."""

    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    complete_until = serializers.DateTimeField(
        allow_null=True,
        help_text="the earliest watermark: usage of every cluster is final before it "
        "(also the Usage-Complete-Until response header)",
    )
    watermarks = WatermarkSerializer(many=True, help_text="per metered cluster")
    results = UsageRowSerializer(many=True)


class UsageWindowSerializer(serializers.ModelSerializer[UsageWindow]):
    cluster = serializers.CharField(source="cluster.name", read_only=True)

    class Meta:
        list_serializer_class = RowsListSerializer
        model = UsageWindow
        fields: tuple[str, ...] = (
            "id", "cluster", "start", "state", "attempts", "error", "queries", "records",
            "started_at", "finished_at",
        )  # fmt: skip
        read_only_fields = fields
