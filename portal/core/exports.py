"""Downloads of long lists, in CSV and XLSX, that never sit in memory.

CSV is streamed: rows are written as they are produced, a few hundred to a chunk. XLSX is a
zip file that is only complete at its end, so xlsxwriter writes it in constant-memory mode
(each row goes to disk as soon as the next begins) into a temporary file, which is then
streamed. Pages and the API of every app answer downloads through `csv_download` and
`xlsx_download`.

Rows hold typed values: text, numbers (`int`, `Decimal`, `Fraction`) and None for an empty
cell. CSV writes them as text (a Fraction as `10/7`, exact); XLSX writes numbers as numbers.
Text is never read as a formula: XLSX writes it as text, and CSV neutralises a cell that a
spreadsheet would take for a formula (OWASP's rule: text beginning with `=`, `+`, `-`, `@`, a tab
or a carriage return gets a leading `'`; numbers, and text that is a plain number such as `-1.25`
or `10/7`, are left as they are).
"""

import csv
import io
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import xlsxwriter
from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.http import FileResponse, StreamingHttpResponse
from django.utils.translation import gettext as _

from portal.core.errors import Conflict

XLSX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
# Excel's limit on a text cell; longer text is cut there rather than refused.
XLSX_MAX_TEXT = 32767
# Excel's rows per sheet, the header included: more is refused rather than cut off silently.
XLSX_MAX_ROWS = 1_048_576


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_FIRST = frozenset(FORMULA_STARTS)
PLAIN_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?(/\d+)?")


def csv_safe(value: object) -> object:
    """`value` as a CSV cell a spreadsheet will not run: text that would start a formula gets a
    leading `'`; anything else is unchanged."""
    if isinstance(value, str) and value[:1] in _FORMULA_FIRST and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


# Rows written into one chunk of a streamed CSV: a chunk per row would be a write (and a system
# call) per row; a few hundred rows make chunks of tens of kilobytes.
CSV_ROWS_PER_CHUNK = 500


