"""Why a connection failed, in a few words, whichever SDK raised it.

All three SDKs sit on urllib3, which wraps the socket error (`ConnectionRefusedError`,
`socket.gaierror`, `TimeoutError`) several layers deep: botocore keeps it in `__context__`,
requests in `args`, azure-core in `inner_exception`. Users need "connection refused" or "host
name not resolved", not five nested class names.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

_ERRNO_TEXT = re.compile(r"\[Errno -?\d+\] ([^'\"()\]\[]+)")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and everything it wraps, each once."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        wrapped: list[object] = [item.__cause__, item.__context__, getattr(item, "inner_exception", None),
                                 getattr(item, "reason", None), *getattr(item, "args", ())]
        kwargs = getattr(item, "kwargs", None)
        if isinstance(kwargs, dict):
            wrapped.append(kwargs.get("error"))
        todo.extend(w for w in wrapped if isinstance(w, BaseException))


def connection_cause(exc: BaseException) -> str:
    """`connection refused`, `host name not resolved`, `timed out`, or the socket error's own words."""
    for item in _chain(exc):
        if isinstance(item, ConnectionRefusedError):
            return "connection refused"
        if isinstance(item, socket.gaierror):
            return "host name not resolved"
        if isinstance(item, TimeoutError):
            return "timed out"
        if isinstance(item, OSError) and item.strerror:
            return item.strerror.lower()
    for item in _chain(exc):
        match = _ERRNO_TEXT.search(str(item))
        if match:
            return match.group(1).strip().lower()
    return type(exc).__name__


def never_connected(exc: BaseException) -> bool:
    """True when no connection was made (refused, name not resolved, connect timeout): nothing was sent.

    urllib3 raises ConnectTimeoutError, or its subclass NewConnectionError, only before a request
    is on the wire; a failure after that (a reset, a read timeout) may follow a completed write.
    """
    from urllib3.exceptions import ConnectTimeoutError

    return any(isinstance(item, ConnectTimeoutError) for item in _chain(exc))


def unreachable(endpoint: str, exc: BaseException, timeout: float, setting: str) -> str:
    """`endpoint http://127.0.0.1:9 unreachable (connection refused); check <setting>`."""
    cause = connection_cause(exc)
    if cause == "timed out":
        cause = f"no connection within {timeout:g}s"
    return f"endpoint {endpoint} unreachable ({cause}); check {setting}"


def first_line(text: str) -> str:
    """SDK messages run to many lines (Azure appends the XML body); a report line holds one."""
    stripped = text.strip()
    return stripped.splitlines()[0].strip() if stripped else ""


def public_url(url: str) -> str:
    """A URL fit for messages: no user:password@, no query string (SAS tokens live there)."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:  # IPv6
        netloc = f"[{netloc}]"
    try:
        port = parts.port
    except ValueError:  # not a number: validation reports it; keep the host alone here
        port = None
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
