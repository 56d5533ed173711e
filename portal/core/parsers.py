"""Bounded JSON bodies for the API: size and nesting depth are checked before `json.loads`.

Python's parser recurses once per nesting level, so a body nested thousands deep ends in a
RecursionError (a 500) after work the caller made us do for nothing. The depth is therefore
counted first, in one linear pass over the text that skips strings, and a body too large or too
deep is refused before anything is built from it. ApiBodyLimitMiddleware refuses an
oversized Content-Length even earlier, before any middleware reads the body.
"""

import json
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import IO, Any

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser
from rest_framework.utils.json import strict_constant

BODY = "body"

# A JSON string, to its closing quote or to the end of an unterminated one (so that no input
# makes the scan start over): brackets inside strings are not nesting.
_STRING = re.compile(r'"(?:[^"\\]+|\\.)*(?:"|\\?\Z)', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = gettext_lazy("The request body is too large.")
    default_code = "too_large"


def too_large_message(limit: int) -> str:
    return _("The request body is larger than the %(limit)d bytes this API accepts.") % {
        "limit": limit
    }


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text`, in time linear in its length."""
    brackets = _BRACKET.findall(_STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets), initial=0))


def _refuse(message: str) -> exceptions.ValidationError:
    return exceptions.ValidationError({BODY: [message]})


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with PORTAL_API_MAX_BODY_BYTES and PORTAL_API_MAX_JSON_DEPTH enforced
    before decoding: too large is 413 `too_large`; too deep, not text in its declared charset,
    or not JSON is 400 naming the body."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = settings.PORTAL_API_MAX_BODY_BYTES
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise RequestTooLarge(too_large_message(limit))
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise _refuse(
                _("The body is not text in %(encoding)s.") % {"encoding": encoding}
            ) from None
        max_depth = settings.PORTAL_API_MAX_JSON_DEPTH
        if json_depth(text) > max_depth:
            raise _refuse(
                _("The body nests arrays and objects deeper than %(depth)d levels.")
                % {"depth": max_depth}
            )
        try:
            # NaN and Infinity are not JSON; DRF refuses them too (STRICT_JSON).
            return json.loads(text, parse_constant=strict_constant if self.strict else None)
        except ValueError as error:
            raise _refuse(_("The body is not valid JSON: %(error)s.") % {"error": error}) from None
