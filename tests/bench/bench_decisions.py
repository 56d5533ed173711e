"""Decisions (issue 19, target 2): 32 clients submitting GPU requests, beside two baselines.

1. A database of its own (`bench_decisions`), migrated and seeded through the project's services
   by tests/bench/decide.py: per round 10 tenants for the spread and one tenant alone, with
   A100 quotas that run out within the run and a T4 quota every T4 request is refused by, 4
   developers each with a personal API token, and one dry-run cluster, so that each approval
   queues provisioning.
2. The portal and the baselines run under gunicorn as in bench_portal_reads
   (tests/bench/serving.py): 2 sync workers each, connections kept open, rate limits raised.
3. In each of BENCH_ROUNDS rounds (default 2): the baselines are measured (bare view and DRF
   view, one client and 16 clients), then 32 clients POST `/api/v1/requests/` for BENCH_SECONDS
   (default 5), each in turn to every tenant of the spread, with every kind of decide.MIX
   (approved at once, pending for a lead, refused for quota); then all 32 to the tenant alone,
   whose quota row every decision locks; then one client alone, to the probe tenant. The CPU
   time the portal's gunicorn and PostgreSQL spent meanwhile is counted per decision (/proc).
4. Afterwards, in-process: oversubscription checked in SQL (exact fractions) and through
   `quota_lines_for`, the requests per state, the SQL of one submit and a cProfile of 200.

Prints a table, writes var/bench/decisions.json, and ends with `N/M targets met`: >= 200
decisions/s to 10 tenants (a miss is reported, not failed), zero oversubscription, and no
answer but 201 (approved or pending) and 409 quota_exceeded, the states in SQL agreeing with the
answers; a failure of either of the last two fails the benchmark. The figure for one tenant is
stated, with no target.
"""

