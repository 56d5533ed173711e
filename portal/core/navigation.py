"""The main navigation and each persona's start page, declared by the apps that own the pages.

Each app registers its entries in its `AppConfig.ready()`; the tenants app, which knows who leads
what, registers how a user's persona is found and the start page of each persona.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.urls import reverse

from portal.core.registry import Registry, Slot

if TYPE_CHECKING:
    from portal.accounts.models import User

PERSONAS = ("developer", "lead", "finance", "admin")


@dataclass(frozen=True)
class NavEntry:
    """A link in the main navigation for some personas; `position` orders entries across apps.
    The pages still check access themselves."""

    label: str
    url_name: str
    personas: frozenset[str]
    position: int


entries: Registry[str, NavEntry] = Registry("navigation entry")
start_pages: Registry[str, str] = Registry("start page")
persona_resolver: Slot[Callable[["User"], str]] = Slot(
    "persona resolver", filled_by="the tenants app"
)


def nav_register(label: str, url_name: str, personas: set[str], *, position: int) -> None:
    unknown = personas - set(PERSONAS)
    if unknown:
        raise ValueError(f"Unknown personas for {url_name}: {sorted(unknown)}")
    entries.register(url_name, NavEntry(label, url_name, frozenset(personas), position))


def persona_of(user: "User") -> str:
    """The user's main persona: the first of admin, finance, lead, developer that they are."""
    return persona_resolver.get()(user)


def navigation_for(persona: str) -> list[NavEntry]:
    return sorted(
        (entry for entry in entries.values() if persona in entry.personas),
        key=lambda entry: entry.position,
    )


def start_url_for(user: "User") -> str:
    return reverse(start_pages.get(persona_of(user)))
