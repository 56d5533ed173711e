"""A statement's lines as a download, CSV or XLSX, for its page and the API alike."""

from django.http.response import HttpResponseBase

from portal.billing.selectors import (
    LINE_CELLS,
    LINE_COLUMNS,
    LINE_NUMBER_FORMATS,
    StatementView,
    final_statement_cells,
    statement_rows,
)
from portal.core.exports import csv_download, csv_query_download, xlsx_download

FORMATS = ("csv", "xlsx")


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
    query = final_statement_cells(statement)
    return csv_query_download(LINE_COLUMNS, query, LINE_CELLS, filename=filename, rows=lambda: rows)
