"""Personal API tokens: issue, revoke and list them, and authenticate API callers with them.

A token is `gpp_` and 43 URL-safe characters (256 random bits). Only its SHA-256 digest and a
short display prefix are stored: `api_token_create` returns the text once and nothing can
return it again. A token authenticates the API until it is revoked or expires.
"""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.db.models import Case, Q, QuerySet, Value, When
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy
from rest_framework.exceptions import AuthenticationFailed

from portal.accounts.models import ApiToken, User
from portal.core.audit import audit_record
from portal.core.errors import Conflict, InvalidTransition, NotFound, ValidationFailed
from portal.core.prepared import KeyedRead

TOKEN_PREFIX = "gpp_"  # noqa: S105  (the marker every personal token starts with, not a secret)
DISPLAY_PREFIX_LENGTH = 12
NAME_MAX_LENGTH = 100
DEFAULT_DAYS = 90
EXPIRY_CHOICES_DAYS = (7, 30, 90, 365)
MAX_ACTIVE_TOKENS = 20
# Recording every use would write on every API call; once a minute is precise enough to tell
# a token in use from a forgotten one.
LAST_USED_EVERY = timedelta(minutes=1)
# Every API call's first read: a token by its (unique) digest, with its user.
_TOKEN_BY_DIGEST = KeyedRead(ApiToken, "digest", "user")


class TokenState(models.TextChoices):
    ACTIVE = "active", pgettext_lazy("API token state", "active")
    EXPIRED = "expired", pgettext_lazy("API token state", "expired")
    REVOKED = "revoked", pgettext_lazy("API token state", "revoked")


@dataclass(frozen=True)
class IssuedToken:
    """A token just created, with its text: the only time the text exists outside the caller."""

    token: ApiToken
    text: str


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def api_token_max_days() -> int:
    return int(settings.PORTAL_API_TOKEN_MAX_DAYS)


def api_token_default_days() -> int:
    return min(DEFAULT_DAYS, api_token_max_days())


def api_token_expiry_choices() -> list[int]:
    """The lifetimes the page offers: 7, 30, 90 and 365 days, capped by the portal's maximum
    (which is offered itself when it falls between them)."""
    limit = api_token_max_days()
    choices = [days for days in EXPIRY_CHOICES_DAYS if days <= limit]
    if limit < EXPIRY_CHOICES_DAYS[-1] and limit not in choices:
        choices.append(limit)
    return choices


# Reads


def api_tokens_of(user: User) -> QuerySet[ApiToken]:
    """The user's own tokens, newest first, each with its `state` (active, expired, revoked).
    Nobody sees anyone else's tokens, admins included."""
    return ApiToken.objects.filter(user=user).annotate(
        state=Case(
            When(revoked_at__isnull=False, then=Value(TokenState.REVOKED.value)),
            When(expires_at__lte=Now(), then=Value(TokenState.EXPIRED.value)),
            default=Value(TokenState.ACTIVE.value),
            output_field=models.CharField(),
        )
    )


def api_token_for(user: User, pk: int) -> ApiToken:
    """One of the user's own tokens; anyone else's is NotFound (404), as if it did not exist."""
    token = api_tokens_of(user).filter(pk=pk).first()
    if token is None:
        raise NotFound(_("There is no API token %(pk)s.") % {"pk": pk})
    return token


# Writes


def _expiry_days(value: int | None) -> int:
    if value is None:
        return api_token_default_days()
    limit = api_token_max_days()
    if not 1 <= value <= limit:
        raise ValidationFailed.on(
            "expires_in_days", _("Between 1 and %(limit)s days.") % {"limit": limit}
        )
    return value


def _token_name(value: str) -> str:
    name = (value or "").strip()
    if not name:
        raise ValidationFailed.on("name", _("Give the token a name, e.g. what will use it."))
    if len(name) > NAME_MAX_LENGTH:
        raise ValidationFailed.on(
            "name", _("At most %(count)s characters.") % {"count": NAME_MAX_LENGTH}
        )
    return name


