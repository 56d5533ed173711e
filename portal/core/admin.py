from django.contrib import admin

from portal.core.models import WorkerHeartbeat


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("worker", "beat_at")
    readonly_fields = ("worker", "beat_at")
