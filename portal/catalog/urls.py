from django.urls import URLPattern

app_name = "catalog"

# Catalog management pages (admins): see portal/catalog/views.py.
urlpatterns: list[URLPattern] = []
