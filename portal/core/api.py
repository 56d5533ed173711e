"""The API's error envelope, shared by every endpoint.

Errors always answer `{"error": {"code", "message", "fields"}}`, whatever raised them: a service's
ApplicationError, a serializer's validation, or DRF itself.
"""

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from django.utils.translation import gettext as _
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.core.errors import ApplicationError, ValidationFailed


def choice_param(request: Request, name: str, choices: Iterable[str]) -> str | None:
    """A query parameter that must be one of `choices`, or None when absent or empty.
    Anything else is ValidationFailed naming the parameter."""
    value = request.query_params.get(name)
    if not value:
        return None
    if value not in set(choices):
        raise ValidationFailed.on(name, _("Unknown %(name)s.") % {"name": name})
    return value


def error_response(
    *, status_code: int, code: str, message: str, fields: dict[str, Any] | None = None
) -> Response:
    return Response(
        {"error": {"code": code, "message": message, "fields": fields or {}}},
        status=status_code,
    )


def _field_messages(detail: Any) -> dict[str, Any]:
    if isinstance(detail, dict):
        return {
            key: [str(item) for item in value]
            if isinstance(value, list)
            else _field_messages(value)
            for key, value in detail.items()
        }
    return {"non_field_errors": [str(item) for item in detail]} if isinstance(detail, list) else {}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The envelope for every error a DRF view raises, always rendered as JSON (even by a view
    that renders YAML, HTML or CSV on success). Anything else is left to Django, which logs it
    and answers 500 `server_error` in the envelope (portal.core.views.server_error)."""
    response = _envelope(exc, context)
    request = context.get("request")
    if response is not None and request is not None:
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
    return response


def _envelope(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        return error_response(
            status_code=exc.status, code=exc.code, message=exc.message, fields=exc.fields
        )
    if isinstance(exc, exceptions.ValidationError):
        fields = _field_messages(exc.detail)
        names = ", ".join(name for name in fields if name != "non_field_errors")
        message = (
            _("Invalid input: %(names)s.") % {"names": names} if names else _("Invalid input.")
        )
        return error_response(
            status_code=status.HTTP_400_BAD_REQUEST, code="invalid", message=message, fields=fields
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    codes = exc.get_codes()
    response.data = {
        "error": {
            "code": codes if isinstance(codes, str) else "error",
            "message": str(exc.detail),
            "fields": {},
        }
    }
    return response
