from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "portal.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from portal.core.navigation import nav_register

        nav_register(_("Identity"), "accounts:identity", {"admin"}, position=110, group="admin")
