from django.contrib import admin

from tenants.models import Membership, Tenant


class MembershipInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Membership
    extra = 0


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("slug", "name", "cost_centre", "state")
    list_filter = ("state",)
    search_fields = ("slug", "name", "cost_centre")
    inlines = [MembershipInline]
