from django.urls import URLPattern, path

from portal.accounts import token_views

app_name = "tokens"

urlpatterns: list[URLPattern] = [
    path("", token_views.tokens, name="list"),
    path("<int:pk>/revoke/", token_views.token_revoke, name="revoke"),
]
