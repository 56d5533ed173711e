from django.urls import path

from portal.accounts import profile_views, views

app_name = "accounts"

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.sign_out, name="logout"),
    path("oidc/login/", views.oidc_login, name="oidc-login"),
    path("oidc/callback/", views.oidc_callback, name="oidc-callback"),
    path("identity/", views.identity, name="identity"),
    path("profile/", profile_views.profile, name="profile"),
    path("language/", profile_views.language_switch, name="language"),
]
