from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "portal.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from portal.core.navigation import nav_register

        nav_register("Identity", "accounts:identity", {"admin"}, position=110)