def csv_download(
    header: Sequence[str], rows: Iterable[Sequence[object]], *, filename: str
) -> StreamingHttpResponse:
    """`header` then `rows` as a streamed CSV attachment named `filename`, sent in chunks of
    CSV_ROWS_PER_CHUNK rows (memory stays flat whatever the number of rows)."""

    def chunks() -> Iterable[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(header)
        written = 0
        for row in rows:
            writer.writerow([csv_safe(value) for value in row])
            written += 1
            if written == CSV_ROWS_PER_CHUNK:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
                written = 0
        yield buffer.getvalue()

    response = StreamingHttpResponse(chunks(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# How the database writes each kind of cell of a CSV it produces itself (csv_query_download):
# `{0}` is the column, `{1}` a second column where a cell takes two (a fraction's denominator).
# Text neutralised as csv_safe does (an empty text as an empty cell); a time in UTC as Python's
# isoformat writes it;
# a number as PostgreSQL prints it (as Python prints a Decimal); an IP address without its
# prefix length; a fraction reduced, 10/7 or 2.
_TEXT = (
    r"NULLIF(CASE WHEN {0} ~ '^[-=+@\t\r]' AND {0} !~ '^[+-]?[0-9]+(\.[0-9]+)?(/[0-9]+)?$'"
    r" THEN '''' || {0} ELSE {0} END, '')"
)
CELL_SQL = {
    "text": _TEXT,
    # One to_char, the microseconds dropped when there are none (as isoformat does).
    "time": (
        """replace(to_char({0} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '')"""
        " || '+00:00'"
    ),
    "number": "{0}",
    "address": "host({0})",
    "fraction": (
        "CASE WHEN {1} / gcd({0}, {1}) = 1 THEN ({0} / gcd({0}, {1}))::text"
        " ELSE ({0} / gcd({0}, {1}))::text || '/' || ({1} / gcd({0}, {1}))::text END"
    ),
}
# Bytes of the database's CSV gathered into one chunk for the client.
COPY_CHUNK_BYTES = 256 * 1024


def csv_query_download(
    header: Sequence[str],
    query: QuerySet[Any],
    cells: Sequence[tuple[str, ...]],
    *,
    filename: str,
    rows: Callable[[], Iterable[Sequence[object]]],
) -> StreamingHttpResponse:
    """`header` then the rows of `query` as a streamed CSV attachment, written by PostgreSQL
    itself (`COPY (…) TO STDOUT (FORMAT csv)`): a million rows cost the worker a copy of their
    bytes, not a Python object per cell (README, "make bench"). `query` is a values_list
    queryset; `cells` says, in the header's order, how each cell is made of its columns (by
    name): ("text", name), ("time", name), ("number", name), ("address", name) or
    ("fraction", numerator, denominator), written as csv_download writes them. On another
    database, or with PORTAL_CSV_COPY off, `rows()` goes through csv_download instead."""
    if connection.vendor != "postgresql" or not settings.PORTAL_CSV_COPY:
        return csv_download(header, rows(), filename=filename)
    sql, params = query.query.sql_with_params()
    columns = ", ".join(
        CELL_SQL[kind].format(*(f'q."{name}"' for name in names)) for kind, *names in cells
    )
    # Built of the templates above, names in the code and the compiler's SQL (values bound).
    statement = f"COPY (SELECT {columns} FROM ({sql}) AS q) TO STDOUT (FORMAT csv)"  # noqa: S608

    def chunks() -> Iterator[bytes]:
        first = io.StringIO()
        csv.writer(first, lineterminator="\n").writerow(header)
        yield first.getvalue().encode()
        connection.ensure_connection()
        gathered = bytearray()
        with connection.connection.cursor() as cursor, cursor.copy(statement, params) as copy:
            for data in copy:
                gathered += data
                if len(gathered) >= COPY_CHUNK_BYTES:
                    yield bytes(gathered)
                    gathered.clear()
        yield bytes(gathered)

    response = StreamingHttpResponse(chunks(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def xlsx_download(
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    filename: str,
    sheet: str = "Sheet1",
    number_formats: dict[str, str] | None = None,
    max_rows: int = XLSX_MAX_ROWS,
) -> FileResponse:
    """`header` then `rows` as an XLSX attachment named `filename`: one sheet, a bold header
    row frozen in place, numbers as numbers (`number_formats` maps a column name to an Excel
    number format, e.g. "0.00"). Conflict when the rows do not fit one sheet (`max_rows`,
    the header included)."""
    output = tempfile.TemporaryFile()  # noqa: SIM115  (FileResponse closes it)
    workbook = xlsxwriter.Workbook(
        output,
        {
            "constant_memory": True,
            "strings_to_formulas": False,
            "strings_to_urls": False,
            "strings_to_numbers": False,
        },
    )
    worksheet = workbook.add_worksheet(sheet)
    bold = workbook.add_format({"bold": True})
    formats = {
        index: workbook.add_format({"num_format": (number_formats or {})[name]})
        for index, name in enumerate(header)
        if name in (number_formats or {})
    }
    worksheet.write_row(0, 0, list(header), bold)
    worksheet.freeze_panes(1, 0)
    for row_number, row in enumerate(rows, start=1):
        if row_number >= max_rows:
            workbook.close()
            output.close()
            raise Conflict(
                _("More than %(rows)s rows do not fit one spreadsheet: download the CSV.")
                % {"rows": f"{max_rows - 1:,}"}
            )
        for column, value in enumerate(row):
            _write(worksheet, row_number, column, value, formats.get(column))
    workbook.close()
    output.seek(0)
    return FileResponse(
        output, as_attachment=True, filename=filename, content_type=XLSX_CONTENT_TYPE
    )


def _write(worksheet: Any, row: int, column: int, value: object, number: Any) -> None:
    if value is None or value == "":
        return
    if isinstance(value, bool):
        worksheet.write_boolean(row, column, value)
    elif isinstance(value, int | Decimal | Fraction | float):
        worksheet.write_number(row, column, float(value), number)
    else:
        worksheet.write_string(row, column, str(value)[:XLSX_MAX_TEXT])
