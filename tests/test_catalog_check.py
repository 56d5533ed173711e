"""The test command's translation check (tests/harness/catalog.py): which entries of a .po file
count as translated."""

from pathlib import Path

import pytest

from tests.harness import catalog

PO = r"""# header
#, fuzzy
msgid ""
msgstr ""
"Plural-Forms: nplurals=1; plural=0;\n"

#: templates/a.html:1
msgid "Tenant"
msgstr "租户"

#: templates/a.html:2
#, python-format
msgid ""
"A long message about %(tenant)s "
"on two lines."
msgstr ""
"关于 %(tenant)s 的"
"一条长消息。"

#: templates/a.html:3
msgid "Untranslated"
msgstr ""

#: templates/a.html:4
#, fuzzy, python-format
msgid "Guessed %(x)s"
msgstr "猜测 %(x)s"

#: portal/b.py:5
#, python-format
msgid "%(n)d statement"
msgid_plural "%(n)d statements"
msgstr[0] "%(n)d 张账单"

#: templates/c.html:6
msgctxt "month"
msgid "open"
msgstr "未结账"

#~ msgid "Gone"
#~ msgstr "已删除"
"""


@pytest.fixture
def po(tmp_path: Path) -> Path:
    path = tmp_path / "django.po"
    path.write_text(PO, encoding="utf-8")
    return path


def test_the_reader_sees_every_entry_but_the_header_and_obsolete_ones(po: Path) -> None:
    entries = {entry.msgid: entry for entry in catalog.read_po(po)}

    assert list(entries) == [
        "Tenant",
        "A long message about %(tenant)s on two lines.",
        "Untranslated",
        "Guessed %(x)s",
        "%(n)d statement",
        "open",
    ]
    assert entries["A long message about %(tenant)s on two lines."].msgstr == {
        0: "关于 %(tenant)s 的一条长消息。"
    }
    assert entries["%(n)d statement"].msgid_plural == "%(n)d statements"
    assert entries["open"].msgctxt == "month"
    assert entries["Tenant"].references == ["templates/a.html:1"]


def test_untranslated_and_fuzzy_entries_fail_the_check_by_name(
    po: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = [entry.msgid for entry in catalog.untranslated(catalog.read_po(po))]

    assert missing == ["Untranslated", "Guessed %(x)s"]
    assert catalog.check(po) == 1
    err = capsys.readouterr().err
    assert "2 marked strings have no zh_Hans translation" in err
    assert "templates/a.html:3: 'Untranslated'" in err
    assert "templates/a.html:4: 'Guessed %(x)s' (fuzzy)" in err


def test_a_complete_catalog_passes(tmp_path: Path) -> None:
    path = tmp_path / "django.po"
    path.write_text('msgid ""\nmsgstr ""\n\nmsgid "Save"\nmsgstr "保存"\n', encoding="utf-8")

    assert catalog.check(path) == 0
