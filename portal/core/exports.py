"""Streamed CSV downloads: rows are written as they are produced, so a large export never sits
in memory. Pages and the API of every app answer CSV through `csv_download`."""

import csv
from collections.abc import Iterable, Sequence

from django.http import StreamingHttpResponse


class _Echo:
    """A file-like object whose write hands the line back, for streaming csv.writer's output."""

    def write(self, value: str) -> str:
        return value


def csv_download(
    header: Sequence[str], rows: Iterable[Sequence[object]], *, filename: str
) -> StreamingHttpResponse:
    """`header` then `rows` as a streamed CSV attachment named `filename`."""

    def lines() -> Iterable[str]:
        writer = csv.writer(_Echo())
        yield writer.writerow(header)
        for row in rows:
            yield writer.writerow(row)

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
