"""deploy/prometheus and deploy/grafana, checked with Prometheus's own promtool (Debian's
`prometheus` package, which the test harness installs): the configuration, the rules, the
rules' unit tests, and the dashboard's queries against the recording rules."""

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
RULES = PROMETHEUS / "rules"
DASHBOARD = ROOT / "deploy" / "grafana" / "gpu-usage.json"

# Raw metrics the dashboard may read besides the recording rules: none, so far.
DASHBOARD_RAW_METRICS: set[str] = set()


def promtool(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is missing: `make test` installs Debian's prometheus package"
    return subprocess.run(
        [binary, *map(str, args)], check=False, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def rules(kind: str) -> dict[str, dict[str, Any]]:
    """Every rule of `kind` ("record" or "alert") in deploy/prometheus/rules, by name."""
    found = {}
    for path in sorted(RULES.glob("*.yml")):
        for group in load(path)["groups"]:
            for rule in group["rules"]:
                if kind in rule:
                    assert rule[kind] not in found, f"{rule[kind]} is defined twice"
                    found[rule[kind]] = rule
    return found


# The configuration


CONFIG = PROMETHEUS / "prometheus.yml"  # DNS and static targets: any Prometheus build
KUBERNETES_SD = PROMETHEUS / "prometheus-kubernetes-sd.yml"  # upstream builds


def scrape_jobs(path: Path) -> dict[str, dict[str, Any]]:
    return {job["job_name"]: job for job in load(path)["scrape_configs"]}


def assert_keeps_the_workloads_namespace_and_pod(path: Path) -> dict[str, dict[str, Any]]:
    jobs = scrape_jobs(path)
    assert set(jobs) == {"dcgm-exporter", "kube-state-metrics", "gpu-portal"}
    for name in ("dcgm-exporter", "kube-state-metrics"):
        assert jobs[name]["honor_labels"] is True, name
        targets = {relabel.get("target_label") for relabel in jobs[name].get("relabel_configs", [])}
        # A GPU no pod uses has no namespace: the exporter's own must not be given to it.
        assert not targets & {"namespace", "pod", "container"}, name
        for static in jobs[name].get("static_configs", []):
            assert not set(static.get("labels", {})) & {"namespace", "pod", "container"}, name
    portal = jobs["gpu-portal"]
    assert portal["metrics_path"] == "/metrics"
    assert portal["authorization"] == {
        "type": "Bearer",
        "credentials_file": "secrets/gpu-portal-metrics-token",
    }
    assert load(path)["rule_files"] == ["rules/*.yml"]
    return jobs


def test_the_jobs_keep_the_workloads_namespace_and_pod() -> None:
    jobs = assert_keeps_the_workloads_namespace_and_pod(CONFIG)

    # Every exporter pod through the headless Service beside the configuration.
    [dns] = jobs["dcgm-exporter"]["dns_sd_configs"]
    service = load(PROMETHEUS / "dcgm-exporter-headless.yaml")
    assert service["spec"]["clusterIP"] == "None"
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert dns == {"names": [f"{name}.{namespace}.svc.cluster.local"], "type": "A", "port": 9400}
    assert not any("kubernetes_sd_configs" in job for job in jobs.values())


def test_the_kubernetes_discovery_variant_keeps_them_too() -> None:
    jobs = assert_keeps_the_workloads_namespace_and_pod(KUBERNETES_SD)

    assert jobs["dcgm-exporter"]["kubernetes_sd_configs"] == [{"role": "pod"}]
    assert jobs["kube-state-metrics"]["kubernetes_sd_configs"] == [{"role": "endpoints"}]


def copy_with(path: Path, tmp_path: Path) -> Path:
    """A copy of deploy/prometheus whose prometheus.yml is the configuration at `path`."""
    copy = tmp_path / "prometheus"
    shutil.copytree(PROMETHEUS, copy)
    shutil.copyfile(path, copy / "prometheus.yml")
    return copy


def assert_checks_with_every_rule(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rule files found" in result.stdout
    assert "SUCCESS: 13 rules found" in result.stdout  # alerts.yml
    assert "SUCCESS: 19 rules found" in result.stdout  # recording.yml


def test_promtool_checks_the_configuration_as_shipped_and_the_rules_it_loads() -> None:
    assert_checks_with_every_rule(promtool("check", "config", CONFIG))


def test_promtool_checks_the_kubernetes_discovery_variant(tmp_path: Path) -> None:
    original = promtool("check", "config", KUBERNETES_SD)
    # Debian builds Prometheus without Kubernetes service discovery: that is the only thing
    # its promtool may refuse, once per job.
    if original.returncode != 0:
        output = original.stdout + original.stderr
        errors = [line for line in output.splitlines() if "not found in type" in line]
        assert len(errors) == 3, output
        assert all("field kubernetes_sd_configs not found" in line for line in errors), errors
    # Everything else is checked with each job's discovery replaced by a static target.
    copy = copy_with(KUBERNETES_SD, tmp_path)
    config = load(copy / "prometheus.yml")
    for job in config["scrape_configs"]:
        assert job.pop("kubernetes_sd_configs"), job["job_name"]
        job["static_configs"] = [{"targets": ["127.0.0.1:9400"]}]
    (copy / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))

    assert_checks_with_every_rule(promtool("check", "config", copy / "prometheus.yml", cwd=copy))


def test_promtool_finds_a_broken_rule(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "groups:\n  - name: x\n    rules:\n      - record: a:b:sum\n        expr: sum(rate(x[5m])\n"
    )

    result = promtool("check", "rules", broken)

    assert result.returncode == 1
    assert "unclosed left parenthesis" in result.stdout + result.stderr


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", RULES / "recording.yml", RULES / "alerts.yml")

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == 2


# The rules' unit tests


def test_the_rules_pass_their_unit_tests() -> None:
    tests = sorted((PROMETHEUS / "tests").glob("*.yml"))
    assert [path.name for path in tests] == ["alerts_test.yml", "recording_test.yml"]

    result = promtool("test", "rules", *tests)

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == 2


def test_the_unit_tests_catch_an_alert_that_no_longer_fires(tmp_path: Path) -> None:
    copy = tmp_path / "prometheus"
    shutil.copytree(PROMETHEUS, copy)
    alerts = copy / "rules" / "alerts.yml"
    text = alerts.read_text()
    assert text.count("(portal_metering_complete_until_timestamp_seconds) > 7200") == 1
    alerts.write_text(text.replace("timestamp_seconds) > 7200", "timestamp_seconds) > 72000"))

    result = promtool("test", "rules", copy / "tests" / "alerts_test.yml", cwd=copy)

    assert result.returncode == 1
    assert "alertname: GpuPortalMeteringLagging, time: 2h20m" in result.stdout + result.stderr


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    cases: dict[str, set[bool]] = {}
    for test in load(PROMETHEUS / "tests" / "alerts_test.yml")["tests"]:
        for case in test["alert_rule_test"]:
            cases.setdefault(case["alertname"], set()).add(bool(case["exp_alerts"]))

    assert set(cases) == set(rules("alert"))
    assert {name: firing for name, firing in cases.items() if firing != {True, False}} == {}


def test_every_recording_rule_is_tested() -> None:
    expressions = " ".join(
        case["expr"]
        for test in load(PROMETHEUS / "tests" / "recording_test.yml")["tests"]
        for case in test["promql_expr_test"]
    )

    untested = {name for name in rules("record") if name not in expressions}

    assert untested == set()


def test_the_alerts_read_metrics_the_portal_exports() -> None:
    sources = "".join(path.read_text() for path in (ROOT / "portal").rglob("metrics.py"))
    used = set()
    for rule in rules("alert").values():
        used |= set(re.findall(r"\bportal_[a-z_]+", rule["expr"]))

    assert {name for name in used if f'"{name.removesuffix("_total")}"' not in sources} == set()
    assert "portal_metering_complete_until_timestamp_seconds" in used


# The dashboard

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or"}
PROMQL_WORDS |= {"unless", "offset", "bool"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (functions, labels and keywords left out)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)  # Grafana variables
    names = set(re.findall(r"(?<![\w:.])([a-zA-Z_:][\w:]*)(?![\w:]|\s*\()", expr))
    return names - PROMQL_WORDS


def test_metric_names_finds_what_an_expression_reads() -> None:
    expr = (
        'sum by (namespace) (rate(a:b:c{x="y"}[5m])) / on (pod) group_left ()'
        " raw_total unless d offset 5m > bool 1e3 * $var"
    )

    assert metric_names(expr) == {"a:b:c", "raw_total", "d"}


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    def panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [p for item in items for p in [item, *panels(item.get("panels", []))]]

    queries = [t["expr"] for panel in panels(dashboard["panels"]) for t in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            queries.append(re.sub(r"^label_values\(([^,]+),.*\)$", r"\1", query))
    return queries


def test_the_dashboard_reads_only_the_recording_rules() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = dashboard_queries(dashboard)
    used = set().union(*(metric_names(query) for query in queries))

    assert len(queries) >= 10
    assert used - set(rules("record")) - DASHBOARD_RAW_METRICS == set()
    assert {"namespace:dcgm_gpu_busy:avg5m", "model:dcgm_gpu_utilization:ratio"} <= used


def test_the_dashboard_has_a_namespace_variable_every_namespace_panel_follows() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}

    assert variables["namespace"]["multi"] is True
    assert variables["namespace"]["query"]["query"] == (
        "label_values(namespace:dcgm_gpu_busy:avg5m, namespace)"
    )
    namespace_queries = [q for q in dashboard_queries(dashboard) if re.search(r"\bnamespace", q)]
    assert namespace_queries
    for query in namespace_queries:
        if not query.startswith("namespace:dcgm_gpu_busy:avg5m") or "{" in query:
            assert 'namespace=~"$namespace"' in query, query


def test_the_dashboard_is_grafana_json_with_unique_panels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]

    assert dashboard["uid"] == "gpu-portal-usage"
    assert {panel["type"] for panel in panels} == {"row", "stat", "timeseries", "table"}
    assert len({panel["id"] for panel in panels}) == len(panels)
    assert all(
        target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for panel in panels
        for target in panel.get("targets", [])
    )
