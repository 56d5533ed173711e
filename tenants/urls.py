from django.urls import path

from tenants import views

app_name = "tenants"

urlpatterns = [
    path("my/", views.mine, name="mine"),
    path("team/", views.team, name="team"),
    path("finance/", views.finance, name="finance"),
    path("manage/tenants/", views.manage, name="manage"),
]
