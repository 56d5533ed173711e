from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.filters import UserFilter
from portal.accounts.models import SsoProfile, User
from portal.accounts.preferences import user_preferences_set
from portal.accounts.selectors import sign_in_mapping_for, users_for_identity
from portal.core.filters import FilterBackend
from portal.core.http import api_user
from portal.core.navigation import persona_of
from portal.core.rows import RowsListSerializer
from portal.core.serializers import StrictFieldsMixin


class MembershipSummarySerializer(serializers.Serializer[object]):
    slug = serializers.CharField(source="tenant.slug")
    name = serializers.CharField(source="tenant.name")
    role = serializers.CharField()


class MeSerializer(serializers.Serializer[User]):
    username = serializers.CharField()
    email = serializers.EmailField()
    full_name = serializers.CharField(source="get_full_name")
    global_role = serializers.CharField()
    persona = serializers.SerializerMethodField()
    tenants = serializers.SerializerMethodField()
    language = serializers.CharField(
        help_text="The saved language (`en`, `zh-hans`); blank follows Accept-Language."
    )
    time_zone = serializers.CharField(help_text="The IANA time zone pages show times in.")

    def get_persona(self, user: User) -> str:
        return persona_of(user)

    @extend_schema(responses=MembershipSummarySerializer(many=True))
    def get_tenants(self, user: User) -> list[dict[str, str]]:
        return MembershipSummarySerializer(
            user.memberships.select_related("tenant"), many=True
        ).data  # type: ignore[return-value]


class MePatchSerializer(StrictFieldsMixin, serializers.Serializer[Any]):
    """The caller's own preferences; either or both."""

    language = serializers.ChoiceField(
        choices=[("", "follow Accept-Language"), *settings.LANGUAGES],
        required=False,
        allow_blank=True,
        help_text="The pages' language: `en`, `zh-hans`, or blank to follow Accept-Language.",
    )
    time_zone = serializers.CharField(
        max_length=64,
        required=False,
        help_text="An IANA time zone name, e.g. `Asia/Shanghai`; pages show times in it.",
    )


class MeView(APIView):
    """The caller: identity, global role, main persona, tenant memberships and preferences.
    PATCH saves the caller's language and time zone (the API itself always answers in the
    Accept-Language and gives times in UTC)."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(request.user).data)  # type: ignore[arg-type]

    @extend_schema(request=MePatchSerializer, responses=MeSerializer)
    def patch(self, request: Request) -> Response:
        user = api_user(request)
        serializer = MePatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user_preferences_set(actor=user, user=user, **serializer.validated_data)
        return Response(MeSerializer(user).data)


class SignInMappingSerializer(serializers.Serializer[Any]):
    sso_enabled = serializers.BooleanField()
    issuer = serializers.CharField()
    client_id = serializers.CharField()
    scopes = serializers.CharField()
    username_claim = serializers.CharField()
    groups_claim = serializers.CharField()
    tenant_group = serializers.CharField()
    roles_claim = serializers.CharField()
    admin_role = serializers.CharField()
    finance_role = serializers.CharField()
    membership_source = serializers.CharField()
    api_audience = serializers.CharField()
    api_clients = serializers.ListField(child=serializers.CharField())
    break_glass_users = serializers.ListField(child=serializers.CharField())
    keycloak_sync = serializers.BooleanField()


class IdentityView(APIView):
    """Admins: the sign-in mapping in force (claims to usernames, memberships, global roles)."""

    @extend_schema(responses=SignInMappingSerializer)
    def get(self, request: Request) -> Response:
        mapping = sign_in_mapping_for(api_user(request))
        return Response(SignInMappingSerializer(asdict(mapping)).data)


class SsoProfileSerializer(serializers.ModelSerializer[SsoProfile]):
    class Meta:
        model = SsoProfile
        fields = ("subject", "groups", "roles", "unmatched_groups", "signed_in_at")


class UserSerializer(serializers.ModelSerializer[User]):
    full_name = serializers.CharField(source="get_full_name")
    tenants = MembershipSummarySerializer(source="memberships", many=True)
    sso = serializers.SerializerMethodField()

    class Meta:
        list_serializer_class = RowsListSerializer
        model = User
        fields = ("username", "email", "full_name", "global_role", "is_active", "tenants", "sso")

    @extend_schema_field(SsoProfileSerializer(allow_null=True))
    def get_sso(self, user: User) -> dict[str, Any] | None:
        profile = getattr(user, "sso", None) if hasattr(user, "sso") else None
        return SsoProfileSerializer(profile).data if profile else None


class UserList(ListModelMixin, GenericAPIView[User]):
    """Admins: every user, with memberships and what the provider said at their last sign-in."""

    serializer_class = UserSerializer
    queryset = User.objects.none()  # for the schema; get_queryset narrows it
    filter_backends = [FilterBackend]
    filterset_class = UserFilter

    def get_queryset(self) -> QuerySet[User]:
        return users_for_identity(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
