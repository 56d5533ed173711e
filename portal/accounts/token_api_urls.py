from django.urls import URLPattern, path

from portal.accounts.token_api import ApiTokenDetail, ApiTokenList

urlpatterns: list[URLPattern] = [
    path("tokens/", ApiTokenList.as_view(), name="tokens"),
    path("tokens/<int:pk>/", ApiTokenDetail.as_view(), name="token"),
]
