"""Reading an XLSX download back, as a spreadsheet program would."""

import io
from typing import Any

from openpyxl import load_workbook


def xlsx_rows(response: Any, body: bytes | None = None) -> tuple[list[str], list[list[Any]]]:
    """The header and the rows of the first sheet of an XLSX answer (cells as openpyxl reads
    them: numbers as numbers, text as text, empty cells as None). `body`: the answer's bytes
    when the caller has read them already."""
    assert response["Content-Type"] == (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    )
    if body is None:
        body = b"".join(response.streaming_content) if response.streaming else response.content
    sheet = load_workbook(io.BytesIO(body), read_only=True).worksheets[0]
    header, *rows = [list(row) for row in sheet.iter_rows(values_only=True)]
    return [str(name) for name in header], rows
