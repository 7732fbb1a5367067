"""Go durations (`10m`, `90s`, `1h30m`, `5m0s`), as helm and kubectl spell `--timeout`."""

from __future__ import annotations

import re

from ..errors import UsageError

_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_SECONDS = 7 * 86400.0  # a week: no wait det-k8s does is longer, and larger values overflow socket timeouts
MAX_TEXT = 100


def parse_duration(text: str, flag: str = "--timeout", maximum: float = MAX_SECONDS) -> float:
    """Seconds in a Go duration; a bare number, a wrong unit or more than `maximum` is a usage error naming the flag."""
    value = text.strip()
    if len(value) > MAX_TEXT:
        raise UsageError(f"{flag}: {len(value)} characters is not a duration", hint="use a Go duration such as 90s")
    pos, total = 0, 0.0
    while pos < len(value):
        match = _PART.match(value, pos)
        if not match:
            break
        total += float(match.group(1)) * _SECONDS[match.group(2)]
        pos = match.end()
    if not value or pos != len(value):
        raise UsageError(f"{flag} {text!r}: not a duration", hint="use a Go duration such as 90s, 10m or 1h30m")
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
