"""Failures as the API server reports them: a `Status` body with a code, a reason and a message.

The messages follow the API server's wording (apimachinery's `errors` and `field` packages),
because the portal shows them to admins and the tests match on them.
"""

import json
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.resources import ResourceType

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An answer other than success; `body()` is the Status the API server would send."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = REASONS.get(code, "") if reason is None else reason
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            status["reason"] = self.reason
        if self.details:
            status["details"] = self.details
        status["code"] = self.code
        return status


def _details(rt: ResourceType, name: str, **extra: Any) -> dict[str, Any]:
    # Yes, `kind` holds the resource (plural) here, as on a real server.
    details: dict[str, Any] = {"name": name}
    if rt.group:
        details["group"] = rt.group
    details["kind"] = rt.plural
    details.update(extra)
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{rt.qualified} "{name}" not found', details=_details(rt, name))


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        f'{rt.qualified} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(rt, name),
    )


def conflict(rt: ResourceType, name: str, why: str | None = None) -> ApiError:
    why = why or (
        "the object has been modified; please apply your changes to the latest version "
        "and try again"
    )
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
        details=_details(rt, name),
    )


def forbidden(rt: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(403, f'{rt.qualified} "{name}" is forbidden: {why}', details=_details(rt, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def internal_error(message: str) -> ApiError:
    return ApiError(
        500, f"Internal error occurred: {message}", details={"causes": [{"message": message}]}
    )


def method_not_allowed(method: str) -> ApiError:
    return ApiError(
        405, f"the server does not allow this method on the requested resource ({method})"
    )


def format_value(value: Any) -> str:
    """A value in a field error, as Go's `%q`/`%v` would print it."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Cause:
    """One field error, as in apimachinery's field.Error."""

    field: str
    reason: str  # FieldValueInvalid, FieldValueRequired, FieldValueForbidden, ...
    detail: str

    @classmethod
    def invalid(cls, field: str, value: Any, detail: str) -> "Cause":
        return cls(field, "FieldValueInvalid", f"Invalid value: {format_value(value)}: {detail}")

    @classmethod
    def required(cls, field: str, detail: str = "") -> "Cause":
        return cls(
            field, "FieldValueRequired", f"Required value: {detail}" if detail else "Required value"
        )

    @classmethod
    def forbidden(cls, field: str, detail: str) -> "Cause":
        return cls(field, "FieldValueForbidden", f"Forbidden: {detail}")

    def text(self) -> str:
        return f"{self.field}: {self.detail}"


def invalid(kind: str, name: str, causes: list[Cause], *, group: str = "") -> ApiError:
    errors = [cause.text() for cause in causes]
    summary = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [
        {"reason": cause.reason, "message": cause.detail, "field": cause.field} for cause in causes
    ]
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(422, f'{qualified} "{name}" is invalid: {summary}', details=details)


def invalid_object(rt: ResourceType, name: str, causes: list[Cause]) -> ApiError:
    return invalid(rt.kind, name, causes, group=rt.group)


def fault(code: int, retry_after: str) -> ApiError:
    """The answer to an injected failure, worded like the API server's own."""
    if code == 429:
        details: dict[str, Any] = {}
        if retry_after.isdigit():
            details["retryAfterSeconds"] = int(retry_after)
        return ApiError(
            429,
            "Too many requests, please try again later.",
            details=details or None,
            headers={"Retry-After": retry_after},
        )
    if code == 500:
        return internal_error("injected fault")
    if code == 503:
        return ApiError(503, "the server is currently unable to handle the request")
    if code == 504:
        return ApiError(
            504,
            "the server was unable to return a response in the time allotted, "
            "but may still be processing the request",
        )
    return ApiError(code, f"injected fault ({code})")