@transaction.atomic
def api_token_create(*, actor: User, name: str, expires_in_days: int | None = None) -> IssuedToken:
    """Issue a personal API token for `actor`, valid for `expires_in_days` days (default 90).

    The returned text is the only copy: the database keeps its digest and display prefix.
    Raises ValidationFailed naming `name` or `expires_in_days` (1 to PORTAL_API_TOKEN_MAX_DAYS),
    and Conflict when the actor already has MAX_ACTIVE_TOKENS active tokens.
    """
    name = _token_name(name)
    days = _expiry_days(expires_in_days)
    # Concurrent creates by one user queue here, so the limit below cannot be overrun.
    User.objects.select_for_update().filter(pk=actor.pk).values_list("pk").first()
    now = timezone.now()
    active = ApiToken.objects.filter(user=actor, revoked_at__isnull=True, expires_at__gt=now)
    if active.count() >= MAX_ACTIVE_TOKENS:
        raise Conflict(
            _(
                "You have %(count)s active API tokens, the most one may have. "
                "Revoke one you no longer use, then create the new one."
            )
            % {"count": MAX_ACTIVE_TOKENS}
        )
    text = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=actor,
        name=name,
        prefix=text[:DISPLAY_PREFIX_LENGTH],
        digest=_digest(text),
        expires_at=now + timedelta(days=days),
    )
    audit_record(
        actor=actor,
        action="api_token.create",
        target=token,
        changes={
            "name": [None, token.name],
            "prefix": [None, token.prefix],
            "expires_at": [None, token.expires_at.isoformat()],
        },
    )
    return IssuedToken(token=token, text=text)


@transaction.atomic
def api_token_revoke(*, actor: User, token: ApiToken) -> ApiToken:
    """Revoke one of `actor`'s own tokens: from now on it answers 401 on the API.

    Raises NotFound when the token is not the actor's, and InvalidTransition (409) when it
    was revoked already. An expired token may still be revoked.
    """
    locked = ApiToken.objects.select_for_update().filter(pk=token.pk, user=actor).first()
    if locked is None:
        raise NotFound(_("There is no API token %(pk)s.") % {"pk": token.pk})
    if locked.revoked_at is not None:
        raise InvalidTransition(
            _("API token %(name)s was revoked already.") % {"name": repr(locked.name)}
        )
    locked.revoked_at = timezone.now()
    locked.save(update_fields=["revoked_at"])
    audit_record(
        actor=actor,
        action="api_token.revoke",
        target=locked,
        changes={"revoked_at": [None, locked.revoked_at.isoformat()]},
    )
    return locked


def _record_use(token: ApiToken, now: datetime) -> None:
    """Set last_used_at, at most once a minute: one conditional UPDATE, so concurrent calls
    with the same token write once and never move it backwards."""
    due = now - LAST_USED_EVERY
    if token.last_used_at is not None and token.last_used_at > due:
        return
    ApiToken.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lte=due), pk=token.pk
    ).update(last_used_at=now)


def is_api_token(text: str) -> bool:
    """Whether `text` has the shape of a personal token (rather than a provider's token)."""
    return text.startswith(TOKEN_PREFIX)


def api_token_authenticate(text: str) -> ApiToken:
    """The active token `text` stands for, with its user loaded; records the use.

    Raises AuthenticationFailed (401) saying whether the token was revoked or expired, or
    generically when it is unknown or its user is inactive.
    """
    token = _TOKEN_BY_DIGEST.get(_digest(text))
    if token is None:
        raise AuthenticationFailed(_("Unknown or invalid token."))
    if token.revoked_at is not None:
        raise AuthenticationFailed(_("This API token was revoked."))
    now = timezone.now()
    if token.expires_at <= now:
        raise AuthenticationFailed(_("This API token expired."))
    if not token.user.is_active:
        raise AuthenticationFailed(_("User inactive or deleted."))
    _record_use(token, now)
    return token
