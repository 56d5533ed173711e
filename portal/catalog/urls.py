from django.urls import path

app_name = "catalog"

# Catalog management pages (admins): see portal/catalog/views.py.
urlpatterns: list = []  # type: ignore[type-arg]
