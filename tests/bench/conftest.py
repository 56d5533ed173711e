"""Where benchmarks put their results."""

import json
from pathlib import Path
from typing import Any

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "var" / "bench"


@pytest.fixture
def bench_report(request: pytest.FixtureRequest) -> Any:
    """Call with a name and a dict of results: printed, and written to var/bench/<name>.json."""

    def report(name: str, results: dict[str, Any]) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
        width = max(len(key) for key in results)
        terminal = request.config.pluginmanager.get_plugin("terminalreporter")
        assert terminal is not None
        terminal.write_line(f"\n== {name} ({request.node.nodeid})")
        for key, value in results.items():
            terminal.write_line(f"   {key:<{width}}  {value}")

    return report
