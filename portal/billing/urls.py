"""Chargeback pages."""

from django.urls import path

from portal.billing import budget_views, views

app_name = "billing"
urlpatterns = [
    path("", views.statements, name="statements"),
    path("sections/<slug:name>/", views.section, name="section"),
    path("statements/<str:statement_id>/", views.statement, name="statement"),
    path(
        "statements/<str:statement_id>/<str:fmt>/",
        views.statement_download,
        name="statement-download",
    ),
    path("periods/<str:period>/close/", views.close, name="period-close"),
    path("periods/<str:period>/reopen/", views.reopen, name="period-reopen"),
    path("rates/", views.rates, name="rates"),
    path("budgets/<slug:slug>/", budget_views.budget_save, name="budget-set"),
    path("budgets/<slug:slug>/remove/", budget_views.budget_delete, name="budget-remove"),
]
