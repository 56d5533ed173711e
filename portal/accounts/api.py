from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.models import User
from portal.accounts.selectors import persona_of
from tenants.selectors import memberships_of


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

    def get_persona(self, user: User) -> str:
        return persona_of(user)

    @extend_schema(responses=MembershipSummarySerializer(many=True))
    def get_tenants(self, user: User) -> list[dict[str, str]]:
        return MembershipSummarySerializer(memberships_of(user), many=True).data  # type: ignore[return-value]


class MeView(APIView):
    """The caller: identity, global role, main persona and tenant memberships."""

    @extend_schema(responses=MeSerializer)
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(request.user).data)  # type: ignore[arg-type]
