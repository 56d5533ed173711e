"""Confirmation before a destructive action on the pages: the one mechanism for release, revoke,
suspend, archive, token revoke, member remove, notebook stop and the like.

A button posts its form as usual. The view asks `confirmed(request)`; while it is False the view
changes nothing and answers `confirm_page(...)`: without JavaScript a page of its own, with htmx
the same form as a `<dialog>` that htmx appends to the page and static/js/confirm.js opens. The
confirmation form repeats what was posted (hidden fields) plus `confirmed=yes`, and posts as a
plain form, so the action happens on one POST that carries the confirmation, then redirects.
The API never asks: confirming is a page concern.
"""

from dataclasses import dataclass

from django.http import HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme

from portal.core.http import PortalHttpRequest

CONFIRM_FIELD = "confirmed"
CONFIRM_VALUE = "yes"
TYPED_FIELD = "typed"  # what the person typed, for questions that ask to type a name
COMMENT_FIELD = "comment"  # the reason, for questions that ask one (for the audit log)
TEMPLATE = "core/confirm.html"

# Fields the confirmation form never repeats: it adds its own CSRF token and confirmation.
_NOT_REPEATED = frozenset({"csrfmiddlewaretoken", CONFIRM_FIELD, TYPED_FIELD})


def confirmed(request: PortalHttpRequest, *, typed: str = "") -> bool:
    """Whether this POST carries the confirmation the confirmation form adds (and, when the
    question asks to type `typed`, that exact text)."""
    if request.method != "POST" or request.POST.get(CONFIRM_FIELD) != CONFIRM_VALUE:
        return False
    return not typed or request.POST.get(TYPED_FIELD, "").strip() == typed


def safe_next(request: PortalHttpRequest, default: str) -> str:
    """The posted `next` when it is a path on this site, else `default`."""
    back = request.POST.get("next", "")
    allowed = url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return back if allowed and back.startswith("/") and not back.startswith("//") else default


@dataclass(frozen=True)
class Question:
    """What the confirmation says: a title ("Suspend tenant ml?"), what will happen, the
    button that does it, and where Cancel goes back to. All text comes translated.

    `typed`: for what cannot be undone, the text (a slug) the person types to confirm.
    `comment_label`: ask for a reason, posted as `comment` (kept for the audit log)."""

    title: str
    message: str
    submit_label: str
    cancel_url: str
    danger: bool = True
    typed: str = ""
    comment_label: str = ""


def confirm_page(
    request: PortalHttpRequest, question: Question, *, extra_fields: dict[str, str] | None = None
) -> HttpResponse:
    """Ask `question` about the POST in `request`, which changed nothing: the confirmation form
    posts the same fields again to the same address, with the confirmation. `extra_fields`
    (for instance a `next` the view chose) are repeated too."""
    extra = extra_fields or {}
    asked = {COMMENT_FIELD} if question.comment_label else set()
    fields = [
        (name, value)
        for name, values in request.POST.lists()
        if name not in _NOT_REPEATED and name not in extra and name not in asked
        for value in values
    ]
    fields += list(extra.items())
    # Confirmed but mistyped: ask again, saying so.
    mistyped = bool(question.typed) and request.POST.get(CONFIRM_FIELD) == CONFIRM_VALUE
    context = {
        "question": question,
        "action_url": request.get_full_path(),
        "fields": fields,
        "confirm_field": CONFIRM_FIELD,
        "confirm_value": CONFIRM_VALUE,
        "typed_field": TYPED_FIELD,
        "comment_field": COMMENT_FIELD,
        "comment": request.POST.get(COMMENT_FIELD, ""),
        "mistyped": mistyped,
    }
    template = f"{TEMPLATE}#confirm-dialog" if request.htmx else TEMPLATE
    return render(request, template, context, status=400 if mistyped else 200)
