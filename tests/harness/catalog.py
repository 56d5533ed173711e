"""The translation catalog, checked and compiled by the test command.

`check` extracts every marked string (`makemessages`) into a throwaway copy of the tree, so the
checkout is not touched, and lists each msgid that has no Simplified Chinese translation (or
only a fuzzy one) in locale/zh_Hans/LC_MESSAGES/django.po. `compile` builds the .mo files that
Django reads (`compilemessages`); they are build output, never committed.

The .po reader is also what tests/test_zh_hans_pages.py uses to know the English msgids.
"""

import ast
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOCALE = "zh_Hans"
CATALOG = ROOT / "locale" / LOCALE / "LC_MESSAGES" / "django.po"
# What makemessages reads: the code and templates people see text from (not tests, deploy, var).
SOURCES = ("manage.py", "portal", "tenants", "templates", "locale")
# Set by the test command to the catalog it extracted, so the tests need not extract again.
EXTRACTED_ENV = "PORTAL_TEST_EXTRACTED_CATALOG"
# Directories compilemessages must not walk into (a local venv holds other projects' catalogs).
COMPILE_IGNORES = (".venv", "var", "node_modules", ".git")


@dataclass
class Entry:
    msgid: str = ""
    msgid_plural: str = ""
    msgctxt: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    flags: set[str] = field(default_factory=set)
    references: list[str] = field(default_factory=list)
    obsolete: bool = False

    @property
    def translated(self) -> bool:
        return (
            "fuzzy" not in self.flags
            and bool(self.msgstr)
            and all(text for text in self.msgstr.values())
        )


def read_po(path: Path) -> list[Entry]:
    """The entries of a .po file (the header, msgid "", left out)."""
    entries: list[Entry] = []
    entry = Entry()
    target: tuple[str, int] | None = None  # which string a continuation line extends

    def finish() -> None:
        nonlocal entry, target
        if entry.msgid and not entry.obsolete:
            entries.append(entry)
        entry, target = Entry(), None

    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line:
            finish()
            continue
        if line.startswith("#"):
            if entry.msgstr:
                finish()
            if line.startswith("#~"):
                entry.obsolete = True
            elif line.startswith("#,"):
                entry.flags.update(flag.strip() for flag in line[2:].split(","))
            elif line.startswith("#:"):
                entry.references.extend(line[2:].split())
            continue
        if line.startswith('"'):
            if target is not None:
                _append(entry, target, ast.literal_eval(line))
            continue
        keyword, _, rest = line.partition(" ")
        if keyword in ("msgctxt", "msgid") and entry.msgstr:
            finish()
        target = _start(entry, keyword, ast.literal_eval(rest))
    finish()
    return entries


def _start(entry: Entry, keyword: str, text: str) -> tuple[str, int]:
    """Set the string a keyword line starts; returns which one, for continuation lines."""
    if keyword.startswith("msgstr"):
        index = int(keyword[7:-1]) if keyword.startswith("msgstr[") else 0
        entry.msgstr[index] = text
        return ("msgstr", index)
    setattr(entry, keyword, text)
    return (keyword, 0)


def _append(entry: Entry, target: tuple[str, int], text: str) -> None:
    name, index = target
    if name == "msgstr":
        entry.msgstr[index] += text
    else:
        setattr(entry, name, (getattr(entry, name) or "") + text)


def extract(destination: Path, env: dict[str, str] | None = None) -> Path:
    """Run makemessages on a copy of the sources in `destination` (a scratch directory),
    merging into a copy of the committed catalog; returns the extracted .po file."""
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, destination / name, ignore=shutil.ignore_patterns("__pycache__", "*.mo")
            )
        elif source.is_file():
            shutil.copy2(source, destination / name)
    (destination / "locale").mkdir(exist_ok=True)
    command = [
        sys.executable, "manage.py", "makemessages", "-l", LOCALE, "--no-obsolete",
        "-i", "tests/*", "-i", "var/*", "-i", "deploy/*", "-i", ".venv/*",
    ]  # fmt: skip
    result = subprocess.run(
        command,
        cwd=destination,
        env={**(env or os.environ), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"makemessages failed:\n{result.stdout}{result.stderr}")
    return destination / "locale" / LOCALE / "LC_MESSAGES" / "django.po"


def untranslated(entries: list[Entry]) -> Iterator[Entry]:
    return (entry for entry in entries if not entry.translated)


def check(extracted: Path) -> int:
    """0 when every msgid of the extracted catalog has a Simplified Chinese translation;
    otherwise prints each one missing (with where it comes from) and returns 1."""
    missing = list(untranslated(read_po(extracted)))
    if not missing:
        print(f"==> translations: every string has a {LOCALE} translation", flush=True)
        return 0
    print(
        f"error: {len(missing)} marked strings have no {LOCALE} translation (or a fuzzy one) in "
        f"{CATALOG.relative_to(ROOT)}.\n"
        f"       Run: python manage.py makemessages -l {LOCALE} --no-obsolete -i 'tests/*' "
        "-i 'var/*' -i 'deploy/*'\n"
        "       then translate them (terms: locale/GLOSSARY.md) and remove the fuzzy flags.\n"
        "       While developing, `python -m tests.harness --no-i18n-check` skips this check.",
        file=sys.stderr,
        flush=True,
    )
    for entry in missing:
        where = entry.references[0] if entry.references else "?"
        state = " (fuzzy)" if "fuzzy" in entry.flags else ""
        print(f"  {where}: {entry.msgid!r}{state}", file=sys.stderr)
    return 1


def compile_catalogs(env: dict[str, str]) -> int:
    """compilemessages for the project's catalogs (locale/); a checkout without a .po compiles
    nothing."""
    ignores = [arg for name in COMPILE_IGNORES for arg in ("-i", name)]
    command = [sys.executable, "manage.py", "compilemessages", "-l", LOCALE, *ignores]
    print(f"==> compile translations: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


def extracted_catalog(scratch: Path) -> Path:
    """The extracted catalog: the test command's (EXTRACTED_ENV), or a fresh extraction."""
    given = os.environ.get(EXTRACTED_ENV)
    if given and Path(given).is_file():
        return Path(given)
    return extract(scratch)


def scratch_directory() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="portal-catalog-")
