from django.urls import path

from tenants import views

app_name = "tenants"

urlpatterns = [
    path("my/", views.mine, name="mine"),
    path("team/", views.team, name="team"),
    path("finance/", views.finance, name="finance"),
    path("manage/tenants/", views.manage, name="manage"),
    path("manage/tenants/new/", views.tenant_create, name="create"),
    path("manage/quota-requests/", views.quota_queue, name="quota-queue"),
    path("tenants/<slug:slug>/", views.detail, name="detail"),
    path("tenants/<slug:slug>/sections/<slug:name>/", views.section, name="section"),
    path("tenants/<slug:slug>/edit/", views.tenant_edit, name="edit"),
    path("tenants/<slug:slug>/state/", views.tenant_state, name="state"),
    path("tenants/<slug:slug>/quotas/", views.quota_set, name="quota-set"),
    path("tenants/<slug:slug>/members/", views.member_add, name="member-add"),
    path(
        "tenants/<slug:slug>/members/<str:username>/remove/",
        views.member_remove,
        name="member-remove",
    ),
    path(
        "tenants/<slug:slug>/quota-requests/",
        views.quota_request_create,
        name="quota-request-create",
    ),
    path(
        "tenants/<slug:slug>/quota-requests/<int:pk>/decide/",
        views.quota_request_decide,
        name="quota-request-decide",
    ),
]
