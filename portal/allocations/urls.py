from django.urls import path

from portal.allocations import views

app_name = "allocations"

urlpatterns = [
    path("requests/", views.mine, name="mine"),
    path("requests/new/", views.request_new, name="new"),
    path("requests/preview/", views.request_preview, name="preview"),
    path("requests/offerings/", views.request_offerings, name="offerings"),
    path("requests/<int:pk>/", views.request_detail, name="detail"),
    # Before the transitions: extending has its own page (a reason when a lead decides).
    path("requests/<int:pk>/extend/", views.extend, name="extend"),
    path("requests/<int:pk>/<slug:action>/", views.transition, name="transition"),
    path("extensions/<int:pk>/<slug:action>/", views.extension_decide, name="extension-decide"),
    path("approvals/", views.approvals, name="approvals"),
    path("approvals/extensions/", views.approvals_extensions, name="approvals-extensions"),
    path("approvals/approve/", views.approve_selected, name="approve-selected"),
    path("manage/requests/", views.all_requests, name="all"),
]
