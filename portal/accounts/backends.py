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


class SsoBackend(BaseBackend):
    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None

    def get_user(self, user_id: Any) -> User | None:
        # Every signed-in request reads its user: `get` by primary key, no `first()` sort.
        try:
            return User.objects.get(pk=user_id, is_active=True)
        except User.DoesNotExist:
            return None


class PasswordBackend(ModelBackend):
    def user_can_authenticate(self, user: Any) -> bool:
        if settings.SSO_ENABLED and user.username not in settings.PORTAL_BREAK_GLASS_USERS:
            return False
        return super().user_can_authenticate(user)
