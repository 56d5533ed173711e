"""Each person's language and time zone: saved on their account, applied to every page they
open (portal.accounts.middleware), edited on their profile page and through `PATCH me`."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext as _

from portal.accounts.models import User, validate_time_zone
from portal.core.audit import audit_record
from portal.core.errors import ValidationFailed


def language_choices() -> list[tuple[str, str]]:
    """The languages a person may save, each named in its own language; blank follows the
    browser."""
    return [("", _("The browser's language")), *settings.LANGUAGES]


def is_language(code: str) -> bool:
    return code in dict(settings.LANGUAGES)


@transaction.atomic
def user_preferences_set(
    *, actor: User, user: User, language: str | None = None, time_zone: str | None = None
) -> User:
    """Save `user`'s language (a code of settings.LANGUAGES, or blank to follow the browser's
    Accept-Language) and time zone (an IANA name); None leaves a field as it is.

    Raises ValidationFailed naming each bad field. Records `user.preferences` with what
    changed; saving the same values records nothing.
    """
    problems: dict[str, list[str]] = {}
    if language is not None and language != "" and not is_language(language):
        problems["language"] = [_("Choose one of the languages offered.")]
    if time_zone is not None:
        try:
            validate_time_zone(time_zone)
        except ValidationError as error:
            problems["time_zone"] = list(error.messages)
    if problems:
        raise ValidationFailed.of("profile", problems)
    wanted = {"language": language, "time_zone": time_zone}
    changes = {
        field: [getattr(user, field), value]
        for field, value in wanted.items()
        if value is not None and getattr(user, field) != value
    }
    if changes:
        for field, (_before, after) in changes.items():
            setattr(user, field, after)
        user.save(update_fields=list(changes))
        audit_record(actor=actor, action="user.preferences", target=user, changes=changes)
    return user
