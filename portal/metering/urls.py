"""Usage pages."""

from django.urls import URLPattern

app_name = "metering"
urlpatterns: list[URLPattern] = []
