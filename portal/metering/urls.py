"""Usage pages."""

from django.urls import path

from portal.metering import views

app_name = "metering"
urlpatterns = [
    path("", views.mine, name="mine"),
    path("all/", views.all_usage, name="all"),
    path("tenants/<slug:slug>/", views.tenant_usage, name="tenant"),
    path("tenants/<slug:slug>/idle/", views.tenant_idle, name="tenant-idle"),
    path(
        "tenants/<slug:slug>/allocations/<int:pk>/release/",
        views.idle_release,
        name="idle-release",
    ),
    path(
        "tenants/<slug:slug>/allocations/<int:pk>/remind/",
        views.idle_remind,
        name="idle-remind",
    ),
]
