"""The local stack (deploy/compose/compose.yaml) without a container engine: it parses, every
image is pinned, every long-running service has a health check, the start-up order holds, and
the portal's environment is the one its settings read and agrees with the other services."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = ROOT / "deploy" / "compose"
PORTAL_SERVICES = ("migrate", "web", "worker", "beat")
REALM_EXPORT = ROOT / "deploy" / "keycloak" / "realm-export.json"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((COMPOSE_DIR / "compose.yaml").read_text())
    return loaded


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def is_one_shot(service: dict[str, Any]) -> bool:
    return service.get("restart") == "no"


def test_the_stack_has_every_part_of_the_portal(services):
    assert set(services) == {
        "postgres",
        "redis",
        "keycloak",
        "keycloak-setup",
        "prometheus",
        "migrate",
        "web",
        "worker",
        "beat",
    }


def test_every_image_is_pinned_to_an_exact_tag(services):
    for name, service in services.items():
        image = service["image"]
        reference = image.split("@", 1)[0]
        tag = reference.rsplit(":", 1)[1] if ":" in reference.rsplit("/", 1)[-1] else None
        assert tag or "@sha256:" in image, f"{name}: {image} names no tag or digest"
        assert tag != "latest", f"{name}: {image}"
        if tag and "build" not in service:
            # Published images: a release (PostgreSQL's are major.minor), not a moving major tag.
            assert re.match(r"v?\d+\.\d+(\.\d+)?(-|$)", tag), f"{name}: {image} is not exact"


def test_the_portal_services_run_one_image_built_from_the_repository(services):
    images = {services[name]["image"] for name in PORTAL_SERVICES}
    assert images == {"gpu-portal:local"}
    for name in PORTAL_SERVICES:
        context = (COMPOSE_DIR / services[name]["build"]["context"]).resolve()
        assert context == ROOT
        assert (context / "Dockerfile").is_file()


def test_long_running_services_have_health_checks_and_one_shots_do_not_restart(services):
    one_shots = {name for name, service in services.items() if is_one_shot(service)}
    assert one_shots == {"keycloak-setup", "migrate"}
    for name, service in services.items():
        if is_one_shot(service):
            continue
        assert service["restart"] == "unless-stopped", name
        check = service["healthcheck"]
        assert check["test"][0] in {"CMD", "CMD-SHELL"}, name
        assert len(check["test"]) > 1, name
        assert {"interval", "timeout", "retries"} <= set(check), name


def test_start_up_waits_on_conditions_the_services_can_meet(services):
    waited_for = set()
    for name, service in services.items():
        for target, dependency in service.get("depends_on", {}).items():
            assert target in services, f"{name} depends on {target}, which is not a service"
            condition = dependency["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}'s health"
            else:
                assert condition == "service_completed_successfully", (name, condition)
                assert is_one_shot(services[target]), f"{name} waits for {target} to finish"
            waited_for.add(target)
    # Each one-shot is waited for, so a failed migration or realm set-up stops the portal.
    assert {"migrate", "keycloak-setup"} <= waited_for
    for name in ("web", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_web_worker_and_beat_run_the_documented_commands(services):
    assert "command" not in services["web"], "the image's default command: gunicorn"
    assert services["worker"]["command"][:4] == ["celery", "-A", "portal", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "portal", "beat"]
    # Beat's schedule file is where its (non-root) user may write, and what its check reads.
    schedule = services["beat"]["command"][services["beat"]["command"].index("--schedule") + 1]
    assert schedule.startswith("/tmp/")  # noqa: S108  (a path in the container, not used here)
    assert schedule in services["beat"]["healthcheck"]["test"][-1]
    assert "migrate --noinput" in services["migrate"]["command"][-1]
    assert "/readyz" in services["web"]["healthcheck"]["test"][-1]


def test_published_ports_are_on_the_loopback_interface_only(services):
    published = {
        name: port for name, service in services.items() for port in service.get("ports", [])
    }
    assert published
    for name, port in published.items():
        assert port.startswith("127.0.0.1:"), (name, port)


def test_bind_mounts_name_files_in_the_repository(services):
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if not source.startswith("."):
                continue  # a named volume
            path = (COMPOSE_DIR / source).resolve()
            assert path.is_relative_to(ROOT / "deploy"), (name, volume)
            assert path.exists(), f"{name} mounts {source}, which does not exist"


def settings_names() -> set[str]:
    """Every environment variable portal/settings.py reads, with the *_FILE form of secrets."""
    source = (ROOT / "portal" / "settings.py").read_text()
    names = set(re.findall(r"env\.\w+\(\s*\"([A-Z][A-Z0-9_]*)\"", source))
    secrets = re.findall(r"env\.secret\(\s*\"([A-Z][A-Z0-9_]*)\"", source)
    return names | {f"{name}_FILE" for name in secrets}


def test_the_portal_environment_is_spelled_as_the_settings_read_it(services):
    names = settings_names()
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "OIDC_ISSUER_URL"} <= names
    for name in PORTAL_SERVICES:
        environment = services[name]["environment"]
        unknown = set(environment) - names
        assert not unknown, f"{name}: the settings read no {sorted(unknown)}"


# Loads the settings with the stack's environment in a fresh process, as the image does.
PROBE = """
import json, django
django.setup()
from django.conf import settings
database = settings.DATABASES["default"]
print(json.dumps({
    "database": [database["ENGINE"], database["HOST"], database["PORT"], database["NAME"],
                 database["USER"], database["PASSWORD"]],
    "broker": settings.CELERY_BROKER_URL,
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "sso": settings.SSO_ENABLED,
    "keycloak": [settings.KEYCLOAK_SERVER_URL, settings.KEYCLOAK_REALM, settings.KEYCLOAK_SYNC],
    "clients": [settings.OIDC_CLIENT_ID, settings.KEYCLOAK_ADMIN_CLIENT_ID],
    "base_url": settings.PORTAL_BASE_URL,
    "prometheus": settings.PROMETHEUS_URL,
    "secure_cookies": settings.SESSION_COOKIE_SECURE,
    "debug": settings.DEBUG,
}))
"""


def test_the_portal_environment_configures_the_stack_it_runs_in(services):
    environment = services["web"]["environment"]
    for name in PORTAL_SERVICES:
        # migrate connects as the owner role (test_migrate_connects_as_the_owner_…, below).
        differs = {"DATABASE_URL", "PORTAL_DATABASE_RUNTIME_ROLE"} if name == "migrate" else set()
        own = services[name]["environment"]
        assert {k: v for k, v in own.items() if k not in differs} == {
            k: v for k, v in environment.items() if k not in differs
        }, name
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "DJANGO_SETTINGS_MODULE": "portal.settings"} | environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])

    postgres = services["postgres"]["environment"]
    # The runtime role the initialisation script makes, not the owner.
    assert found["database"] == [
        "django.db.backends.postgresql",
        "postgres",
        5432,
        postgres["POSTGRES_DB"],
        "portal_app",
        "portal-app-local-only",
    ]
    assert urlsplit(found["broker"]).hostname == "redis"
    assert found["eager"] is False
    assert found["debug"] is False
    # Plain HTTP on localhost: Secure cookies would never be sent back.
    assert found["secure_cookies"] is False
    assert urlsplit(found["prometheus"]).hostname == "prometheus"

    realm = json.loads(REALM_EXPORT.read_text())
    keycloak = services["keycloak"]
    server, realm_name, sync = found["keycloak"]
    assert found["sso"] is True
    assert sync is True
    assert realm_name == realm["realm"]
    # One address for the browser and the portal: Keycloak's own name for itself, reachable
    # in the compose network under the same host name.
    assert server == keycloak["environment"]["KC_HOSTNAME"]
    assert urlsplit(server).hostname in keycloak["networks"]["default"]["aliases"]
    assert urlsplit(server).hostname.endswith(".localhost")
    assert f"{urlsplit(server).port}:{urlsplit(server).port}" in keycloak["ports"][0]
    client_ids = {client["clientId"] for client in realm["clients"]}
    assert set(found["clients"]) <= client_ids


def test_the_realm_set_up_gives_keycloak_what_the_portal_was_given(services):
    portal = services["web"]["environment"]
    setup = services["keycloak-setup"]["environment"]
    assert setup["OIDC_CLIENT_SECRET"] == portal["OIDC_CLIENT_SECRET"]
    assert setup["KEYCLOAK_ADMIN_CLIENT_SECRET"] == portal["KEYCLOAK_ADMIN_CLIENT_SECRET"]
    assert setup["PORTAL_URL"] == portal["PORTAL_BASE_URL"]
    assert setup["KEYCLOAK_URL"] == services["keycloak"]["environment"]["KC_HOSTNAME"]
    assert (
        setup["KEYCLOAK_ADMIN_PASSWORD"]
        == (services["keycloak"]["environment"]["KC_BOOTSTRAP_ADMIN_PASSWORD"])
    )
    [mount] = services["keycloak-setup"]["volumes"]
    script = (COMPOSE_DIR / mount.split(":")[0]).read_text()
    assert mount.split(":")[1] in services["keycloak-setup"]["entrypoint"]
    # The script sets the callback the portal's OIDC client sends.
    assert '"$PORTAL_URL/accounts/oidc/callback/"' in script
    for variable in setup:
        assert f"${variable}" in script or f"${{{variable}}}" in script, variable
    [realm_mount] = services["keycloak"]["volumes"]
    assert (COMPOSE_DIR / realm_mount.split(":")[0]).resolve() == REALM_EXPORT
    assert realm_mount.split(":")[1].startswith("/opt/keycloak/data/import/")
    assert "--import-realm" in services["keycloak"]["command"]


def test_migrate_connects_as_the_owner_and_the_portal_as_the_runtime_role_postgres_makes(
    services,
):
    postgres = services["postgres"]
    migrate = urlsplit(services["migrate"]["environment"]["DATABASE_URL"])
    runtime = urlsplit(services["web"]["environment"]["DATABASE_URL"])
    [init] = [v for v in postgres["volumes"] if "/docker-entrypoint-initdb.d/" in v]
    script = (COMPOSE_DIR / init.split(":")[0]).read_text()

    # The image's POSTGRES_USER owns the database and so the tables migrate makes.
    assert (migrate.username, migrate.password) == (
        postgres["environment"]["POSTGRES_USER"],
        postgres["environment"]["POSTGRES_PASSWORD"],
    )
    assert runtime.username != migrate.username
    assert services["migrate"]["environment"]["PORTAL_DATABASE_RUNTIME_ROLE"] == runtime.username
    assert f"CREATE ROLE {runtime.username} LOGIN PASSWORD '{runtime.password}'" in script
    assert f"GRANT CONNECT ON DATABASE {runtime.path.lstrip('/')} TO {runtime.username}" in script
    assert init.endswith(":ro")
