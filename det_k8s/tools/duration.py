"""Durations as helm and kubectl spell `--timeout`: Go durations (`10m`, `90s`, `1h30m`, `5m0s`), and a bare number
of seconds (`600`), which every det-k8s option taking a duration accepts alike. helm itself wants a unit, so what
reaches helm goes through `go_duration`."""

from __future__ import annotations

import re

from ..errors import UsageError

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_SECONDS = 7 * 86400.0  # a week: no wait det-k8s does is longer, and larger values overflow socket timeouts
MAX_TEXT = 100


HELP = "a Go duration such as 90s, 10m or 1h30m; a bare number is seconds"
_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")


def parse_duration(text: str, flag: str = "--timeout", maximum: float = MAX_SECONDS) -> float:
    """Seconds in a Go duration or a bare number of seconds; a wrong unit or more than `maximum` is a usage error
    naming the flag."""
    value = text.strip()
    if len(value) > MAX_TEXT:
        raise UsageError(f"{flag}: {len(value)} characters is not a duration", hint=f"use {HELP}")
    if _NUMBER.match(value):
        value += "s"
    pos, total = 0, 0.0
    while pos < len(value):
        match = _PART.match(value, pos)
        if not match:
            break
        total += float(match.group(1)) * _SECONDS[match.group(2)]
        pos = match.end()
    if not value or pos != len(value):
        raise UsageError(f"{flag} {text!r}: not a duration", hint=f"use {HELP}")
    if total <= 0:
        raise UsageError(f"{flag} {text!r}: must be more than zero")
    if total > maximum:
        raise UsageError(f"{flag} {text!r}: at most {format_duration(maximum)} ({maximum:g}s)",
                         hint=f"use {format_duration(maximum)} or less")
    return total


def format_duration(seconds: float) -> str:
    """`600` -> `10m0s`, the form helm prints and accepts."""
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def go_duration(text: str) -> str:
    """The duration as helm takes it: as given when it has units, `600` as `600s` (helm rejects a bare number)."""
    value = text.strip()
    return value + "s" if _NUMBER.match(value) else value
