"""The Helm chart, rendered and linted by Helm's own engine (helm-python-sdk, offline), and the
RBAC file for `kubectl apply`: every object validates against the Kubernetes schemas, the
chart's ClusterRoles are the ones of deploy/kubernetes/rbac.yaml, and wrong values fail on
values.schema.json before anything is applied."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.db import connection
from helm_python.chart import Chart, lint, package
from helm_python.errors import HelmRenderError, HelmValuesError

from tests.kubeapi.resources import KUBERNETES_VERSION

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy/helm/gpu-portal"
MINIMAL_VALUES = ROOT / "deploy/helm/values-minimal.yaml"
RBAC_YAML = ROOT / "deploy/kubernetes/rbac.yaml"
PROMETHEUS_RULES = ROOT / "deploy/prometheus/rules"
RELEASE = "gpu-portal"
NAMESPACE = "gpu-portal"
SECRET_DIR = "/var/run/secrets/gpu-portal"
# Custom resources of the Prometheus Operator: no schema of theirs ships offline, so they are
# checked field by field below (and the rules with promtool).
OPERATOR_GROUP = "monitoring.coreos.com/v1"

Manifest = dict[str, Any]

SSO = {
    "sso": {
        "enabled": True,
        "issuerUrl": "https://keycloak.example.org/realms/gpu-portal",
        "breakGlassUsers": ["root-admin"],
        "keycloakSync": {"enabled": True},
    },
    "webhook": {"url": "https://hooks.example.org/gpu-portal"},
}
INGRESS_TLS = {
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"},
        "tls": {"enabled": True, "secretName": "portal-certificate"},
    }
}
HPA = {
    "web": {"autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 8}},
    "worker": {"autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 6}},
}
MONITORING = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {"enabled": True},
    "metrics": {"token": {"enabled": True}},
}
AUDIT_ARCHIVE = {"auditArchive": {"enabled": True, "existingClaim": "gpu-portal-audit-archive"}}
# The combinations deploy/README.md documents; "monitoring" renders a chart with rule files.
COMBINATIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "minimal": yaml.safe_load(MINIMAL_VALUES.read_text()),
    "sso": SSO,
    "ingress-tls": INGRESS_TLS,
    "hpa": HPA,
    "monitoring": MONITORING,
    "audit-archive": AUDIT_ARCHIVE,
}

# A rule file like those of deploy/prometheus/rules/, for a chart that packages one.
SAMPLE_RULES = """\
groups:
  - name: gpu-portal-test
    rules:
      - alert: GpuPortalReadinessFailing
        expr: sum(kube_pod_status_ready{namespace="gpu-portal", condition="false"}) > 0
        for: 10m
        labels:
          severity: warning
        annotations:
          summary: "{{ $labels.pod }} is not ready"
"""


@pytest.fixture(scope="module")
def chart_with_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart as packaged once deploy/prometheus/rules/ is copied in, plus a sample file."""
    chart = tmp_path_factory.mktemp("chart") / "gpu-portal"
    shutil.copytree(CHART, chart)
    (chart / "files/prometheus-rules/zz-sample.yml").write_text(SAMPLE_RULES)
    return chart


def chart_for(combination: str, chart_with_rules: Path) -> Path:
    return chart_with_rules if combination == "monitoring" else CHART


def render(values: dict[str, Any], chart_path: Path = CHART) -> list[Manifest]:
    with Chart.load(chart_path) as chart:
        rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    manifests: list[Manifest] = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".txt"):
            continue
        manifests.extend(document for document in yaml.safe_load_all(text) if document)
    return manifests