import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from tests.bench import decide, load
from tests.bench.serving import (
    BARE,
    BASELINE_CLIENTS,
    DRF,
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

CLIENTS = 32
TARGET = decide.TARGET
SPREAD = "POST requests/ 10 tenants"
ALONE = "POST requests/ 1 tenant"
ONE = "POST requests/ 1 client"
INTENDED = {201, 409}
STATE = re.compile(rb'"state":\s*"(\w+)"')
CODE = re.compile(rb'"code":\s*"(\w+)"')


# The data.


def database_prepare(server_url: str, env: dict[str, str], out: Path, log: Path) -> str:
    """A fresh database `bench_decisions`, migrated and seeded; its URL."""
    url = server_url.rsplit("/", 1)[0] + "/bench_decisions"
    with psycopg.connect(server_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS bench_decisions")
        conn.execute("CREATE DATABASE bench_decisions")
    env = {**env, "DATABASE_URL": url}
    run_command([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], env, log)
    run_command([sys.executable, "-m", "tests.bench.decide", "seed", str(out)], env, log)
    return url


def _body(tenant: dict[str, Any], kind: list[Any], hours: int, token: str, port: int) -> bytes:
    offering, count, _path = kind
    body = {
        "tenant": tenant["slug"],
        "offering": offering,
        "count": count,
        "duration_hours": hours,
        "purpose": "notebook",
    }
    target = load.Target(
        port=port,
        path="/api/v1/requests/",
        headers=(("Authorization", f"Bearer {token}"),),
        body=json.dumps(body).encode(),
    )
    return target.request()


def client_requests(
    tenants: list[dict[str, Any]], seeded: dict[str, Any], port: int, clients: int
) -> list[list[bytes]]:
    """What each client sends, round and round: every tenant in turn (client c starting at
    tenant c), each kind of MIX to each tenant, as developer c of that tenant."""
    mix, hours = seeded["mix"], seeded["hours"]
    count = len(tenants)
    return [
        [
            _body(
                tenants[(client + turn) % count],
                mix[(turn // count + client) % len(mix)],
                hours,
                tenants[(client + turn) % count]["tokens"][client % decide.MEMBERS],
                port,
            )
            for turn in range(count * len(mix))
        ]
        for client in range(clients)
    ]


# The measurements.


def cpu_seconds(pid: int) -> float:
    """CPU time used so far by process `pid`, its children that ended, and its children alive
    now (user and system, from /proc)."""

    def fields(one: int | str) -> list[str]:
        return Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()

    tick = os.sysconf("SC_CLK_TCK")
    own = fields(pid)
    total = sum(int(value) for value in own[11:15])  # utime, stime, cutime, cstime
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        for child in children.read_text().split():
            try:
                total += sum(int(value) for value in fields(child)[11:13])
            except FileNotFoundError:
                continue
    return total / tick


def postmaster_pid(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    assert row is not None
    return int((Path(row[0]) / "postmaster.pid").read_text().split()[0])


@dataclass
class Unexpected:
    """The first few answers that were neither a decision nor an intended refusal."""

    seen: list[str] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)

    def __call__(self, status: int, response: bytes) -> None:
        if status == 409:
            found = CODE.search(response)
            self.codes[found.group(1).decode() if found else "?"] += 1
        elif status != 201 and len(self.seen) < 5:
            self.seen.append(response[:600].decode(errors="replace"))


@dataclass
class Scenario:
    name: str
    tenants: list[str]
    rounds: list[load.Throughput] = field(default_factory=list)
    baselines: list[Measured] = field(default_factory=list)
    unexpected: Unexpected = field(default_factory=Unexpected)
    # CPU ms per decision in the portal's gunicorn and in PostgreSQL, each round
    cpu_ms: list[dict[str, float]] = field(default_factory=list)

    def cpu(self, side: str) -> float:
        return statistics.median(used[side] for used in self.cpu_ms)

    @property
    def per_second(self) -> float:
        return statistics.median(t.per_second for t in self.rounds)

    @property
    def ratio_drf(self) -> float:
        return statistics.median(
            t.per_second / b.throughput.per_second
            for t, b in zip(self.rounds, self.baselines, strict=True)
        )

    @property
    def latency(self) -> load.Latency:
        samples = [ms for t in self.rounds for ms in t.samples_ms]
        return load.Latency(samples, self.statuses, [], self.load_average)

    @property
    def statuses(self) -> Counter[int]:
        total: Counter[int] = Counter()
        for t in self.rounds:
            total.update(t.statuses)
        return total

    @property
    def load_average(self) -> float:
        return max(t.load_average for t in self.rounds)

    @property
    def client_cpu(self) -> float:
        return statistics.median(t.client_cpu for t in self.rounds)

    def errors(self) -> list[str]:
        return [error for t in self.rounds for error in t.errors]


def measure_all(
    seeded: dict[str, Any],
    port: int,
    servers: dict[str, int],
    baselines_at: tuple[load.Target, load.Target],
    say: Say,
) -> tuple[dict[str, Scenario], dict[str, list[Measured]]]:
    """Every round: the baselines, then each scenario against the portal on `port`; `servers`
    names the processes whose CPU time is counted (the portal's gunicorn, PostgreSQL)."""
    bare, drf = baselines_at
    seconds = knob("BENCH_SECONDS", 5.0)
    rounds = seeded["rounds"]
    scenarios = {
        SPREAD: Scenario(SPREAD, [t["slug"] for r in rounds for t in r["spread"]]),
        ALONE: Scenario(ALONE, [t["slug"] for r in rounds for t in r["alone"]]),
        ONE: Scenario(ONE, [seeded["probe"]["slug"]]),
    }
    baselines: dict[str, list[Measured]] = {BARE: [], DRF: []}
    for number, plan in enumerate(rounds):
        baselines[BARE].append(measure(bare, seconds=seconds))
        baselines[DRF].append(drf_now := measure(drf, seconds=seconds))
        for name, tenants, clients in (
            (SPREAD, plan["spread"], CLIENTS),
            (ALONE, plan["alone"], CLIENTS),
            (ONE, [seeded["probe"]], 1),
        ):
            scenario = scenarios[name]
            sent = client_requests(tenants, seeded, port, clients)
            before = {side: cpu_seconds(pid) for side, pid in servers.items()}
            measured = load.throughput_of(
                sent, port=port, seconds=seconds, seen=scenario.unexpected
            )
            scenario.cpu_ms.append(
                {
                    side: (cpu_seconds(pid) - before[side]) * 1000 / max(measured.completed, 1)
                    for side, pid in servers.items()
                }
            )
            scenario.rounds.append(measured)
            scenario.baselines.append(drf_now)
        say(f"round {number + 1} of {len(rounds)} measured")
    return scenarios, baselines


# The checks and the report.


def states_of(scenario: Scenario, after: dict[str, Any]) -> Counter[str]:
    total: Counter[str] = Counter()
    for slug in scenario.tenants:
        total.update(after["states"].get(slug, {}))
    return total


def problems_of(scenarios: dict[str, Scenario], after: dict[str, Any]) -> list[str]:
    """Errors, answers other than 201 and 409 quota_exceeded, states in SQL that do not match
    the answers, and oversubscription: each fails the benchmark."""
    found = []
    for name, scenario in scenarios.items():
        odd = {s: n for s, n in scenario.statuses.items() if s not in INTENDED}
        if odd:
            found.append(f"{name}: status codes {odd}: {scenario.unexpected.seen[:2]}")
        refusals = {c: n for c, n in scenario.unexpected.codes.items() if c != "quota_exceeded"}
        if refusals:
            found.append(f"{name}: refused with {refusals}")
        found += [f"{name}: {error}" for error in scenario.errors()[:5]]
        states = states_of(scenario, after)
        if name != ONE:  # the probe tenant also holds `after`'s own submits
            decided = scenario.statuses[201], scenario.statuses[409]
            in_sql = states["approved"] + states["pending"], states["refused"]
            if decided != in_sql or set(states) - {"approved", "pending", "refused"}:
                found.append(f"{name}: answered 201/409 {decided}, in SQL {dict(states)}")
    over = after["oversubscription"]
    if over["over_in_sql"] or over["over_in_quota_lines_for"] or over["held_without_quota"]:
        found.append(f"oversubscribed: {over}")
    if over["sql_and_selector_disagree"]:
        found.append(f"SQL and quota_lines_for disagree: {over['sql_and_selector_disagree']}")
    return found


def _ms(value: float) -> str:
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def table(
    scenarios: dict[str, Scenario], baselines: dict[str, list[Measured]], after: dict[str, Any]
) -> list[str]:
    header = (
        f"{'scenario':<28} {'cli':>3} {'req/s':>7} {'xDRF':>5} {'p50':>6} {'p95':>6} {'p99':>6} "
        f"{'201':>6} {'409':>6} {'approved':>8} {'pending':>7} {'refused':>7} {'SQL':>3} "
        f"{'load':>4} {'cpu':>4} {'web ms':>6} {'PG ms':>5}"
    )
    lines = [header, "-" * len(header)]
    for name, runs in baselines.items():
        one = load.Latency([ms for m in runs for ms in m.latency.samples_ms], Counter(), [], 0.0)
        lines.append(
            f"{name:<28} {BASELINE_CLIENTS:>3} "
            f"{statistics.median(m.throughput.per_second for m in runs):>7.0f} {'':>5} "
            f"{_ms(one.median):>6} {_ms(one.percentile(0.95)):>6} {_ms(one.percentile(0.99)):>6} "
            f"{'(p50/p95/p99: one client)':<50} "
            f"{max(m.throughput.load_average for m in runs):>4.1f} "
            f"{statistics.median(m.throughput.client_cpu for m in runs):>4.2f}"
        )
    queries = after["one_submit"]["queries"]
    for name, scenario in scenarios.items():
        lat = scenario.latency
        states = states_of(scenario, after)
        counts = (
            f"{states['approved']:>8} {states['pending']:>7} {states['refused']:>7}"
            if name != ONE
            else f"{'':>8} {'':>7} {'':>7}"
        )
        lines.append(
            f"{name:<28} {scenario.rounds[0].clients:>3} {scenario.per_second:>7.1f} "
            f"{scenario.ratio_drf:>5.2f} {_ms(lat.median):>6} {_ms(lat.percentile(0.95)):>6} "
            f"{_ms(lat.percentile(0.99)):>6} {scenario.statuses[201]:>6} "
            f"{scenario.statuses[409]:>6} {counts} {queries:>3} "
            f"{scenario.load_average:>4.1f} {scenario.client_cpu:>4.2f} "
            f"{scenario.cpu('portal'):>6.1f} {scenario.cpu('postgres'):>5.1f}"
        )
    return lines


def evidence(after: dict[str, Any]) -> list[str]:
    """The SQL of one submit and the top of the profile (all of both in the JSON)."""
    one, profiled = after["one_submit"], after["profile"]
    lines = [
        (
            f"one submit in-process: {one['ms']:.1f} ms, {one['queries']} queries, "
            f"{one['sql_ms']:.1f} ms of SQL:"
        ),
        *[f"    {ms:>6.2f} ms  {sql[:150]}" for ms, sql in one["sql"]],
        (
            f"profile of {profiled['submits']} submits in-process ({profiled['statuses']}): "
            f"{profiled['ms_per_submit']:.1f} ms each, {profiled['sql_ms_per_submit']:.1f} ms "
            f"of it SQL, {profiled['queries_per_submit']:.1f} queries; the project's code by "
            "cumulative time:"
        ),
    ]
    stats = profiled["stats"]
    start = next((i for i, line in enumerate(stats) if "ncalls" in line), 0)
    lines += [f"    {line.strip()[:150]}" for line in stats[start : start + 26] if line.strip()]
    return lines


def targets_of(
    scenarios: dict[str, Scenario], problems: list[str], after: dict[str, Any]
) -> list[dict[str, Any]]:
    spread = scenarios[SPREAD].per_second
    over = after["oversubscription"]
    oversubscribed = bool(over["over_in_sql"] or over["over_in_quota_lines_for"]) or bool(
        over["held_without_quota"]
    )
    return [
        {
            "target": f"{SPREAD}: >= {TARGET} decisions/s with {CLIENTS} clients",
            "met": spread >= TARGET,
            "value": f"{spread:.1f}/s",
        },
        {
            "target": "zero oversubscription, checked in SQL",
            "met": not oversubscribed,
            "value": f"{over['at_quota']} of {over['quota_lines']} quota lines full, none over"
            if not oversubscribed
            else "OVERSUBSCRIBED",
        },
        {
            "target": "no errors but intended refusals (409 quota_exceeded)",
            "met": not problems,
            "value": "none" if not problems else f"{len(problems)} problems",
        },
    ]


def scenario_json(scenario: Scenario, after: dict[str, Any]) -> dict[str, Any]:
    lat = scenario.latency
    return {
        "clients": scenario.rounds[0].clients,
        "decisions_per_s": round(scenario.per_second, 1),
        "rounds_per_s": [round(t.per_second, 1) for t in scenario.rounds],
        "x_drf": round(scenario.ratio_drf, 3),
        "ms": {
            "p50": round(lat.median, 2),
            "p95": round(lat.percentile(0.95), 2),
            "p99": round(lat.percentile(0.99), 2),
            "samples": len(lat.samples_ms),
        },
        "statuses": dict(scenario.statuses),
        "refusal_codes": dict(scenario.unexpected.codes),
        "states_in_sql": dict(states_of(scenario, after)),
        "load_average": round(scenario.load_average, 2),
        "client_cores": round(scenario.client_cpu, 2),
        "cpu_ms_per_decision": {
            side: round(scenario.cpu(side), 2) for side in ("portal", "postgres")
        },
    }


def bench_decisions(bench_report: Any, bench_say: Callable[[str], None], tmp_path: Path) -> None:
    def say(message: str) -> None:
        bench_say(f"   {time.strftime('%H:%M:%S')} {message}")

    began = time.monotonic()
    log = tmp_path / "bench.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["BENCH_ROUNDS"] = f"{int(knob('BENCH_ROUNDS', 2))}"
    env["BENCH_SECONDS"] = f"{knob('BENCH_SECONDS', 5.0):g}"
    seeded_json = tmp_path / "decide.json"
    bench_say("")
    url = database_prepare(os.environ["DATABASE_URL"], env, seeded_json, log)
    seeded = json.loads(seeded_json.read_text())
    say(f"database migrated and seeded (seeding {seeded['seconds']:.0f} s)")
    env["DATABASE_URL"] = url

    portal, baselines = portal_and_baselines(env, tmp_path)
    bare, drf = baseline_targets(url, baselines.port)
    with served(portal, baselines):
        say(f"gunicorn up: portal on :{portal.port}, baselines on :{baselines.port}")
        assert portal.process is not None
        servers = {"portal": portal.process.pid, "postgres": postmaster_pid(url)}
        scenarios, base_runs = measure_all(seeded, portal.port, servers, (bare, drf), say)
        rss = {"portal": portal.workers_rss_mib(), "baselines": baselines.workers_rss_mib()}
    run_command([sys.executable, "-m", "tests.bench.decide", "after", str(seeded_json)], env, log)
    after = json.loads(seeded_json.read_text())["after"]
    say("checked for oversubscription; one submit's SQL counted and 200 profiled")

    problems = problems_of(scenarios, after)
    targets = targets_of(scenarios, problems, after)
    met = sum(1 for t in targets if t["met"])
    over = after["oversubscription"]
    lines = [
        f"machine: {machine()}",
        (
            f"rounds of {knob('BENCH_SECONDS', 5.0):g} s; req/s = decisions a second (201 and "
            f"409) or the baselines' requests with {BASELINE_CLIENTS} clients; p50/p95/p99 (ms) "
            f"under that load (baselines: one client); approved/pending/refused = the requests "
            "in SQL afterwards; SQL = queries of one submit (in-process); load = the highest "
            "1-minute load average seen; cpu = cores the load generator used; web ms / PG ms = "
            "CPU ms per decision in the portal's gunicorn and in PostgreSQL"
        ),
        (
            f"A100 quota per tenant: {seeded['rounds'][0]['spread'][0]['a100_quota']} GPU-eq "
            f"(10 tenants), {seeded['rounds'][0]['alone'][0]['a100_quota']} (1 tenant); T4 1/2"
        ),
        *table(scenarios, base_runs, after),
        (
            f"oversubscription: {over['at_quota']} of {over['quota_lines']} (tenant, model) quota "
            f"lines held exactly full; over in SQL {over['over_in_sql'] or 'none'}, through "
            f"quota_lines_for {over['over_in_quota_lines_for'] or 'none'}, held without quota "
            f"{over['held_without_quota']}"
        ),
        "workers' resident memory after the run (MiB): "
        + "; ".join(
            f"{name} {', '.join(f'{mib:.0f}' for mib in sizes)}" for name, sizes in rss.items()
        ),
        *evidence(after),
        *[f"missed: {t['target']} ({t['value']})" for t in targets if not t["met"]],
        *[f"problem: {problem}" for problem in problems[:10]],
        f"whole benchmark: {time.monotonic() - began:.0f} s",
        f"{met}/{len(targets)} targets met (decisions)",
    ]
    report = {
        "machine": machine(),
        "rounds": len(seeded["rounds"]),
        "seconds": knob("BENCH_SECONDS", 5.0),
        "clients": CLIENTS,
        "mix": seeded["mix"],
        "a100_quota": {
            "10 tenants": seeded["rounds"][0]["spread"][0]["a100_quota"],
            "1 tenant": seeded["rounds"][0]["alone"][0]["a100_quota"],
        },
        "workers_rss_mib": rss,
        "baselines": {
            name: {
                "req_per_s_16_clients": round(
                    statistics.median(m.throughput.per_second for m in runs), 1
                ),
                "rounds_req_per_s": [round(m.throughput.per_second, 1) for m in runs],
            }
            for name, runs in base_runs.items()
        },
        "scenarios": {name: scenario_json(s, after) for name, s in scenarios.items()},
        "oversubscription": over,
        "one_submit": after["one_submit"],
        "profile": after["profile"],
        "targets": targets,
        "problems": problems,
        "summary": f"{met}/{len(targets)} targets met (decisions)",
    }
    bench_report("decisions", report, lines=lines, closing=report["summary"])
    assert not problems, "\n".join(problems[:20])
