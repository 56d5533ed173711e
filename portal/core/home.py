"""Each persona's home: panels declared by the apps that own their data.

An app registers its panels in its `AppConfig.ready()` with `home_register`: the personas that
see a panel, where it stands, its template (a fragment that renders inside the panel's card) and
a function giving the context it needs for one user. Core knows no domain app: it orders the
panels and renders them. A panel's function reads through its app's selectors and must run a
bounded number of queries whatever the data size (the home page's tests hold each persona's
home to one bound on small and large data).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from portal.core.navigation import PERSONAS
from portal.core.registry import Registry

if TYPE_CHECKING:
    from django.http import HttpRequest

    from portal.accounts.models import User

# How many rows (and tenants) a panel shows at most; the panel links to the full page.
HOME_ROWS = 5
# How many of the tenants a lead leads their panels read (once, `tenants_led_first`): a panel's
# HOME_ROWS and one to tell there are more, or the HOME_ROWS without a budget beside up to
# HOME_ROWS with one.
HOME_LED_TENANTS = 2 * HOME_ROWS + 1


@dataclass(frozen=True)
class HomePanel:
    name: str
    personas: frozenset[str]
    position: int
    template: str
    context: Callable[["User"], dict[str, Any]]


home_panels: Registry[str, HomePanel] = Registry("home panel")


def home_register(
    name: str,
    personas: set[str],
    *,
    position: int,
    template: str,
    context: Callable[["User"], dict[str, Any]],
) -> None:
    """Show `template` on the home of each of `personas`, ordered by `position` across apps."""
    unknown = personas - set(PERSONAS)
    if unknown:
        raise ValueError(f"Unknown personas for home panel {name}: {sorted(unknown)}")
    home_panels.register(name, HomePanel(name, frozenset(personas), position, template, context))


def panels_for(persona: str) -> list[HomePanel]:
    return sorted(
        (panel for panel in home_panels.values() if persona in panel.personas),
        key=lambda panel: (panel.position, panel.name),
    )


@dataclass(frozen=True)
class RenderedPanel:
    name: str
    html: SafeString


def home_panels_render(request: "HttpRequest", user: "User", persona: str) -> list[RenderedPanel]:
    """The persona's panels, in order, each rendered with its own context only."""
    return [
        RenderedPanel(
            panel.name,
            SafeString(render_to_string(panel.template, panel.context(user), request)),
        )
        for panel in panels_for(persona)
    ]


def prefill(query: QueryDict, fields: Mapping[str, object]) -> dict[str, str]:
    """A form's initial values from a link's query (e.g. "launch again"): only the form's own
    fields, as text; the form still validates what is posted."""
    values = {name: query.get(name) for name in fields}
    return {name: value for name, value in values.items() if isinstance(value, str) and value}
