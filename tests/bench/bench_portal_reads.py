"""Reads at the scale of a large organisation (issue 19, targets 1, 4 and 6), beside two
baselines.

1. The data set (tests/bench/scale.py, BENCH_SCALE, default 1.0) is restored into a database of
   its own from var/bench/seed-<scale>-<hash>.dump, or seeded and dumped there when there is
   none for this scale, these migrations and this seeding code.
2. The personas sign in and every scenario is called once in-process, counting its SQL
   (tests/bench/probe.py).
3. The portal runs under gunicorn with the production configuration
   (deploy/gunicorn_production.py) in sync workers, 2 of them with one thread each; the
   baselines (tests/bench/baselines.py) run beside it in a second gunicorn started the same
   way. Both keep database connections open as production does (DATABASE_CONN_MAX_AGE's
   default, 60 s), and both have max_requests off: at thousands of requests a second a restart
   every 2,000 would measure worker start-up, not requests.
   The API's rate limits are raised (per second, so DRF's history of each caller stays short).
4. Each scenario is measured with one client alone (p50, p95, p99 in ms) and then with 16
   concurrent clients (requests per second), in BENCH_ROUNDS rounds (default 2). Within a
   round the baselines are measured again before every few scenarios, and each scenario is
   compared with the baselines measured just before it; the load average is noted each time.

5. Then, on the same portal, the exports and a closed month's statements
   (tests/bench/exports.py): the audit log's CSV, the biggest statement's CSV, every page
   of a month's statements for all tenants, and last the close of a month for all tenants
   (priced from its hourly usage records).

Prints a table, writes var/bench/portal_reads.json, and ends with `N/M targets met`: each read
at >= 0.5x the DRF baseline's throughput with 16 clients and at p95 <= 50 ms with one client, a
deep page with as many queries as its first page, /healthz at >= 0.5x the bare view, each CSV at
>= 100,000 lines/s with the workers' peak memory flat, a month's statements read and a month
closed in <= 2 s each. A
missed target is reported, not failed; errors and unexpected status codes fail the benchmark.
"""

import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tests.bench import exports, load, scale
from tests.bench.conftest import RESULTS
from tests.bench.serving import (
    BARE,
    BASELINE_CLIENTS,
    DRF,
    ROOT,
    Gunicorn,
    Measured,
    Say,
    baseline_targets,
    knob,
    machine,
    measure,
    portal_and_baselines,
    run_command,
    served,
)
from tests.harness.services import postgres_bin_dir

CLIENTS = BASELINE_CLIENTS
THROUGHPUT_TARGET = 0.5  # x the DRF baseline, 16 clients
P95_TARGET_MS = 50.0  # one client
HEALTHZ_TARGET = 0.5  # x the bare view
BASELINES_EVERY = 5  # scenarios between two measurements of the baselines


# The data set.


@dataclass
class DataSet:
    url: str
    how: str  # "restored" or "seeded"
    seconds: float
    dump: Path


def _pg(tool: str) -> str:
    bin_dir = postgres_bin_dir()
    assert bin_dir is not None, "PostgreSQL is not installed"
    return str(bin_dir / tool)


