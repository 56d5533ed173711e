"""Each persona's home: panels declared by the apps that own their data.

An app registers its panels in its `AppConfig.ready()` with `home_register`: the personas that
see a panel, where it stands, its title, its template (a fragment that renders inside the
panel's card) and a function giving the context it needs for one user. Core knows no domain
app: it orders the panels and renders them. A panel's function reads through its app's
selectors and must run a bounded number of queries whatever the data size (the home page's
tests hold each panel to one bound on small and large data).

The Home page itself holds each panel's title and a link to it; htmx then loads every panel
on its own (`home/panels/<name>/`), so the page shows at once, a slow panel holds up no other,
and one that fails leaves the rest. Without JavaScript the link opens the panel on a page of
its own.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils.functional import Promise
from django.utils.safestring import SafeString

from portal.core.navigation import PERSONAS
from portal.core.registry import Registry

if TYPE_CHECKING:
    from django.http import HttpRequest

    from portal.accounts.models import User

# How many rows (and tenants) a panel shows at most; the panel links to the full page.
HOME_ROWS = 5
# How many of the tenants a lead leads their panels read (`tenants_led_first`, at most once a
# request): a panel's HOME_ROWS and one to tell there are more, or the HOME_ROWS without a
# budget beside up to HOME_ROWS with one.
HOME_LED_TENANTS = 2 * HOME_ROWS + 1


@dataclass(frozen=True)
class HomePanel:
    name: str
    personas: frozenset[str]
    position: int
    title: str | Promise
    template: str
    context: Callable[["User"], dict[str, Any]]


home_panels: Registry[str, HomePanel] = Registry("home panel")


def home_register(
    name: str,
    personas: set[str],
    *,
    position: int,
    title: str | Promise,
    template: str,
    context: Callable[["User"], dict[str, Any]],
) -> None:
    """Show `template` on the home of each of `personas`, ordered by `position` across apps;
    `title` stands for it until it is loaded (its template's own heading replaces it)."""
    unknown = personas - set(PERSONAS)
    if unknown:
        raise ValueError(f"Unknown personas for home panel {name}: {sorted(unknown)}")
    home_panels.register(
        name, HomePanel(name, frozenset(personas), position, title, template, context)
    )


def panels_for(persona: str) -> list[HomePanel]:
    return sorted(
        (panel for panel in home_panels.values() if persona in panel.personas),
        key=lambda panel: (panel.position, panel.name),
    )


def panel_for(persona: str, name: str) -> HomePanel | None:
    """The panel `name` when the persona's Home shows it, else None (the same answer for a
    panel that does not exist and for another persona's)."""
    if name not in home_panels:
        return None
    panel = home_panels.get(name)
    return panel if persona in panel.personas else None


@dataclass(frozen=True)
class RenderedPanel:
    name: str
    html: SafeString


def home_panel_render(request: "HttpRequest", user: "User", panel: HomePanel) -> RenderedPanel:
    """One panel rendered for `user` with its own context only."""
    html = render_to_string(panel.template, panel.context(user), request)
    return RenderedPanel(panel.name, SafeString(html))


def prefill(query: QueryDict, fields: Mapping[str, object]) -> dict[str, str]:
    """A form's initial values from a link's query (e.g. "launch again"): only the form's own
    fields, as text; the form still validates what is posted."""
    values = {name: query.get(name) for name in fields}
    return {name: value for name, value in values.items() if isinstance(value, str) and value}
