"""Every page each persona reaches, asked for in Simplified Chinese (`Accept-Language: zh-Hans`),
shows no English text of the catalog: no msgid of a template string, message or choice label
appears as visible text (text outside scripts and styles, and the title, aria-label,
placeholder and alt attributes).

Data is not the catalog's: usernames (the walk's people are called "lead", "admin"…) and what
the page marks `translate="no"` (the audit log's record: field names, object names, as written)
are left out.

The msgids are the ones `makemessages` extracts now (the test command's extraction, or a fresh
one into a scratch copy), so a string marked today but not translated fails here; msgids whose
translation is themselves (product names and codes such as "GPU-eq") are left out. The pages
are the URL walk's (tests/test_url_walk.py): each GET route that answers the persona with an
HTML page, and the not-found page.
"""

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from portal.accounts.models import User
from tests.harness import catalog
from tests.test_url_walk import PERSONAS, ROUTES, walk_kwargs  # noqa: F401  (the walk's objects)

WALKED_PERSONAS = ("developer", "lead", "finance_user", "admin_user")
# Routes that never answer a page for people: the API, its schema, probes, metrics.
NOT_PAGES = ("api:", "api-", "healthz", "readyz", "metrics")
VISIBLE_ATTRIBUTES = frozenset({"title", "aria-label", "placeholder", "alt"})
VOID = frozenset(
    {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}
)
PLACEHOLDER = re.compile(r"%\(\w+\)[sdifr]|%[sdifr]|\{\w*\}")
TAG = re.compile(r"<[^>]+>")


class VisibleText(HTMLParser):
    """The text a person sees or hears: text nodes outside script and style, and the
    attributes screen readers and tooltips read."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.nodes: list[str] = []
        self._hidden_depth = 0
        self._open: list[tuple[str, bool]] = []  # open elements, and whether each is data

    @property
    def _in_data(self) -> bool:
        return any(data for _tag, data in self._open)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._hidden_depth += 1
        data = ("translate", "no") in attrs
        if tag not in VOID:
            self._open.append((tag, data))
        if data or self._in_data:
            return
        for name, value in attrs:
            if name in VISIBLE_ATTRIBUTES and value and value.strip():
                self.nodes.append(" ".join(value.split()))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._hidden_depth:
            self._hidden_depth -= 1
        # Close up to the matching open element (HTML lets some end tags be left out).
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index][0] == tag:
                del self._open[index:]
                break

    def handle_data(self, data: str) -> None:
        if not self._hidden_depth and not self._in_data and data.strip():
            self.nodes.append(" ".join(data.split()))


def visible_text(content: str) -> list[str]:
    parser = VisibleText()
    parser.feed(content)
    parser.close()
    return parser.nodes


@dataclass(frozen=True)
class English:
    """One msgid of the catalog and how to find it in a page's visible text."""

    msgid: str
    pattern: re.Pattern[str] | None  # several words: searched in the page's text
    word: str | None  # one word: must be a whole text node to count
    clue: str = ""  # a word the text must hold before the pattern is worth searching

    def found_in(self, nodes: list[str], joined: str) -> bool:
        if self.word is not None:
            return any(node.rstrip(":") == self.word for node in nodes)
        assert self.pattern is not None
        return self.clue in joined and self.pattern.search(joined) is not None


def english_of(msgid: str) -> English | None:
    """How `msgid` would look in a page, or None when it cannot tell English from Chinese
    (no letters beyond placeholders, only one letter, or one word beside placeholders)."""
    text = html.unescape(TAG.sub(" ", msgid)).replace("%%", "%")
    literals = [" ".join(part.split()) for part in PLACEHOLDER.split(text)]
    letters = re.sub(r"[^A-Za-z]", "", "".join(literals))
    if len(letters) < 2:
        return None
    if len(literals) == 1 and " " not in literals[0]:
        return English(msgid, None, literals[0])
    words = [word for word in " ".join(literals).split() if re.search(r"[A-Za-z]{2}", word)]
    if len(literals) > 1 and len(words) < 2:
        # "All %(currency)s", "%(name)s in %(tenant)s: %(role)s": one word beside values is found
        # in any text.
        return None
    # Placeholders at either end add nothing to look for.
    parts = [
        r"\s*".join(re.escape(word) for word in literal.split()) for literal in literals if literal
    ]
    # A placeholder stands for a value: bounded, so a search stays linear in the page's length.
    body = r".{0,200}?".join(part for part in parts)
    longest = max(literals, key=len).split()
    return English(msgid, re.compile(rf"(?<![A-Za-z]){body}(?![A-Za-z])"), None, longest[0])


