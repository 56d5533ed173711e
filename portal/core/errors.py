"""The errors services raise. One place (portal.core.api and the page helpers) maps them to
HTTP statuses for the API and to form errors for pages."""

from typing import ClassVar

from django.utils.translation import gettext as _


class ApplicationError(Exception):
    """An expected failure of a service call, with a message meant for the user."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 400

    def __init__(self, message: str, *, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class ValidationFailed(ApplicationError):
    """Bad input; `fields` names each offending field with its messages."""

    code = "invalid"
    status = 400

    @classmethod
    def on(cls, field: str, message: str) -> "ValidationFailed":
        """One bad field: the message on the field, and prefixed with its name overall."""
        return cls(f"{field}: {message}", fields={field: [message]})  # the field's name is code

    @classmethod
    def of(cls, what: str, problems: dict[str, list[str]]) -> "ValidationFailed":
        """Several bad fields of one object (`what`, e.g. "tenant"), each with its messages."""
        message = _("The %(what)s is not valid: %(fields)s.") % {
            "what": what,
            "fields": ", ".join(sorted(problems)),
        }
        return cls(message, fields=problems)


class NotFound(ApplicationError):
    """The object does not exist or the caller may not see it (the two are not told apart)."""

    code = "not_found"
    status = 404


class PermissionDenied(ApplicationError):
    """The caller sees the object but may not do this to it."""

    code = "forbidden"
    status = 403


class Conflict(ApplicationError):
    """The request conflicts with the current state (a duplicate, a concurrent change)."""

    code = "conflict"
    status = 409


class InvalidTransition(Conflict):
    """The object's current state does not allow this transition."""

    code = "invalid_transition"


class QuotaExceeded(Conflict):
    """The request is larger than the tenant's remaining quota."""

    code = "quota_exceeded"


class PolicyRefused(ApplicationError):
    """Well-formed input that the tenant's or portal's policy refuses."""

    code = "refused_by_policy"
    status = 422
