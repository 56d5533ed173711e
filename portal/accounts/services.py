from django.db import transaction

from portal.accounts.models import GlobalRole, User
from portal.core.audit import audit_record
from portal.core.errors import Conflict


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
        raise Conflict(f"A user named {username!r} exists already.", fields={"username": ["taken"]})
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
