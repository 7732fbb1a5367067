"""Keeping secret values out of messages about settings.

Problems name where a value came from, and for `--set` that is the argument itself; a wrong
type is explained by showing the value. Both are fine for `maxSlotsPerPod=3` and wrong for
`db.password=...`: the key table knows which keys are secret, and URLs may carry credentials
(user:password@host) or SAS tokens in their query string.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from . import schema
from .source import format_path

MASK = "***"
SECRET_NAMES = frozenset(path[-1] for path in schema.secret_paths())
_KEY_SEPARATOR = re.compile(r"(?<!\\)\.")  # an unescaped dot
_ASSIGNMENT = re.compile(r"(?P<key>(?:[^,=\\]|\\.)+)=(?P<value>(?:\{[^}]*\}|(?:[^,\\]|\\.)*))")


def is_secret(path: Sequence[str | int]) -> bool:
    names = tuple(part for part in path if isinstance(part, str))
    return any(names[: len(secret)] == secret for secret in schema.secret_paths())


def set_location(flag: str, path: Sequence[str | int], value: Any) -> str:
    """How a --set assignment is named in messages: its key and value, the value masked when secret."""
    if is_secret(path):
        shown = MASK
    elif isinstance(value, str) and "://" in value:
        shown = mask_url(value)
    elif isinstance(value, list):
        shown = "{" + ",".join("null" if v is None else str(v) for v in value) + "}"
    else:
        shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return f"{flag} {format_path(tuple(path))}={shown}"


def mask_set_expression(expression: str) -> str:
    """A --set argument as it may be shown: from the first secret key on, everything is masked.

    Used for arguments that could not be parsed, so where a value ends is unknown: all of the
    rest is hidden rather than guessed.
    """
    for match in _ASSIGNMENT.finditer(expression):
        last = _KEY_SEPARATOR.split(match["key"])[-1].split("[")[0]
        if last in SECRET_NAMES:
            return expression[: match.start("value")] + MASK
    return expression


def mask_url(text: str) -> str:
    """A URL with its user-info and query (credentials, SAS tokens) masked."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = MASK if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)) if parts.scheme or netloc else (
        MASK if "@" in text or "?" in text else text)
