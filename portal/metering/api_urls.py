"""The usage API under /api/v1/."""

from django.urls import URLPattern, path

from portal.metering.api import UsageList, UsageWindowList

urlpatterns: list[URLPattern] = [
    path("usage/", UsageList.as_view(), name="usage"),
    path("usage/windows/", UsageWindowList.as_view(), name="usage-windows"),
]
