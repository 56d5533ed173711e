"""The main navigation and each persona's start page, declared by the apps that own the pages.

Each app registers its entries in its `AppConfig.ready()`; the tenants app, which knows who leads
what, registers how a user's persona is found and the start page of each persona. An entry may
carry a count (e.g. pending approvals) that the navigation shows beside its label: the app that
owns the entry registers the function that counts, one bounded query per counted entry.
"""

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING

from django.conf import settings
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from portal.core.registry import Registry, Slot

if TYPE_CHECKING:
    from portal.accounts.models import User

PERSONAS = ("developer", "lead", "finance", "admin")
PERSONA_LABELS: dict[str, Promise] = {
    "developer": _("developer"),
    "lead": _("lead"),
    "finance": _("finance"),
    "admin": _("admin"),
}

# The navigation's groups, in the order shown. Generic words: every app files its entries in one.
GROUPS: dict[str, Promise] = {
    "work": _("Work"),
    "team": _("Team"),
    "money": _("Money"),
    "admin": _("Admin"),
    "records": _("Records"),
}

type Counter = Callable[["User"], int]


@dataclass(frozen=True)
class NavEntry:
    """A link in the main navigation for some personas; `position` orders entries across apps
    within their group. The pages still check access themselves."""

    label: str | Promise
    url_name: str
    personas: frozenset[str]
    position: int
    group: str = "work"
    count: Counter | None = field(default=None, compare=False)


entries: Registry[str, NavEntry] = Registry("navigation entry")
start_pages: Registry[str, str] = Registry("start page")
persona_resolver: Slot[Callable[["User"], str]] = Slot(
    "persona resolver", filled_by="the tenants app"
)


def nav_register(
    label: str | Promise,
    url_name: str,
    personas: set[str],
    *,
    position: int,
    group: str = "work",
    count: Counter | None = None,
) -> None:
    """Add a navigation entry. `count(user)`, if given, is shown beside the label when above
    zero (one bounded query: it runs on every full page for the personas that see the entry)."""
    unknown = personas - set(PERSONAS)
    if unknown:
        raise ValueError(f"Unknown personas for {url_name}: {sorted(unknown)}")
    if group not in GROUPS:
        raise ValueError(f"Unknown navigation group for {url_name}: {group!r}")
    entries.register(
        url_name, NavEntry(label, url_name, frozenset(personas), position, group, count)
    )


def persona_of(user: "User") -> str:
    """The user's main persona: the first of admin, finance, lead, developer that they are."""
    return persona_resolver.get()(user)


def navigation_for(persona: str) -> list[NavEntry]:
    """The persona's entries, group by group (in GROUPS order), by position within a group."""
    order = list(GROUPS)
    return sorted(
        (entry for entry in entries.values() if persona in entry.personas),
        key=lambda entry: (order.index(entry.group), entry.position),
    )


def start_url_for(user: "User") -> str:
    return reverse(start_pages.get(persona_of(user)))


@dataclass(frozen=True)
class NavLink:
    label: str | Promise
    url: str
    current: bool
    count: int


@dataclass(frozen=True)
class NavGroup:
    key: str
    label: str | Promise
    links: list[NavLink]

    @property
    def current(self) -> bool:
        return any(link.current for link in self.links)

    @property
    def count(self) -> int:
        return sum(link.count for link in self.links)


# Above this many entries the wide navigation shows each group as a menu, so it fits one line.
FLAT_LIMIT = 8


class Navigation:
    """What the page header shows for one signed-in user, worked out only when a template reads
    it: htmx fragments never pay for the persona or the counts."""

    def __init__(self, user: "User", path: str) -> None:
        self.user = user
        self.path = path

    @cached_property
    def persona(self) -> str:
        return persona_of(self.user)

    @property
    def persona_label(self) -> str | Promise:
        return PERSONA_LABELS.get(self.persona, self.persona)

    @cached_property
    def entries(self) -> list[NavEntry]:
        return navigation_for(self.persona)

    @cached_property
    def counts(self) -> dict[str, int]:
        """Each counted entry's count (one bounded query each), by URL name."""
        return {
            entry.url_name: entry.count(self.user)
            for entry in self.entries
            if entry.count is not None
        }

    @cached_property
    def urls(self) -> Mapping[str, str]:
        """Each entry's URL, by URL name."""
        names = tuple(entry.url_name for entry in self.entries)
        return _reversed(names, get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF)

    @cached_property
    def key(self) -> str:
        """All that the rendered links depend on besides the language: the persona (its
        entries), the current link (the entry whose URL is the path, if any) and the counts.
        The header keeps their HTML by it (`base.html`'s `{% cache %}`), so a page builds its
        navigation once per process, not on every request; every page that is no entry's
        (an object's page, a 404) shares one."""
        current = next((name for name, url in self.urls.items() if url == self.path), "")
        counted = ",".join(str(count) for count in self.counts.values())
        return f"{self.persona}|{counted}|{current}"

    @cached_property
    def groups(self) -> list[NavGroup]:
        grouped: dict[str, list[NavLink]] = {}
        for entry in self.entries:
            url = self.urls[entry.url_name]
            count = self.counts.get(entry.url_name, 0)
            grouped.setdefault(entry.group, []).append(
                NavLink(entry.label, url, self.path == url, count)
            )
        return [NavGroup(key, GROUPS[key], links) for key, links in grouped.items()]

    @cached_property
    def menus(self) -> bool:
        """Whether the wide navigation shows its groups as menus (too many links for a line)."""
        return sum(len(group.links) for group in self.groups) > FLAT_LIMIT


@functools.lru_cache(maxsize=64)
def _reversed(names: tuple[str, ...], _prefix: str, _urlconf: object) -> Mapping[str, str]:
    """The URLs of `names`, kept for the process by the script prefix and URL configuration
    they are reversed with (some ten `reverse` calls on every page otherwise); read-only."""
    return MappingProxyType({name: reverse(name) for name in names})