def one(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    [found] = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def pod_specs(manifests: list[Manifest]) -> dict[str, dict[str, Any]]:
    specs = {
        m["metadata"]["name"]: m["spec"]["template"]["spec"]
        for m in manifests
        if m["kind"] in ("Deployment", "Job")
    }
    specs |= {
        m["metadata"]["name"]: m["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        for m in manifests
        if m["kind"] == "CronJob"
    }
    return specs


def container_env(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    [container] = spec["containers"]
    return {item["name"]: item for item in container["env"]}


def secret_sources(spec: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each secret file of the pod: its name, from (Secret, key)."""
    [projected] = [v["projected"] for v in spec["volumes"] if v["name"] == "secrets"]
    return {
        item["path"]: (source["secret"]["name"], item["key"])
        for source in projected["sources"]
        for item in source["secret"]["items"]
    }


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_the_chart_lints_clean_with_helm(combination: str, chart_with_rules: Path) -> None:
    report = lint(
        chart_for(combination, chart_with_rules),
        COMBINATIONS[combination],
        strict=True,
        namespace=NAMESPACE,
    )

    assert report["total_charts_linted"] == 1
    assert report["errors"] == []
    # Only "icon is recommended" (informational) is left.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_every_rendered_object_validates_against_the_kubernetes_schemas(
    combination: str, chart_with_rules: Path
) -> None:
    manifests = render(COMBINATIONS[combination], chart_for(combination, chart_with_rules))

    kinds = sorted(m["kind"] for m in manifests if m["apiVersion"] != OPERATOR_GROUP)
    for manifest in manifests:
        if manifest["apiVersion"] == OPERATOR_GROUP:
            continue
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    assert {
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Ingress",
        "Job",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "Service",
        "ServiceAccount",
    } <= set(kinds)
    assert kinds.count("Deployment") == 3
    assert kinds.count("HorizontalPodAutoscaler") == (2 if combination == "hpa" else 0)


def test_web_probes_readiness_on_readyz_and_liveness_on_healthz() -> None:
    web = one(render({}), "Deployment", "gpu-portal-web")
    [container] = web["spec"]["template"]["spec"]["containers"]

    # /readyz fails while the database or Redis is down (out of the Service, not restarted);
    # /healthz only says the process serves.
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert container["command"][:2] == ["gunicorn", "portal.wsgi:application"]
    assert container["resources"]["requests"]["memory"] == "256Mi"
    assert container["resources"]["limits"]["memory"] == "512Mi"


def test_behind_the_ingress_client_addresses_come_from_the_proxys_forwarded_for() -> None:
    # Sign-in throttling and the API's rate limits count per client address: without the
    # proxy count every client would share the ingress controller's address and one count.
    for values, expected in (({}, "1"), ({"portal": {"trustedProxyCount": 2}}, "2")):
        specs = pod_specs(render(values))
        for name in ("gpu-portal-web", "gpu-portal-worker", "gpu-portal-beat"):
            assert container_env(specs[name])["PORTAL_TRUSTED_PROXY_COUNT"]["value"] == expected


def test_web_pods_spread_and_a_disruption_budget_keeps_one_serving() -> None:
    manifests = render({})
    web = one(manifests, "Deployment", "gpu-portal-web")
    pdb = one(manifests, "PodDisruptionBudget", "gpu-portal-web")
    pod_labels = web["spec"]["template"]["metadata"]["labels"]

    assert web["spec"]["replicas"] == 2
    spread = web["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert [c["topologyKey"] for c in spread] == [
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    ]
    assert all(c["labelSelector"]["matchLabels"] == pod_labels for c in spread)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == pod_labels


def test_with_autoscaling_the_deployments_leave_replicas_to_the_autoscaler() -> None:
    manifests = render(HPA)
    web = one(manifests, "Deployment", "gpu-portal-web")
    hpa = one(manifests, "HorizontalPodAutoscaler", "gpu-portal-worker")

    assert "replicas" not in web["spec"]
    assert "replicas" not in one(manifests, "Deployment", "gpu-portal-worker")["spec"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "gpu-portal-worker",
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 6)


def test_worker_scales_and_beat_is_exactly_one_recreated_scheduler() -> None:
    manifests = render({"worker": {"replicaCount": 3}})
    worker = one(manifests, "Deployment", "gpu-portal-worker")
    beat = one(manifests, "Deployment", "gpu-portal-beat")

    assert worker["spec"]["replicas"] == 3
    assert worker["spec"]["template"]["spec"]["containers"][0]["command"][:3] == [
        "celery",
        "--app=portal",
        "worker",
    ]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    [beat_container] = beat["spec"]["template"]["spec"]["containers"]
    assert beat_container["command"][:3] == ["celery", "--app=portal", "beat"]
    # Its schedule file lives on the writable /tmp.
    assert "--schedule=/tmp/celerybeat-schedule" in beat_container["command"]
    # Only the workers talk to the Kubernetes API.
    tokens = {
        name: spec["automountServiceAccountToken"] for name, spec in pod_specs(manifests).items()
    }
    assert tokens == {
        "gpu-portal-web": False,
        "gpu-portal-worker": True,
        "gpu-portal-beat": False,
        "gpu-portal-migrate": False,
    }


def test_migrations_run_as_a_hook_before_install_and_upgrade() -> None:
    job = one(render({}), "Job", "gpu-portal-migrate")

    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "before-hook-creation" in job["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_migrations_and_the_archive_connect_as_the_owner_the_portal_as_the_runtime_role() -> None:
    manifests = render(AUDIT_ARCHIVE | {"database": {"owner": {"runtimeRole": "portal_app"}}})

    sources = {
        name: secret_sources(spec)["DATABASE_URL"] for name, spec in pod_specs(manifests).items()
    }
    assert sources == {
        "gpu-portal-web": ("gpu-portal", "database-url"),
        "gpu-portal-worker": ("gpu-portal", "database-url"),
        "gpu-portal-beat": ("gpu-portal", "database-url"),
        "gpu-portal-migrate": ("gpu-portal", "database-owner-url"),
        "gpu-portal-audit-archive": ("gpu-portal", "database-owner-url"),
    }
    # The migrations grant the runtime role its privileges after each run.
    roles = {
        name: container_env(spec).get("PORTAL_DATABASE_RUNTIME_ROLE", {}).get("value")
        for name, spec in pod_specs(manifests).items()
    }
    assert roles["gpu-portal-migrate"] == "portal_app"
    assert roles["gpu-portal-web"] is None


def test_with_one_database_role_every_pod_connects_with_the_one_url() -> None:
    manifests = render({"database": {"owner": {"enabled": False}}})

    for name, spec in pod_specs(manifests).items():
        assert secret_sources(spec)["DATABASE_URL"] == ("gpu-portal", "database-url"), name
        assert "PORTAL_DATABASE_RUNTIME_ROLE" not in container_env(spec), name


def test_the_audit_archive_is_off_by_default() -> None:
    assert not [m for m in render({}) if m["kind"] == "CronJob"]


def test_the_audit_archive_runs_daily_one_at_a_time_writing_to_its_claim() -> None:
    values = {"auditArchive": AUDIT_ARCHIVE["auditArchive"] | {"retentionDays": 730}}
    cronjob = one(render(values), "CronJob", "gpu-portal-audit-archive")

    assert cronjob["spec"]["schedule"] == "17 3 * * *"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"
    [container] = spec["containers"]
    assert container["command"] == ["python", "manage.py", "audit_archive"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["PORTAL_AUDIT_RETENTION_DAYS"] == "730"
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    assert volumes["audit-archive"]["persistentVolumeClaim"] == {
        "claimName": "gpu-portal-audit-archive"
    }
    assert mounts["audit-archive"] == env["PORTAL_AUDIT_ARCHIVE_DIR"]


def test_every_pod_runs_as_the_image_user_on_a_read_only_root_with_a_writable_tmp() -> None:
    manifests = render({"image": {"digest": "sha256:" + "a" * 64}} | AUDIT_ARCHIVE)

    assert len(pod_specs(manifests)) == 5
    for name, spec in pod_specs(manifests).items():
        assert spec["securityContext"]["runAsUser"] == 10001, name
        assert spec["securityContext"]["runAsNonRoot"] is True
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        assert "emptyDir" in volumes["tmp"]
        for container in spec["containers"]:
            assert container["image"] == "registry.example.org/gpu-portal@sha256:" + "a" * 64
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
            assert mounts["/tmp"] == "tmp"  # noqa: S108  (the pod's own emptyDir)


def settings_secrets() -> set[str]:
    """Every variable portal/settings.py reads as a secret (NAME or NAME_FILE)."""
    source = (ROOT / "portal/settings.py").read_text()
    return set(re.findall(r'env\.secret\(\s*"([A-Z_]+)"', source))


def test_secrets_reach_the_portal_only_as_files_from_existing_secrets(
    chart_with_rules: Path,
) -> None:
    values = {
        **SSO,
        **MONITORING,
        "database": {"url": {"secretName": "postgres-app", "key": "uri"}},
        "extraSecretFiles": [
            {"env": "EMAIL_HOST_PASSWORD", "secretName": "smtp", "key": "password"}
        ],
    }
    manifests = render(values, chart_with_rules)

    expected = {
        "SECRET_KEY": ("gpu-portal", "secret-key"),
        "DATABASE_URL": ("postgres-app", "uri"),
        "REDIS_URL": ("gpu-portal", "redis-url"),
        "OIDC_CLIENT_SECRET": ("gpu-portal", "oidc-client-secret"),
        "KEYCLOAK_ADMIN_CLIENT_SECRET": ("gpu-portal", "keycloak-admin-client-secret"),
        "PORTAL_WEBHOOK_SECRET": ("gpu-portal", "webhook-secret"),
        "METRICS_TOKEN": ("gpu-portal", "metrics-token"),
        "EMAIL_HOST_PASSWORD": ("smtp", "password"),
    }
    assert set(expected) <= settings_secrets()
    assert not any(kind == "Secret" for kind in (m["kind"] for m in manifests))
    for name, spec in pod_specs(manifests).items():
        [container] = spec["containers"]
        env = container_env(spec)
        assert not any("secretKeyRef" in item.get("valueFrom", {}) for item in env.values())
        files = {
            key.removesuffix("_FILE"): item["value"]
            for key, item in env.items()
            if key.endswith("_FILE")
        }
        assert files == {secret: f"{SECRET_DIR}/{secret}" for secret in expected}, name
        # The migrations connect as the owner role (database.owner), the rest as the runtime.
        owner = {"DATABASE_URL": ("gpu-portal", "database-owner-url")}
        assert secret_sources(spec) == expected | (owner if name.endswith("-migrate") else {})
        assert {"mountPath": SECRET_DIR, "name": "secrets", "readOnly": True} in container[
            "volumeMounts"
        ]


def test_without_optional_features_only_the_three_required_secrets_are_mounted() -> None:
    web = one(render({}), "Deployment", "gpu-portal-web")
    env = {item["name"] for item in web["spec"]["template"]["spec"]["containers"][0]["env"]}

    assert {name for name in env if name.endswith("_FILE")} == {
        "SECRET_KEY_FILE",
        "DATABASE_URL_FILE",
        "REDIS_URL_FILE",
    }
    assert "OIDC_ISSUER_URL" not in env


def container_environment(container: dict[str, Any], secret_files: Path) -> dict[str, str]:
    """The environment the kubelet gives the container: $(VAR) expanded, the pod's IP filled
    in, the secret mount moved to a local folder."""
    environment: dict[str, str] = {}
    for item in container["env"]:
        if "valueFrom" in item:
            assert item["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
            value = "10.42.3.7"
        else:
            value = re.sub(
                r"\$\(([A-Z_]+)\)", lambda match: environment[match[1]], str(item["value"])
            )
        environment[item["name"]] = value.replace(SECRET_DIR, str(secret_files))
    return environment


PROBE_SCRIPT = """
import json, django
django.setup()
from django.test import Client
client = Client(REMOTE_ADDR="10.42.9.9")
ready = client.get("/readyz", HTTP_HOST="10.42.3.7:8000")
answers = {
    "healthz": client.get("/healthz", HTTP_HOST="10.42.3.7:8000").status_code,
    "readyz": ready.status_code,
    "readyz body": ready.json(),
    "public": client.get("/healthz", HTTP_HOST="gpu-portal.example.org").status_code,
    "other host": client.get("/healthz", HTTP_HOST="evil.example.org").status_code,
    "metrics": client.get(
        "/metrics", HTTP_HOST="10.42.3.7:8000", HTTP_AUTHORIZATION="Bearer metrics-token-value"
    ).status_code,
    "metrics without token": client.get("/metrics", HTTP_HOST="10.42.3.7:8000").status_code,
}
print(json.dumps(answers))
"""


@pytest.mark.parametrize("combination", ["defaults", "sso", "monitoring"])
def test_the_portal_starts_with_the_charts_environment_and_answers_probes_on_the_pod_ip(
    combination: str, chart_with_rules: Path, tmp_path: Path, db: None
) -> None:
    """The web container's environment, as the kubelet sets it, is one the portal's settings
    accept; probes and Prometheus, which connect to the pod's IP, are answered."""
    manifests = render(COMBINATIONS[combination], chart_for(combination, chart_with_rules))
    [container] = one(manifests, "Deployment", "gpu-portal-web")["spec"]["template"]["spec"][
        "containers"
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        [test_database] = cursor.fetchone()
    secret_values = {
        "SECRET_KEY": "k" * 50,
        # The test database pytest-django made, for /readyz.
        "DATABASE_URL": os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + test_database,
        "REDIS_URL": os.environ["REDIS_URL"],
        "OIDC_CLIENT_SECRET": "oidc-secret",
        "KEYCLOAK_ADMIN_CLIENT_SECRET": "sync-secret",
        "PORTAL_WEBHOOK_SECRET": "webhook-secret",
        "METRICS_TOKEN": "metrics-token-value",
    }
    for name, value in secret_values.items():
        (tmp_path / name).write_text(value + "\n")
    environment = container_environment(container, tmp_path)

    result = subprocess.run(
        [sys.executable, "-c", PROBE_SCRIPT],
        cwd=ROOT,
        env={
            "PATH": os.environ["PATH"],
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            **environment,
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers["healthz"] == 200
    assert answers["readyz"] == 200, answers
    assert answers["public"] == 200
    assert answers["other host"] == 400
    assert answers["metrics"] == (200 if combination == "monitoring" else 404)
    assert answers["metrics without token"] == 404


def test_the_ingress_has_its_class_tls_and_annotations() -> None:
    ingress = one(render(INGRESS_TLS), "Ingress", "gpu-portal")

    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {"cert-manager.io/cluster-issuer": "letsencrypt"}
    assert ingress["spec"]["tls"] == [
        {"hosts": ["gpu-portal.example.org"], "secretName": "portal-certificate"}
    ]
    [rule] = ingress["spec"]["rules"]
    assert rule["host"] == "gpu-portal.example.org"
    assert rule["http"]["paths"][0]["backend"]["service"] == {
        "name": "gpu-portal",
        "port": {"name": "http"},
    }


def test_the_network_policy_lets_in_the_ingress_controller_and_out_only_what_is_needed() -> None:
    manifests = render({})
    web_policy = one(manifests, "NetworkPolicy", "gpu-portal-web")
    policy = one(manifests, "NetworkPolicy", "gpu-portal")

    ingress_controller, prometheus = web_policy["spec"]["ingress"]
    assert ingress_controller["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
    ]
    assert ingress_controller["ports"] == [{"port": 8000, "protocol": "TCP"}]
    assert prometheus["ports"] == [{"port": 8000, "protocol": "TCP"}]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy["spec"]  # nothing else comes in
    egress_ports = {port["port"] for rule in policy["spec"]["egress"] for port in rule["ports"]}
    assert egress_ports == {53, 5432, 6379, 443, 6443, 9090}
    with_sso = one(render(SSO), "NetworkPolicy", "gpu-portal")
    assert {p["port"] for rule in with_sso["spec"]["egress"] for p in rule["ports"]} == (
        egress_ports | {8443}
    )


def test_network_policy_destinations_are_configurable() -> None:
    database = [{"ipBlock": {"cidr": "10.0.5.0/24"}}]
    manifests = render(
        {
            "networkPolicy": {
                "egress": {
                    "database": {"enabled": True, "to": database, "ports": [{"port": 6432}]}
                },
                "extraEgress": [{"ports": [{"port": 587, "protocol": "TCP"}]}],
            }
        }
    )
    policy = one(manifests, "NetworkPolicy", "gpu-portal")

    assert {"ports": [{"port": 6432}], "to": database} in policy["spec"]["egress"]
    assert {"ports": [{"port": 587, "protocol": "TCP"}]} in policy["spec"]["egress"]
    kubernetes_validate.validate(policy, KUBERNETES_VERSION, strict=True)
    assert not any(
        m["kind"] == "NetworkPolicy" for m in render({"networkPolicy": {"enabled": False}})
    )


def rbac_documents() -> list[Manifest]:
    return [document for document in yaml.safe_load_all(RBAC_YAML.read_text()) if document]


def test_the_chart_installs_the_cluster_roles_of_rbac_yaml() -> None:
    manifests = render({})
    rbac = rbac_documents()

    for name in ("gpu-portal", "gpu-portal-tenant-lead"):
        assert (
            one(manifests, "ClusterRole", name)["rules"] == one(rbac, "ClusterRole", name)["rules"]
        ), f"{name}: the chart's rules are not deploy/kubernetes/rbac.yaml's"
    binding = one(manifests, "ClusterRoleBinding", "gpu-portal")
    assert binding["roleRef"]["name"] == "gpu-portal"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-portal", "namespace": NAMESPACE}
    ]
    account = one(manifests, "ServiceAccount", "gpu-portal")
    assert (
        one(manifests, "Deployment", "gpu-portal-worker")["spec"]["template"]["spec"][
            "serviceAccountName"
        ]
        == account["metadata"]["name"]
    )


def test_the_chart_reads_its_rules_from_rbac_yaml_itself() -> None:
    link = CHART / "files" / "rbac.yaml"

    assert link.is_symlink(), "the chart must read rbac.yaml, not carry a copy of it"
    assert link.resolve() == RBAC_YAML.resolve()
    assert not list((CHART / "files").glob("*rules*.yaml")), "a second copy of the rules"


def test_the_packaged_chart_carries_the_rules_file(tmp_path: Path) -> None:
    archive = package(CHART, destination=tmp_path)

    manifests = render({}, Path(archive))
    assert (
        one(manifests, "ClusterRole", "gpu-portal")["rules"]
        == one(rbac_documents(), "ClusterRole", "gpu-portal")["rules"]
    )


def test_a_second_release_in_the_cluster_can_leave_the_tenant_lead_role_to_the_first() -> None:
    manifests = render({"rbac": {"createTenantLeadRole": False}, "fullnameOverride": "portal-b"})

    assert [m["metadata"]["name"] for m in manifests if m["kind"] == "ClusterRole"] == ["portal-b"]


def test_the_plain_manifests_validate_and_migrate_as_the_owner_role() -> None:
    documents = [
        d for d in yaml.safe_load_all((ROOT / "deploy/kubernetes/portal.yaml").read_text()) if d
    ]

    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    [config] = [d for d in documents if d["kind"] == "ConfigMap"]
    [job] = [d for d in documents if d["kind"] == "Job"]
    [migrate] = job["spec"]["template"]["spec"]["containers"]
    assert migrate["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert migrate["env"] == [
        {
            "name": "DATABASE_URL",
            "valueFrom": {"secretKeyRef": {"name": "gpu-portal", "key": "DATABASE_OWNER_URL"}},
        }
    ]
    assert config["data"]["PORTAL_DATABASE_RUNTIME_ROLE"] == "gpu_portal"
    # The other processes take DATABASE_URL (the runtime role) from the Secret as it is.
    for deployment in (d for d in documents if d["kind"] == "Deployment"):
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert "env" not in container


def test_rbac_yaml_validates_and_creates_the_namespace_it_uses() -> None:
    documents = rbac_documents()

    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
    # kubectl applies in file order: the namespace comes first.
    assert documents[0]["kind"] == "Namespace"
    created = {d["metadata"]["name"] for d in documents if d["kind"] == "Namespace"}
    used = {d["metadata"]["namespace"] for d in documents if "namespace" in d["metadata"]}
    used |= {
        subject["namespace"]
        for d in documents
        if d["kind"] == "ClusterRoleBinding"
        for subject in d["subjects"]
    }
    assert used == {"gpu-portal"}
    assert used <= created


def test_service_monitor_scrapes_metrics_with_the_token_from_the_existing_secret(
    chart_with_rules: Path,
) -> None:
    manifests = render(MONITORING, chart_with_rules)
    monitor = one(manifests, "ServiceMonitor", "gpu-portal")
    service = one(manifests, "Service", "gpu-portal")

    assert monitor["apiVersion"] == OPERATOR_GROUP
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "gpu-portal", "key": "metrics-token"},
    }


def test_a_service_monitor_without_a_way_to_read_metrics_is_refused() -> None:
    with (
        Chart.load(CHART) as chart,
        pytest.raises(HelmRenderError, match=r"metrics\.token\.enabled"),
    ):
        chart.render({"serviceMonitor": {"enabled": True}}, name=RELEASE, namespace=NAMESPACE)


def test_prometheus_rule_packs_the_charts_rule_files_and_promtool_accepts_them(
    chart_with_rules: Path, tmp_path: Path
) -> None:
    rule = one(render(MONITORING, chart_with_rules), "PrometheusRule", "gpu-portal")

    assert rule["apiVersion"] == OPERATOR_GROUP
    names = [group["name"] for group in rule["spec"]["groups"]]
    assert "gpu-portal-test" in names
    promtool = shutil.which("promtool")
    assert promtool is not None, "promtool comes with Debian's prometheus package (harness)"
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run(
        [promtool, "check", "rules", str(rules_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_the_charts_rule_files_are_those_of_deploy_prometheus() -> None:
    def rule_files(folder: Path) -> dict[str, str]:
        return {path.name: path.read_text() for path in sorted(folder.glob("*.yml"))}

    assert rule_files(CHART / "files/prometheus-rules") == rule_files(PROMETHEUS_RULES), (
        "copy deploy/prometheus/rules/*.yml to deploy/helm/gpu-portal/files/prometheus-rules/"
    )


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"web": {"replicaCount": "two"}}, "/web/replicaCount': got string, want integer"),
        ({"replicaCount": 3}, "additional properties 'replicaCount' not allowed"),
        ({"worker": {"replicaCount": -1}}, "/worker/replicaCount"),
        ({"sso": {"enabled": True}}, "/sso/issuerUrl"),
        ({"image": {"digest": "latest"}}, "/image/digest"),
        ({"portal": {"clusterMode": "production"}}, "/portal/clusterMode"),
        ({"portal": {"env": {"lower_case": "x"}}}, "'lower_case' does not match pattern"),
        ({"auditArchive": {"enabled": True}}, "/auditArchive/existingClaim"),
        ({"auditArchive": {"schedule": "daily"}}, "/auditArchive/schedule"),
        ({"database": {"owner": {"runtimeRole": ""}}}, "/database/owner/runtimeRole"),
        ({"portal": {"trustedProxyCount": -1}}, "/portal/trustedProxyCount"),
    ],
)
def test_wrong_values_fail_on_the_schema_before_anything_renders(
    values: dict[str, Any], complaint: str
) -> None:
    with Chart.load(CHART) as chart:
        with pytest.raises(HelmValuesError, match=re.escape(complaint)):
            chart.validate_schema(values)
        with pytest.raises(HelmValuesError, match=re.escape(complaint)):
            chart.render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
