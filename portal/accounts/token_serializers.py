from rest_framework import serializers

from portal.accounts.models import ApiToken
from portal.accounts.tokens import (
    NAME_MAX_LENGTH,
    TokenState,
    api_token_default_days,
    api_token_max_days,
)
from portal.core.serializers import StrictFieldsMixin
from portal.core.validators import INTEGER_MAX


class ApiTokenSerializer(serializers.ModelSerializer[ApiToken]):
    """A personal API token as its owner sees it later: never its secret."""

    # A plain string in the schema: as an enum it would collide with the other `state` enums
    # until ENUM_NAME_OVERRIDES names it.
    state = serializers.CharField(
        read_only=True, help_text=f"One of {', '.join(TokenState.values)}."
    )

    class Meta:
        model = ApiToken
        fields: tuple[str, ...] = (
            "id", "name", "prefix", "state", "created_at", "expires_at", "last_used_at",
            "revoked_at",
        )  # fmt: skip
        read_only_fields: tuple[str, ...] = fields


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """The answer to a create: the token's text, in this answer only."""

    token = serializers.CharField(
        read_only=True,
        allow_null=True,
        help_text=(
            "The token to send as `Authorization: Bearer <token>`. Shown only in this answer; "
            "null when the answer is replayed for a retried Idempotency-Key."
        ),
    )

    class Meta(ApiTokenSerializer.Meta):
        fields = (*ApiTokenSerializer.Meta.fields, "token")
        read_only_fields = fields


class ApiTokenCreateSerializer(StrictFieldsMixin, serializers.Serializer[ApiToken]):
    name = serializers.CharField(max_length=NAME_MAX_LENGTH)
    expires_in_days = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=INTEGER_MAX,
        help_text=f"Days until it expires, 1 to {api_token_max_days()}; "
        f"{api_token_default_days()} when left out.",
    )
