"""Reading a page as a browser shows it once htmx has loaded its sections (a tenant's page)."""

import re

from django.test import Client

# A placeholder htmx replaces once the page has loaded (`hx-trigger="load"`, outerHTML): the
# section element with its `hx-get`, up to its end.
_LOADED = re.compile(
    r'<section\b[^>]*\bhx-get="(?P<url>[^"]+)"[^>]*\bhx-trigger="load"[^>]*>.*?</section>',
    re.DOTALL,
)


def page_loaded(client: Client, url: str) -> str:
    """The page at `url` with each section it loads on its own in its place, fetched as htmx
    fetches it (each must answer 200)."""
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    page: str = response.content.decode()

    def loaded(match: re.Match[str]) -> str:
        section = client.get(match["url"].replace("&amp;", "&"), HTTP_HX_REQUEST="true")
        assert section.status_code == 200, (match["url"], section.status_code)
        return section.content.decode()

    return _LOADED.sub(loaded, page)
