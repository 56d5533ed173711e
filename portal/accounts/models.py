from django.contrib.auth.models import AbstractUser
from django.db import models


class GlobalRole(models.TextChoices):
    """Roles that span every tenant. Tenant roles live on memberships."""

    NONE = "", "none"
    FINANCE = "finance", "finance"
    ADMIN = "admin", "admin"


class User(AbstractUser):
    global_role = models.CharField(
        max_length=16, choices=GlobalRole.choices, default=GlobalRole.NONE, blank=True
    )

    class Meta:
        db_table = "accounts_user"

    @property
    def is_portal_admin(self) -> bool:
        return self.global_role == GlobalRole.ADMIN

    @property
    def is_finance(self) -> bool:
        return self.global_role == GlobalRole.FINANCE

    @property
    def sees_all_tenants(self) -> bool:
        """Admins and finance read every tenant; everyone else only their own."""
        return self.global_role in (GlobalRole.ADMIN, GlobalRole.FINANCE)
