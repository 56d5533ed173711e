"""The chargeback API under /api/v1/."""

from django.urls import URLPattern, path

from portal.billing.api import (
    PeriodClose,
    PeriodList,
    PeriodReopen,
    RateCardList,
    StatementDetail,
    StatementLines,
    StatementList,
)
from portal.billing.budget_api import BudgetDetail
from portal.billing.spend_api import SpendList

urlpatterns: list[URLPattern] = [
    path("rate-cards/", RateCardList.as_view(), name="rate-cards"),
    path("statements/", StatementList.as_view(), name="statements"),
    path("statements/<str:statement_id>/", StatementDetail.as_view(), name="statement"),
    path("statements/<str:statement_id>/lines/", StatementLines.as_view(), name="statement-lines"),
    path("spend/", SpendList.as_view(), name="spend"),
    path("periods/", PeriodList.as_view(), name="periods"),
    path("periods/<str:month>/close", PeriodClose.as_view(), name="period-close"),
    path("periods/<str:month>/reopen", PeriodReopen.as_view(), name="period-reopen"),
    path("tenants/<slug:slug>/budget/", BudgetDetail.as_view(), name="tenant-budget"),
]