def data_set_prepare(server_url: str, env: dict[str, str], log: Path, say: Say) -> DataSet:
    """A database `bench` holding the scale data set, restored from the cache or seeded."""
    bench_scale = scale.bench_scale()
    key = scale.data_set_key(bench_scale)
    dump = RESULTS / f"seed-{key}.dump"
    url = server_url.rsplit("/", 1)[0] + "/bench"
    with psycopg.connect(server_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS bench")
        conn.execute("CREATE DATABASE bench")
    started = time.monotonic()
    env = {**env, "DATABASE_URL": url}
    if dump.exists():
        say(f"restoring the data set from {dump.relative_to(ROOT)}")
        run_command([_pg("pg_restore"), "--no-owner", "-j", "2", "-d", url, str(dump)], env, log)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        return DataSet(url, "restored", time.monotonic() - started, dump)
    say(f"seeding the data set at scale {bench_scale:g} (cached afterwards as {dump.name})")
    run_command([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], env, log)
    run_command([sys.executable, "-m", "tests.bench.scale"], env, log)
    seconds = time.monotonic() - started
    RESULTS.mkdir(parents=True, exist_ok=True)
    for old in RESULTS.glob(f"seed-scale{bench_scale:g}-*.dump"):
        old.unlink()
    partial = dump.with_suffix(".partial")
    run_command([_pg("pg_dump"), "-Fc", "-Z", "1", "-f", str(partial), url], env, log)
    partial.rename(dump)
    return DataSet(url, "seeded", seconds, dump)


# The measurements.


@dataclass
class Summary:
    name: str
    rounds: list[Measured]

    @property
    def per_second(self) -> float:
        return statistics.median(m.throughput.per_second for m in self.rounds)

    def ratio(self, baseline: str) -> float:
        ratios = [
            m.throughput.per_second / getattr(m, baseline)
            for m in self.rounds
            if getattr(m, baseline)
        ]
        return statistics.median(ratios) if ratios else float("nan")

    @property
    def latency(self) -> load.Latency:
        samples = [ms for m in self.rounds for ms in m.latency.samples_ms]
        return load.Latency(samples, Counter(), [], self.load_average)

    @property
    def load_average(self) -> float:
        return max(max(m.throughput.load_average, m.latency.load_average) for m in self.rounds)

    @property
    def client_cpu(self) -> float:
        return statistics.median(m.throughput.client_cpu for m in self.rounds)

    def problems(self) -> list[str]:
        found = []
        for m in self.rounds:
            for part in (m.throughput, m.latency):
                odd = {status: n for status, n in part.statuses.items() if status != 200}
                if odd:
                    found.append(f"{self.name}: status codes {odd}")
                found += [f"{self.name}: {error}" for error in part.errors]
        return found


def _target(scenario: dict[str, Any], personas: dict[str, Any], port: int) -> load.Target:
    headers: tuple[tuple[str, str], ...] = ()
    if scenario["kind"] == "api":
        headers = (("Authorization", f"Bearer {personas[scenario['persona']]['token']}"),)
    elif scenario["kind"] in ("page", "panel"):
        headers = (("Cookie", f"sessionid={personas[scenario['persona']]['session']}"),)
        if scenario["kind"] == "panel":
            headers += (("HX-Request", "true"),)
    return load.Target(port=port, path=scenario["path"], headers=headers)


# The report.


def _ms(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


@dataclass
class Run:
    """What one benchmark run measured."""

    scenarios: list[dict[str, Any]]
    calls: dict[str, Any]
    summaries: dict[str, Summary]
    baselines: dict[str, Summary]


def measure_all(
    probe: dict[str, Any], portal: Gunicorn, bare: load.Target, drf: load.Target, say: Say
) -> Run:
    """Every scenario in every round, the baselines again before every few of them."""
    seconds = knob("BENCH_SECONDS", 5.0)
    rounds = int(knob("BENCH_ROUNDS", 2))
    scenarios = probe["scenarios"]
    results: dict[str, list[Measured]] = {s["name"]: [] for s in scenarios}
    base_runs: dict[str, list[Measured]] = {BARE: [], DRF: []}
    for round_number in range(rounds):
        # Each round in another order, so no scenario always follows the same one.
        shift = round_number * len(scenarios) // max(rounds, 1)
        order = scenarios[shift:] + scenarios[:shift]
        bare_now = drf_now = measure(bare, seconds=seconds)
        for index, scenario in enumerate(order):
            if index % BASELINES_EVERY == 0:
                bare_now = measure(bare, seconds=seconds)
                drf_now = measure(drf, seconds=seconds)
                base_runs[BARE].append(bare_now)
                base_runs[DRF].append(drf_now)
            target = _target(scenario, probe["personas"], portal.port)
            measured = measure(target, seconds=seconds)
            measured.bare = bare_now.throughput.per_second
            measured.drf = drf_now.throughput.per_second
            results[scenario["name"]].append(measured)
        say(f"round {round_number + 1} of {rounds} measured")
    return Run(
        scenarios=scenarios,
        calls=probe["calls"],
        summaries={name: Summary(name, runs) for name, runs in results.items()},
        baselines={name: Summary(name, runs) for name, runs in base_runs.items()},
    )


def targets_of(run: Run) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Targets 1 and 6 of the issue, each met or not; and a verdict per scenario."""
    targets: list[dict[str, Any]] = []
    verdicts: dict[str, list[str]] = {name: [] for name in run.summaries}

    def check(scenario: str, what: str, met: bool, value: str, missed: str) -> None:
        targets.append({"target": f"{scenario}: {what}", "met": met, "value": value})
        verdicts[scenario].append("ok" if met else missed)

    for scenario in run.scenarios:
        name = scenario["name"]
        summary = run.summaries[name]
        if scenario["kind"] == "health":
            ratio = summary.ratio("bare")
            check(name, f">= {HEALTHZ_TARGET}x bare view", ratio >= HEALTHZ_TARGET,
                  f"{ratio:.2f}x", "MISSED xbare")  # fmt: skip
            continue
        ratio = summary.ratio("drf")
        check(name, f">= {THROUGHPUT_TARGET}x DRF baseline", ratio >= THROUGHPUT_TARGET,
              f"{ratio:.2f}x", "MISSED xDRF")  # fmt: skip
        p95 = summary.latency.percentile(0.95)
        check(name, f"p95 <= {P95_TARGET_MS:.0f} ms", p95 <= P95_TARGET_MS, f"{p95:.1f} ms",
              "MISSED p95")  # fmt: skip
        if scenario["first_page_of"]:
            first = run.calls[scenario["first_page_of"]]["queries"]
            here = run.calls[name]["queries"]
            check(name, "as many queries as page 1", first == here, f"{here} vs {first}",
                  "MISSED queries")  # fmt: skip
    return targets, verdicts


def table(run: Run, verdicts: dict[str, list[str]]) -> list[str]:
    header = (
        f"{'scenario':<36} {'req/s':>7} {'xDRF':>5} {'xbare':>6} {'p50':>6} {'p95':>6} "
        f"{'p99':>6} {'SQL':>3} {'SQL ms':>6} {'load':>4} {'cli':>4}  verdict"
    )
    lines = [header, "-" * len(header)]
    for name, summary in run.baselines.items():
        lat = summary.latency
        lines.append(
            f"{name:<36} {summary.per_second:>7.0f} {'':>5} {'':>6} {_ms(lat.median):>6} "
            f"{_ms(lat.percentile(0.95)):>6} {_ms(lat.percentile(0.99)):>6} "
            f"{'1' if name == DRF else '0':>3} {'':>6} {summary.load_average:>4.1f} "
            f"{summary.client_cpu:>4.2f}  baseline"
        )
    for name, summary in run.summaries.items():
        lat = summary.latency
        call = run.calls[name]
        lines.append(
            f"{name:<36} {summary.per_second:>7.1f} {summary.ratio('drf'):>5.2f} "
            f"{summary.ratio('bare'):>6.3f} {_ms(lat.median):>6} {_ms(lat.percentile(0.95)):>6} "
            f"{_ms(lat.percentile(0.99)):>6} {call['queries']:>3} {call['sql_ms']:>6.0f} "
            f"{summary.load_average:>4.1f} {summary.client_cpu:>4.2f}  "
            f"{' '.join(verdicts[name])}"
        )
    return lines


PLAN_WORDS = ("Seq Scan", "Index", "Sort Method", "Rows Removed", "Filter:")


def home_panels(probe: dict[str, Any]) -> list[str]:
    """Each Home's panels, timed one at a time in-process (tests/bench/probe.py): what a Home
    is made of, as the table's one line of it cannot show."""
    lines = []
    for role, panels in probe.get("home_panels", {}).items():
        total = sum(p["read_ms"] + p["render_ms"] for p in panels)
        shown = ", ".join(
            f"{p['panel']} {p['read_ms'] + p['render_ms']:.1f} ({p['queries']}q)" for p in panels
        )
        lines.append(
            f"Home ({role}) panels, in-process ms (queries) one at a time: {shown}; "
            f"{total:.1f} ms in all"
        )
    return lines


def plans(run: Run, count: int = 5) -> list[str]:
    """What the slowest queries do, as evidence of what a miss costs: the top of each plan and
    its scans, sorts and filters (the whole plans are in the JSON)."""
    lines = []
    slowest = sorted(run.calls.items(), key=lambda item: -item[1]["slowest_ms"])[:count]
    for name, call in slowest:
        plan = call["plan"]
        if not plan:
            continue
        lines.append(f"slowest query of {name} ({call['slowest_ms']:.0f} ms in-process):")
        shown = plan[:2] + [line for line in plan[2:-1] if any(w in line for w in PLAN_WORDS)]
        lines += [f"    {line.strip()}" for line in [*shown[:14], plan[-1]]]
    return lines


def _number(value: float, digits: int) -> float | None:
    """JSON has no NaN: a ratio that does not apply (a baseline's own) is null."""
    return None if math.isnan(value) else round(value, digits)


def summary_json(summary: Summary) -> dict[str, Any]:
    lat = summary.latency
    return {
        "req_per_s_16_clients": round(summary.per_second, 1),
        "x_drf": _number(summary.ratio("drf"), 3),
        "x_bare": _number(summary.ratio("bare"), 4),
        "one_client_ms": {
            "p50": round(lat.median, 2),
            "p95": round(lat.percentile(0.95), 2),
            "p99": round(lat.percentile(0.99), 2),
            "samples": len(lat.samples_ms),
        },
        "rounds_req_per_s": [round(m.throughput.per_second, 1) for m in summary.rounds],
        "load_average": round(summary.load_average, 2),
        "client_cores": round(summary.client_cpu, 2),
    }


def problems_of(run: Run) -> list[str]:
    """What makes the benchmark fail: errors and status codes other than 200."""
    found = [
        problem
        for summary in [*run.summaries.values(), *run.baselines.values()]
        for problem in summary.problems()
    ]
    found += [
        f"{name}: status {call['status']} in-process"
        for name, call in run.calls.items()
        if call["status"] != 200
    ]
    return found


def bench_portal_reads(bench_report: Any, bench_say: Callable[[str], None], tmp_path: Path) -> None:
    def say(message: str) -> None:
        bench_say(f"   {time.strftime('%H:%M:%S')} {message}")

    began = time.monotonic()
    bench_scale = scale.bench_scale()
    shape = scale.Shape.at(bench_scale)
    log = tmp_path / "bench.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["BENCH_SCALE"] = f"{bench_scale:g}"
    bench_say("")
    say(f"scale {bench_scale:g}: {shape}")
    data = data_set_prepare(os.environ["DATABASE_URL"], env, log, say)
    say(f"data set {data.how} in {data.seconds:.0f} s")
    env["DATABASE_URL"] = data.url

    probe_out = tmp_path / "probe.json"
    started = time.monotonic()
    run_command([sys.executable, "-m", "tests.bench.probe", str(probe_out)], env, log)
    probe = json.loads(probe_out.read_text())
    say(f"signed in; SQL of each scenario counted in {time.monotonic() - started:.0f} s")

    portal, baselines = portal_and_baselines(env, tmp_path)
    bare, drf = baseline_targets(data.url, baselines.port)
    with served(portal, baselines):
        say(f"gunicorn up: portal on :{portal.port}, baselines on :{baselines.port}")
        run = measure_all(probe, portal, bare, drf, say)
        rss = {"portal": portal.workers_rss_mib(), "baselines": baselines.workers_rss_mib()}
        downloads = exports.exports(data.url, portal, probe["personas"], tmp_path)
        month = exports.month_of_statements(
            data.url, portal, probe["personas"], probe["closed_month"]
        )
        close = exports.month_close(data.url, portal, probe["personas"])
        say("exports, a month of statements and a month's close measured")

    export_targets = exports.targets(downloads, month, close)

    targets, verdicts = targets_of(run)
    targets += export_targets
    met = sum(1 for t in targets if t["met"])
    lines = [
        f"machine: {machine()}",
        (
            f"data set {data.how} in {data.seconds:.0f} s; rounds of "
            f"{knob('BENCH_SECONDS', 5.0):g} s; {CLIENTS} clients for req/s, one client for "
            "p50/p95/p99 (ms); SQL = queries of one call and their ms (in-process); load = the "
            "highest 1-minute load average seen; cli = cores the load generator used; verdict = "
            "throughput against DRF (or bare), p95, and for a deep page its number of queries"
        ),
        *table(run, verdicts),
        "workers' resident memory after the run (MiB): "
        + "; ".join(
            f"{name} {', '.join(f'{mib:.0f}' for mib in sizes)}" for name, sizes in rss.items()
        ),
        *exports.lines(downloads, month, close),
        *home_panels(probe),
        *plans(run),
        *[f"missed: {t['target']} ({t['value']})" for t in targets if not t["met"]],
        f"whole benchmark: {time.monotonic() - began:.0f} s",
        f"{met}/{len(targets)} targets met",
    ]
    paths = {s["name"]: s["path"] for s in run.scenarios}
    report = {
        "scale": bench_scale,
        "shape": shape.__dict__,
        "machine": machine(),
        "data_set": {"how": data.how, "seconds": round(data.seconds), "dump": data.dump.name},
        "rounds": int(knob("BENCH_ROUNDS", 2)),
        "seconds": knob("BENCH_SECONDS", 5.0),
        "clients": CLIENTS,
        "workers_rss_mib": rss,
        "baselines": {name: summary_json(summary) for name, summary in run.baselines.items()},
        "scenarios": {
            name: {**summary_json(summary), "path": paths[name], "sql": run.calls[name]}
            for name, summary in run.summaries.items()
        },
        "exports": [
            {**export.__dict__, "lines_per_s": round(export.per_second)} for export in downloads
        ],
        "statements_month": month.__dict__,
        "month_close": close.__dict__,
        "home_panels": probe.get("home_panels", {}),
        "targets": targets,
        "summary": f"{met}/{len(targets)} targets met (reads, exports)",
    }
    bench_report("portal_reads", report, lines=lines, closing=report["summary"])
    problems = problems_of(run) + exports.problems(downloads, month, close)
    assert not problems, "\n".join(problems[:20])
