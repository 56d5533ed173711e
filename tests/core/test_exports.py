"""Downloads: XLSX keeps numbers as numbers and text as text, formulas included."""

import csv
import io
import zipfile
from decimal import Decimal
from fractions import Fraction

import pytest

from portal.core.errors import Conflict
from portal.core.exports import XLSX_MAX_TEXT, csv_download, xlsx_download
from tests.sheets import xlsx_rows


def test_xlsx_writes_numbers_as_numbers_and_never_reads_text_as_a_formula() -> None:
    header = ["name", "quantity", "amount", "note"]
    rows = [
        ["=1+2", Fraction(10, 7), Decimal("3.00"), None],
        ["@SUM(A1)", 5, Decimal("0.01"), "x" * (XLSX_MAX_TEXT + 10)],
        ["+cmd|' /C calc'!A0", Fraction(0), Decimal("-1.25"), "https://example.org/"],
    ]

    response = xlsx_download(
        header, iter(rows), filename="lines.xlsx", number_formats={"amount": "0.00"}
    )

    assert response["Content-Disposition"] == 'attachment; filename="lines.xlsx"'
    body = b"".join(response.streaming_content)  # type: ignore[arg-type]
    names, read = xlsx_rows(response, body)
    assert names == header
    assert [row[0] for row in read] == ["=1+2", "@SUM(A1)", "+cmd|' /C calc'!A0"]
    with zipfile.ZipFile(io.BytesIO(body)) as xlsx:
        assert b"<f>" not in xlsx.read("xl/worksheets/sheet1.xml"), "no cell is a formula"
    assert [row[1] for row in read] == [pytest.approx(10 / 7, rel=1e-15), 5, 0]
    assert [Decimal(str(row[2])) for row in read] == [
        Decimal("3"),
        Decimal("0.01"),
        Decimal("-1.25"),
    ]
    assert read[0][3] is None
    assert len(read[1][3]) == XLSX_MAX_TEXT
    assert read[2][3] == "https://example.org/"


def test_an_empty_xlsx_has_its_header() -> None:
    names, read = xlsx_rows(xlsx_download(["a", "b"], iter([]), filename="empty.xlsx"))

    assert (names, read) == (["a", "b"], [])


def test_rows_beyond_one_sheet_are_refused_not_cut_off() -> None:
    rows = iter([["a"], ["b"], ["c"]])

    with pytest.raises(Conflict, match="More than 2 rows do not fit one spreadsheet"):
        xlsx_download(["x"], rows, filename="big.xlsx", max_rows=3)

    names, read = xlsx_rows(
        xlsx_download(["x"], iter([["a"], ["b"]]), filename="ok.xlsx", max_rows=3)
    )
    assert (names, read) == (["x"], [["a"], ["b"]])


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ("=1+2", "'=1+2"),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-1.25", "-1.25"),
        ("10/7", "10/7"),
        ("plain", "plain"),
        (Decimal("-3.00"), "-3.00"),
    ],
)
def test_csv_cells_that_would_be_formulas_are_neutralised(cell: object, written: str) -> None:
    response = csv_download(["cell"], iter([[cell]]), filename="cells.csv")

    rows = list(csv.reader(io.StringIO(response.getvalue().decode())))

    assert rows == [["cell"], [written]]
