from axes.models import AccessAttempt
from django.conf import settings
from django.db import models, transaction
from django.utils.translation import gettext as _

from portal.accounts.models import GlobalRole, User
from portal.core.audit import audit_record
from portal.core.errors import Conflict
from portal.core.models import AuditEvent


@transaction.atomic
def user_create(
    *,
    actor: User | None,
    username: str,
    email: str = "",
    first_name: str = "",
    last_name: str = "",
    password: str | None = None,
    global_role: GlobalRole = GlobalRole.NONE,
) -> User:
    """Create a local account. Without a password the account can only sign in through SSO.

    Admins are Django staff and superusers, so the Django admin serves them too.
    Raises Conflict when the username is taken.
    """
    if User.objects.filter(username=username).exists():
        raise Conflict(
            _("A user named %(username)s exists already.") % {"username": repr(username)},
            fields={"username": [_("taken")]},
        )
    user = User(
        username=username,
        email=email,
        first_name=first_name,
        last_name=last_name,
        global_role=global_role,
        is_staff=global_role == GlobalRole.ADMIN,
        is_superuser=global_role == GlobalRole.ADMIN,
    )
    if password is None:
        user.set_unusable_password()
    else:
        user.set_password(password)
    user.save()
    audit_record(
        actor=actor,
        action="user.create",
        target=user,
        changes={"username": [None, username], "global_role": [None, str(global_role)]},
    )
    return user


# What an audit event shows of a username someone typed: printable, and at most this long.
ATTEMPTED_USERNAME_MAX_LENGTH = 150


def _shown(text: str) -> str:
    """`text` with control and other unprintable characters escaped (`\\x1b`, `\\u202e`), cut
    to ATTEMPTED_USERNAME_MAX_LENGTH: typed by anyone, it must not forge lines or direction in
    the audit log or in a CSV export."""
    escaped = "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in text
    )
    if len(escaped) > ATTEMPTED_USERNAME_MAX_LENGTH:
        return escaped[: ATTEMPTED_USERNAME_MAX_LENGTH - 1] + "…"
    return escaped


@transaction.atomic
def sign_in_failure_record(
    *, username: str, address: str | None, failures: int, locked_out: bool
) -> AuditEvent | None:
    """Audit one refused password sign-in, as counted by the throttle (portal/accounts/throttle.py).

    `user.sign_in_failed` for a wrong password below the limit; `user.sign_in_locked_out` for
    the attempt that reached the limit and for every attempt refused while the lockout lasts.
    The event's target is the account the username names or, for a username no account has,
    the throttle's own record of the attempts (axes' AccessAttempt, deleted once the lockout time
    has passed: the event keeps the username as typed in its comment, made printable). Returns
    None when the throttle recorded nothing to point at (an address on its allow-list).
    """
    target: models.Model | None = User.objects.filter(username=username).first()
    if target is None:
        target = (
            AccessAttempt.objects.filter(username=username, ip_address=address)
            .order_by("-attempt_time")
            .first()
        )
    if target is None:
        return None
    limit = settings.PORTAL_SIGN_IN_FAILURE_LIMIT
    minutes = int(settings.PORTAL_SIGN_IN_LOCKOUT.total_seconds() // 60)
    counted = f"{failures} of {limit} within {minutes} minutes"
    who = f"username “{_shown(username)}” from {address or 'an unknown address'}"
    if locked_out:
        action = "user.sign_in_locked_out"
        comment = f"Password sign-in refused, locked out: {who} ({counted})."
    else:
        action = "user.sign_in_failed"
        comment = f"Wrong password: {who} ({counted})."
    return audit_record(actor=None, action=action, target=target, comment=comment)
