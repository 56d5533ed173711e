"""Authentication backends.

`SsoBackend` keeps sessions opened by the OpenID Connect sign-in (the callback view checks the
provider's answer and logs the user in with it); it never checks a password.
`PasswordBackend` signs in local accounts: every one without SSO, only the break-glass ones
with it.
"""

from typing import Any

from django.conf import settings
from django.contrib.auth.backends import BaseBackend, ModelBackend

from portal.accounts.models import User
from portal.core.prepared import KeyedRead

# Every signed-in page reads its user by primary key, with SQL built once per process.
_USER_BY_ID = KeyedRead(User, "pk")


class SsoBackend(BaseBackend):
    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def get_user(self, user_id: Any) -> User | None:
        user = _USER_BY_ID.get(user_id)
        return user if user is not None and user.is_active else None


class PasswordBackend(ModelBackend):
    def get_user(self, user_id: Any) -> User | None:
        user = _USER_BY_ID.get(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    def user_can_authenticate(self, user: Any) -> bool:
        if settings.SSO_ENABLED and user.username not in settings.PORTAL_BREAK_GLASS_USERS:
            return False
        return super().user_can_authenticate(user)
