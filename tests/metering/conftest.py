from collections.abc import Callable, Iterator

import pytest

from tests.metering.history import History, HistoryPrometheus


@pytest.fixture
def history_prometheus() -> Iterator[Callable[[History], HistoryPrometheus]]:
    """Starts a Prometheus serving the given history; each is stopped after the test."""
    started: list[HistoryPrometheus] = []

    def serve(history: History) -> HistoryPrometheus:
        server = HistoryPrometheus(history)
        started.append(server)
        server.start()
        return server

    yield serve
    for server in started:
        server.stop()
