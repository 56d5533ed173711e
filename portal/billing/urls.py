"""Chargeback pages."""

from django.urls import URLPattern

app_name = "billing"
urlpatterns: list[URLPattern] = []
