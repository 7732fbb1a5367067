"""Where `-f` reads from: a file, `-` (stdin), or an http(s) URL fetched the way helm fetches `-f URL`.

helm accepts `--values https://...`; so does det-k8s: one GET, TLS verified, proxies from the
environment as usual, at most `URL_TIMEOUT` seconds for the connection and each read, at most
`limit` bytes (the same bound as a file), at most `URL_DEADLINE` seconds in all (a server that sends a byte
now and then never trips the per-read timeout), redirects only to http(s) and at most `MAX_REDIRECTS`. A URL
holding a space or a control character is refused before anything is sent. The URL is kept whole
(`pathlib` would turn `https://x` into `https:/x`); credentials in it are masked in messages.
`user:password@` in the URL is sent as HTTP Basic authentication to that URL only, as Go's HTTP client (so
helm) sends it: never to where it redirects. Any other scheme (`s3://`, `oci://`, `file://`) is refused in
one line naming the URL.

`read_source` is the one entry point: files and stdin go to `inputs.read_text`, so every input
has the same bounds and the same error lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import InputError

URL_TIMEOUT = 30.0  # seconds: to connect, and for each read
URL_DEADLINE = 120.0  # seconds for the whole fetch, body included
MAX_REDIRECTS = 5
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def is_url(given: str) -> bool:
    return bool(_SCHEME.match(given))


def read_source(given: str | Path, what: str, limit: int) -> tuple[str, str]:
    """(the name messages use, the text) of a file, `-` for stdin, or an http(s) URL."""
    from .inputs import read_text

    text = str(given)
    scheme = _SCHEME.match(text)
    if scheme is None:
        path = Path(text)
        return ("stdin" if text == "-" else text), read_text(path, what, limit)
    from ..settings.secret_settings import mask_url

    unsafe = any(not c.isprintable() or c.isspace() for c in text)
    shown = mask_url("".join(c if c.isprintable() else repr(c)[1:-1] for c in text) if unsafe else text)
    if unsafe:  # http.client would refuse it with a message quoting the part of the URL that holds it
        raise InputError(f"{shown}: not a valid URL: it holds a space or a control character",
                         hint="percent-encode it (a space is %20)")
    if scheme.group(1).lower() not in ("http", "https"):
        raise InputError(f"{shown}: det-k8s reads a {what} from a file, - (stdin) or an http(s) URL, not "
                         f"{scheme.group(1)}://", hint="download it first, or pipe it in with -f -")
    return shown, fetch(text, shown, what, limit)


def fetch(url: str, shown: str, what: str, limit: int, timeout: float | None = None) -> str:
    """The body of a GET of `url` as UTF-8 text, bounded in time and size; every failure one InputError."""
    import http.client
    import socket
    import ssl
    import time
    import urllib.error
    import urllib.request

    from .inputs import decode_bounded

    class _Redirects(urllib.request.HTTPRedirectHandler):
        max_redirections = MAX_REDIRECTS

        def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
            if not newurl.lower().startswith(("http://", "https://")):
                raise InputError(f"{shown}: redirected to a URL that is not http(s); not followed")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    class _Deadline:
        """The body, read as it arrives (`read1`), refused once the whole fetch has taken `deadline` seconds."""

        def __init__(self, answer: Any, deadline: float) -> None:
            self.answer, self.deadline = answer, deadline

        def read(self, size: int) -> bytes:
            if time.monotonic() > self.deadline:
                raise InputError(f"{shown}: not read completely within {URL_DEADLINE:g}s (the server sends too "
                                 "slowly)")
            return bytes(self.answer.read1(size))

    timeout = URL_TIMEOUT if timeout is None else timeout
    deadline = time.monotonic() + URL_DEADLINE
    opener = urllib.request.build_opener(_Redirects())
    url, authorization = _basic_auth(url)
    headers = {"User-Agent": "det-k8s", "Accept": "*/*"}
    request = urllib.request.Request(url, headers=headers)
    if authorization:
        request.add_unredirected_header("Authorization", authorization)  # this URL only, never a redirect's
    try:
        with opener.open(request, timeout=timeout) as answer:
            declared = answer.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise InputError(f"{shown}: {int(declared) // 2**20} MiB, more than a {what} can be "
                                 f"({limit // 2**20} MiB)")
            return decode_bounded(_Deadline(answer, deadline), shown, what, limit)
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:  # a redirect urllib did not follow: a loop, too many, or no Location
            location = str(exc.headers.get("Location") or "") if exc.headers is not None else ""
            if not location:
                raise InputError(f"{shown}: the server answered HTTP {exc.code} {_reason(exc.reason)} without "
                                 "saying where to (no Location)") from exc
            if is_url(location) and not location.lower().startswith(("http://", "https://")):
                raise InputError(f"{shown}: redirected to a URL that is not http(s); not followed") from exc
            raise InputError(f"{shown}: redirected more than {MAX_REDIRECTS} times (or in a loop); not followed "
                             "further") from exc
        raise InputError(f"{shown}: the server answered HTTP {exc.code} {_reason(exc.reason)}") from exc
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError | socket.timeout):
            raise InputError(f"{shown}: no answer within {timeout:g}s") from exc
        if isinstance(reason, ssl.SSLError):
            raise InputError(f"{shown}: TLS failed ({getattr(reason, 'reason', None) or reason})",
                             hint="is the certificate trusted here? SSL_CERT_FILE names a CA bundle") from exc
        raise InputError(f"{shown}: cannot fetch it ({reason})") from exc
    except TimeoutError as exc:
        raise InputError(f"{shown}: no answer within {timeout:g}s") from exc
    except http.client.HTTPException as exc:  # its text may quote the server's bytes or the URL: named, not shown
        raise InputError(f"{shown}: the answer is not HTTP" if isinstance(exc, http.client.BadStatusLine) else
                         f"{shown}: the answer broke off or is not valid HTTP ({type(exc).__name__})") from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{shown}: cannot fetch it ({exc})") from exc


def _reason(reason: object) -> str:
    """An HTTP reason phrase as the server sent it, clipped and printable (it is the server's text)."""
    text = "".join(c for c in str(reason or "") if c.isprintable())
    return text[:60]


def _basic_auth(url: str) -> tuple[str, str | None]:
    """The URL without `user:password@`, and the Basic `Authorization` value it carried (percent-decoded, as Go's
    `url.User` reads it); the password is registered with the scrubber, so no message can show it."""
    import base64
    from urllib.parse import unquote, urlsplit, urlunsplit

    from ..scrub_output import register

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    user, password = unquote(user), unquote(password)
    register(password, userinfo)
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), f"Basic {token}"
