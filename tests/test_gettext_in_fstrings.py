"""A string marked for translation inside an f-string's braces is invisible to xgettext
(makemessages reads no call there): it would stay English on a Chinese page with no
translation check noticing. Each such call must stand outside the f-string."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRANSLATING = {"_", "gettext", "gettext_lazy", "ngettext", "pgettext", "npgettext"}


def hidden_marks(source: str) -> list[int]:
    """The lines of translation calls with a literal message inside an f-string of `source`."""
    return [
        inner.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.JoinedStr)
        for inner in ast.walk(node)
        if isinstance(inner, ast.Call)
        and isinstance(inner.func, ast.Name)
        and inner.func.id in TRANSLATING
        and any(isinstance(arg, ast.Constant) for arg in inner.args)
    ]


def test_the_check_finds_a_mark_in_an_f_string() -> None:
    assert hidden_marks("x = f\"<b>{_('Hidden')}</b>\"") == [1]
    assert hidden_marks("shown = _('Seen')\nx = f'<b>{shown}</b>{_(comment)}'") == []


def test_no_translated_string_hides_in_an_f_string() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for top in ("portal", "tenants")
        for path in sorted((ROOT / top).rglob("*.py"))
        for line in hidden_marks(path.read_text(encoding="utf-8"))
    ]
    assert found == []
