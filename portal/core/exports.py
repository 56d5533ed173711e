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
from collections.abc import Iterable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import xlsxwriter
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
