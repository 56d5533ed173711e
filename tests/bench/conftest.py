"""Where benchmarks put their results."""

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "var" / "bench"
# Lines a benchmark wants said last, after pytest's own summaries (`N/M targets met`).
_closing: list[str] = []


@contextmanager
def _uncaptured(config: pytest.Config) -> Iterator[None]:
    """Write to the terminal while a test runs: pytest otherwise captures it until a failure."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        yield
        return
    with capture.global_and_fixture_disabled():
        yield


@pytest.fixture
def bench_say(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Print a line of progress at once (a benchmark may run for minutes)."""
    terminal = request.config.pluginmanager.get_plugin("terminalreporter")
    assert terminal is not None

    def say(line: str) -> None:
        with _uncaptured(request.config):
            terminal.write_line(line)

    return say


@pytest.fixture
def bench_report(request: pytest.FixtureRequest) -> Any:
    """Call with a name and a dict of results: printed, and written to var/bench/<name>.json.
    With `lines`, those are printed instead of the results (a table, say); with `closing`,
    that line is printed again at the very end of the run."""

    def report(
        name: str, results: dict[str, Any], lines: list[str] | None = None, closing: str = ""
    ) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
        width = max(len(key) for key in results)
        terminal = request.config.pluginmanager.get_plugin("terminalreporter")
        assert terminal is not None
        if closing:
            _closing.append(closing)
        with _uncaptured(request.config):
            terminal.write_line(f"\n== {name} ({request.node.nodeid})")
            if lines is not None:
                for line in lines:
                    terminal.write_line(f"   {line}")
                return
            for key, value in results.items():
                terminal.write_line(f"   {key:<{width}}  {value}")

    return report


CLOSING = re.compile(r"^(\d+)/(\d+) targets met")


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Each benchmark's `N/M targets met (what)`, then, when there are several, one line for
    the whole run."""
    for line in _closing:
        terminalreporter.write_line(line)
    counts = [found.groups() for found in map(CLOSING.match, _closing) if found]
    if len(counts) > 1:
        met = sum(int(m) for m, _ in counts)
        total = sum(int(t) for _, t in counts)
        terminalreporter.write_line(f"{met}/{total} targets met")
