"""The container image's Dockerfile: hadolint finds nothing, it follows the image policy, and
the tree it copies (through .dockerignore) runs the portal without the checkout.

No image is built here (no container engine in the tests): the build context is reproduced
from the Dockerfile's COPY instructions and .dockerignore, and the portal is started from it.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pytest
from django.db.migrations.loader import MigrationLoader
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
NON_ROOT_UID = 10001


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arguments for word, arguments in self.instructions if word == keyword]


def dockerfile_stages(text: str) -> list[Stage]:
    """The Dockerfile's stages, each with its instructions (continuation lines joined)."""
    logical = re.sub(r"\\\n", " ", text)
    stages: list[Stage] = []
    for line in logical.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        keyword, _, arguments = stripped.partition(" ")
        keyword = keyword.upper()
        arguments = " ".join(arguments.split())
        if keyword == "FROM":
            base, _, name = arguments.partition(" AS ")
            stages.append(Stage(base=base, name=name or None))
        else:
            stages[-1].instructions.append((keyword, arguments))
    return stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return dockerfile_stages(DOCKERFILE.read_text())


def test_hadolint_finds_nothing_at_its_default_threshold():
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run(
        [str(hadolint), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_the_build_is_multi_stage_from_one_base_pinned_by_tag_and_digest(stages):
    assert [stage.name for stage in stages] == ["builder", "runtime"]
    bases = {stage.base for stage in stages}
    assert len(bases) == 1, "the venv built in one stage runs on the other's Python"
    [base] = bases
    assert re.fullmatch(r"python:3\.1[2-9]\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}", base), (
        f"{base} is not pinned by an exact tag and a digest"
    )
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = re.match(r"python:(\d+\.\d+\.\d+)", base)
    assert version
    assert SpecifierSet(required).contains(version[1]), f"{base} does not satisfy {required}"


def test_dependencies_install_at_the_versions_of_constraints_txt(stages):
    builder, runtime = stages
    installs = [run for run in builder.all("RUN") if "pip install" in run]
    assert len(installs) == 1
    assert "-c constraints.txt" in installs[0]
    # Only the runtime dependencies: no dev extras, no editable install of the checkout.
    assert "-e " not in installs[0]
    assert "[dev]" not in installs[0]
    assert "project']['dependencies']" in " ".join(builder.all("RUN"))
    assert "--from=builder /opt/venv /opt/venv" in runtime.all("COPY")
    assert not [run for run in runtime.all("RUN") if "pip install" in run]


def test_the_runtime_runs_as_a_numeric_non_root_user(stages):
    runtime = stages[-1]
    user = runtime.all("USER")
    assert user == [f"{NON_ROOT_UID}:{NON_ROOT_UID}"]
    # USER comes after every RUN: nothing of the runtime's set-up runs as that user, and the
    # user cannot write the code or the collected static files.
    words = [word for word, _ in runtime.instructions]
    assert words.index("USER") > max(i for i, word in enumerate(words) if word == "RUN")


def test_static_files_are_collected_at_build_time_and_the_web_process_is_gunicorn(stages):
    runtime = stages[-1]
    [collect] = [run for run in runtime.all("RUN") if "collectstatic" in run]
    assert "manage.py collectstatic --noinput" in collect
    assert runtime.all("CMD") == ['["gunicorn", "--config", "deploy/gunicorn_production.py"]']
    assert runtime.all("EXPOSE") == ["8000"]
    assert runtime.all("WORKDIR") == ["/app"]
    conf = (ROOT / "deploy" / "gunicorn_production.py").read_text()
    assert 'bind = ["0.0.0.0:8000"]' in conf
    assert 'wsgi_app = "portal.wsgi:application"' in conf


def dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as (excludes, regex) pairs, in Docker's order: the last match decides."""
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        include = text.startswith("!")
        glob = str(PurePosixPath(text.removeprefix("!").strip("/")))
        regex = ""
        i = 0
        while i < len(glob):
            if glob.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif glob.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif glob[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif glob[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(glob[i]), i + 1
        patterns.append((not include, re.compile(regex)))
    return patterns


def in_build_context(relative: PurePosixPath, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Docker's rule: a pattern that matches a path or one of its parents decides, last wins."""
    candidates = [str(relative), *(str(parent) for parent in relative.parents if parent.parts)]
    excluded = False
    for excludes, pattern in patterns:
        if any(pattern.fullmatch(candidate) for candidate in candidates):
            excluded = excludes
    return not excluded


def runtime_tree(stages: list[Stage], destination: Path) -> None:
    """Lay out what the runtime stage's COPY instructions put under its WORKDIR."""
    runtime = stages[-1]
    patterns = dockerignore_patterns()
    for arguments in runtime.all("COPY"):
        if arguments.startswith("--from="):
            continue
        *sources, target = arguments.split()
        target_dir = destination / target.removeprefix("./")
        for source in sources:
            path = ROOT / source
            files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
            for file in files:
                relative = PurePosixPath(file.relative_to(ROOT).as_posix())
                if not in_build_context(relative, patterns):
                    continue
                if path.is_file():
                    copied = target_dir / path.name if target.endswith("/") else target_dir
                else:
                    copied = target_dir / file.relative_to(path)
                copied.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(file, copied)


def checkout_files(folder: str) -> set[str]:
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


# Run inside the copied tree, as the image runs it: cwd /app, PYTHONPATH /app, no checkout.
PROBE = """
import json, django
django.setup()
import portal
from django.conf import settings
from django.core.management import call_command
from django.db.migrations.loader import MigrationLoader
from django.template.loader import get_template
from portal.catalog.presets import BACKENDS
call_command("collectstatic", "--noinput", verbosity=0)
print(json.dumps({
    "package": portal.__file__,
    "template": str(get_template("base.html").origin.name),
    "migrations": sorted(f"{app}.{name}" for app, name in MigrationLoader(None).disk_migrations),
    "presets": len(BACKENDS),
    "collected": sorted(
        p.relative_to(settings.STATIC_ROOT).as_posix()
        for p in settings.STATIC_ROOT.rglob("*") if p.is_file() and p.suffix != ".gz"
    ),
}))
"""


def test_the_copied_tree_runs_the_portal_without_the_checkout(stages, tmp_path):
    app = tmp_path / "app"
    runtime_tree(stages, app)

    # Everything the portal reads beside its code is in the tree, nothing of the tests is.
    for folder in ("templates", "static", "portal", "tenants"):
        assert checkout_files(folder) <= {
            p.relative_to(app).as_posix() for p in (app / folder).rglob("*") if p.is_file()
        }, folder
    assert (app / "manage.py").is_file()
    assert (app / "deploy" / "gunicorn_production.py").is_file()
    assert not (app / "tests").exists()
    assert not (app / "README.md").exists()

    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(app),
        "DJANGO_SETTINGS_MODULE": "portal.settings",
        "SECRET_KEY": "collectstatic-at-build-time-only",
        "STATIC_ROOT": str(tmp_path / "staticfiles"),
    }
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])

    assert Path(found["package"]).is_relative_to(app)
    assert Path(found["template"]) == app / "templates" / "base.html"
    expected = sorted(f"{app_}.{name}" for app_, name in MigrationLoader(None).disk_migrations)
    assert found["migrations"] == expected
    assert len(expected) > 10
    assert found["presets"] > 0
    own_static = {path.removeprefix("static/") for path in checkout_files("static")}
    assert own_static <= set(found["collected"])
    assert "admin/css/base.css" in found["collected"]