@pytest.fixture(scope="session")
def catalog_english(tmp_path_factory: pytest.TempPathFactory) -> list[English]:
    extracted = catalog.extracted_catalog(Path(tmp_path_factory.mktemp("catalog")))
    found = []
    for entry in catalog.read_po(extracted):
        same = entry.msgstr.get(0) == entry.msgid and "fuzzy" not in entry.flags
        if same:
            continue  # the same in both languages on purpose: a name or a code
        for msgid in filter(None, (entry.msgid, entry.msgid_plural)):
            english = english_of(msgid)
            if english is not None:
                found.append(english)
    return found


def persona_pages(persona: str, kwargs: dict[str, dict[str, Any]]) -> list[str]:
    column = PERSONAS.index(persona)
    return [
        reverse(name, kwargs=kwargs[kwargs_name])
        for name, (method, kwargs_name, statuses) in ROUTES.items()
        if method == "get" and statuses[column] == 200 and not name.startswith(NOT_PAGES)
    ] + ["/no-such-page/"]


@pytest.mark.parametrize("persona", WALKED_PERSONAS)
def test_every_page_in_chinese_shows_no_english_text_of_the_catalog(
    request: pytest.FixtureRequest,
    persona: str,
    walk_kwargs: dict[str, dict[str, Any]],  # noqa: F811
    catalog_english: list[English],
) -> None:
    client = Client()
    client.force_login(request.getfixturevalue(persona))
    usernames = set(User.objects.values_list("username", flat=True))
    untranslated: dict[str, list[str]] = {}
    pages = 0
    for url in persona_pages(persona, walk_kwargs):
        response = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-Hans")
        if not response.headers.get("Content-Type", "").startswith("text/html"):
            continue
        pages += 1
        assert response.headers.get("Content-Language") == "zh-hans", url
        nodes = [node for node in visible_text(response.content.decode()) if node not in usernames]
        joined = " ".join(nodes)
        shown = sorted({e.msgid for e in catalog_english if e.found_in(nodes, joined)})
        if shown:
            untranslated[url] = shown
    assert pages > 3
    report = "\n".join(
        f"{url}: {', '.join(repr(msgid[:60]) for msgid in msgids)}"
        for url, msgids in untranslated.items()
    )
    assert untranslated == {}, f"English text in the Chinese pages of {persona}:\n{report}"


def test_the_finder_sees_text_and_readable_attributes_but_not_scripts() -> None:
    nodes = visible_text(
        '<p title="Close this month">Statements of <b>2026-11</b> so far</p>'
        '<script>var x = \'Save\';</script><input placeholder="Search" value="Save">'
    )
    joined = " ".join(nodes)

    assert nodes == ["Close this month", "Statements of", "2026-11", "so far", "Search"]
    statements = english_of("Statements of %(month)s so far")
    search = english_of("Search")
    save = english_of("Save")
    chinese = visible_text("<p>2026-11 的账单截至目前</p>")

    assert statements is not None
    assert search is not None
    assert save is not None
    assert statements.found_in(nodes, joined)
    assert search.found_in(nodes, joined)
    assert not save.found_in(nodes, joined)
    assert not statements.found_in(chinese, " ".join(chinese))
    assert english_of("%(count)s") is None
    assert english_of("%(role)s in %(tenant)s") is None
    assert english_of("<strong>%(username)s</strong> in %(tenant)s: %(role)s") is None


def test_the_finder_leaves_out_what_the_page_marks_as_data() -> None:
    nodes = visible_text(
        '<td><span translate="no">budget 5: 100 a month<br><b title="Save">Save</b></span>'
        " Saved</td><td>Save</td>"
    )

    assert nodes == ["Saved", "Save"]
