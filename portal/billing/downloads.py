"""A statement's lines as a download, CSV or XLSX, for its page and the API alike."""

from django.db.models import Value
from django.http.response import HttpResponseBase

from portal.billing.models import StatementLine
from portal.billing.selectors import (
    LINE_COLUMNS,
    LINE_NUMBER_FORMATS,
    StatementView,
    statement_rows,
)
from portal.core.exports import csv_download, csv_query_download, xlsx_download

FORMATS = ("csv", "xlsx")
# How each of LINE_COLUMNS is made of a final statement's query (csv_query_download).
LINE_CELLS = (
    ("text", "period"), ("text", "tenant_slug"), ("text", "centre"), ("text", "gpu_model"),
    ("text", "offering"), ("text", "user"), ("text", "workload"),
    ("fraction", "quantity_num", "quantity_den"), ("text", "unit"), ("number", "rate"),
    ("text", "currency"), ("number", "amount"), ("text", "line_basis"), ("text", "status"),
)  # fmt: skip


def statement_download(statement: StatementView, fmt: str) -> HttpResponseBase:
    """Every line of `statement` in LINE_COLUMNS order, with a header row and no total row
    (the total is the sum of the amounts): CSV streamed, XLSX written in constant memory."""
    filename = f"statement-{statement.id}.{fmt}"
    rows = statement_rows(statement)
    if fmt == "xlsx":
        return xlsx_download(
            LINE_COLUMNS,
            rows,
            filename=filename,
            sheet=f"{statement.month:%Y-%m}",
            number_formats=LINE_NUMBER_FORMATS,
        )
    if statement.stored is None:
        return csv_download(LINE_COLUMNS, rows, filename=filename)
    # A final statement can hold 100,000 lines: PostgreSQL writes them (csv_query_download).
    query = (
        StatementLine.objects.filter(statement=statement.stored)
        .order_by("position")
        .annotate(
            period=Value(f"{statement.month:%Y-%m}"),
            tenant_slug=Value(statement.tenant.slug),
            centre=Value(statement.cost_centre),
            line_basis=Value(statement.basis),
            status=Value("final"),
        )
        .values_list(*[name for _, *names in LINE_CELLS for name in names])
    )
    return csv_query_download(LINE_COLUMNS, query, LINE_CELLS, filename=filename, rows=lambda: rows)
