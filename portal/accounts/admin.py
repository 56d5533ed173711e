from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from portal.accounts.models import User


@admin.register(User)
class PortalUserAdmin(UserAdmin):  # type: ignore[type-arg]
    list_display = ("username", "email", "first_name", "last_name", "global_role", "is_active")
    list_filter = ("global_role", "is_active")
    fieldsets = (*(UserAdmin.fieldsets or ()), ("Portal", {"fields": ("global_role",)}))
