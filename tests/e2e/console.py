"""What a browser test watches for: console errors, Content-Security-Policy violations and
uncaught exceptions on a page."""

from playwright.sync_api import ConsoleMessage, Page


def console_problems(page: Page) -> list[str]:
    """A list that fills with the page's console errors, CSP reports and uncaught errors."""
    problems: list[str] = []

    def watch(message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            problems.append(message.text)

    page.on("console", watch)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return problems
