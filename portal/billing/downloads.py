"""A statement's lines as a download, CSV or XLSX, for its page and the API alike."""

from django.http.response import HttpResponseBase

from portal.billing.selectors import (
    LINE_COLUMNS,
    LINE_NUMBER_FORMATS,
    StatementView,
    statement_rows,
)
from portal.core.exports import csv_download, xlsx_download

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
    return csv_download(LINE_COLUMNS, rows, filename=filename)
