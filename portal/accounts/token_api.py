"""`tokens/` and `tokens/{id}/`: the caller's personal API tokens, the same services as the
API tokens page. A token's text is in the answer to its create only."""

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.generics import GenericAPIView
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.response import Response

from portal.accounts.models import ApiToken
from portal.accounts.token_serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenCreateSerializer,
    ApiTokenSerializer,
)
from portal.accounts.tokens import (
    IssuedToken,
    api_token_create,
    api_token_for,
    api_token_revoke,
    api_tokens_of,
)
from portal.core.errors import PermissionDenied
from portal.core.http import api_user
from portal.core.idempotency import IDEMPOTENCY_HEADER, idempotent


class PortalSessionScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The browser session in the schema; registered on import, like the bearer scheme."""

    target_class = "portal.accounts.authentication.PortalSessionAuthentication"
    name = "session"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {"type": "apiKey", "in": "cookie", "name": "sessionid"}


class PortalBearerScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The bearer scheme in the schema; registered on import, as the token API is loaded with
    the URLs the schema describes."""

    target_class = "portal.accounts.authentication.PortalBearerAuthentication"
    name = "bearer"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API token (`gpp_...`, from the API tokens page or "
            "`tokens/`) or an access token from the identity provider.",
        }


class ApiTokenList(ListModelMixin, GenericAPIView[ApiToken]):
    """The caller's own personal API tokens, newest first, without their secrets. POST issues
    one: its `token` is in that answer and never again."""

    serializer_class = ApiTokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        return api_tokens_of(api_user(self.request))

    def get(self, request: Request) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        request=ApiTokenCreateSerializer,
        responses={201: ApiTokenCreatedSerializer},
        parameters=[IDEMPOTENCY_HEADER],
    )
    def post(self, request: Request) -> Response:
        user = api_user(request)
        if isinstance(request.auth, ApiToken):
            # A stolen personal token must not be able to mint its own replacement.
            raise PermissionDenied(
                "A personal API token cannot create tokens: use the API tokens page or a "
                "provider access token."
            )
        issued: list[IssuedToken] = []

        def create() -> Response:
            serializer = ApiTokenCreateSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            issued.append(api_token_create(actor=user, **serializer.validated_data))
            body = ApiTokenCreatedSerializer(api_token_for(user, issued[0].token.pk)).data
            return Response({**body, "token": None}, status=status.HTTP_201_CREATED)

        # The Idempotency-Key record keeps the answer as it is when `create` returns, so the
        # text is added only afterwards: it is never stored, and a replay answers null.
        response = idempotent(request, request.path, create)
        if issued:
            response.data = {**response.data, "token": issued[0].text}
        return response


class ApiTokenDetail(GenericAPIView[ApiToken]):
    """One of the caller's tokens; anyone else's is 404. DELETE revokes it (409 when it is
    revoked already): from then on it answers 401."""

    serializer_class = ApiTokenSerializer

    def get(self, request: Request, pk: int) -> Response:
        return Response(self.get_serializer(api_token_for(api_user(request), pk)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        user = api_user(request)
        api_token_revoke(actor=user, token=api_token_for(user, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
