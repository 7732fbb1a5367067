"""Reading the files users name on the command line, with one clear error per problem.

Only the option declarations are needed to build `--help`, so everything else is imported
inside the functions that read files: `det-k8s --help` stays fast.

Where `-f` reads from: a file, `-` (stdin), or an http(s) URL fetched the way helm fetches `-f URL`.

helm accepts `--values https://...`; so does det-k8s: one GET, TLS verified, proxies from the
environment as usual, at most `URL_TIMEOUT` seconds for the connection and each read, at most
`limit` bytes (the same bound as a file), at most `URL_DEADLINE` seconds in all (a server that sends a byte
now and then never trips the per-read timeout), redirects only to http(s) and at most `MAX_REDIRECTS`. A URL
holding a space or a control character is refused before anything is sent. The URL is kept whole
(`pathlib` would turn `https://x` into `https:/x`); credentials in it are masked in messages.
`user:password@` in the URL is sent as HTTP Basic authentication to that URL only, as Go's HTTP client (so
helm) sends it: never to where it redirects. Any other scheme (`s3://`, `oci://`, `file://`) is refused in
one line naming the URL.

`read_source` is the one entry point: files and stdin go to `read_text`, so every input
has the same bounds and the same error lines.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError, UsageError

if TYPE_CHECKING:
    from ..cluster.model import Pod, Snapshot
    from ..scheduling.model import Policy
    from ..settings import LoadedSettings

ValuesOpt = Annotated[list[str] | None, typer.Option(  # str, not Path: Path would turn https://x into https:/x
    "--values", "-f", metavar="FILE",
    help="Settings file (YAML, Determined chart keys): a path, - for stdin, or an http(s) URL. Repeat to merge; "
    "the right-most wins.", rich_help_panel="Settings")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", metavar="KEY=VALUE", help="Set a value: key.sub=value, list={a,b}, key[0]=value (helm syntax). Repeatable.",
    rich_help_panel="Settings")]
SetStringOpt = Annotated[list[str] | None, typer.Option(
    "--set-string", metavar="KEY=VALUE", help="Like --set, but the value is always a string.", rich_help_panel="Settings")]


SETTINGS_LIMIT = 16 * 2**20  # settings and experiment files are small; a larger one is a mistake (or /dev/zero)
SNAPSHOT_LIMIT = 2 * 2**30  # `kubectl get nodes,pods -A -o json` of a very large cluster


STDIN = "-"
_TWICE = "- (stdin) is named twice; it can be read only once"
_TWICE_HINT = "pipe one input in and pass the others as files"
_stdin_read: list[Any] = []  # the stdin objects already read (one per process; tests swap sys.stdin)


def read_text(path: Path, what: str = "file", limit: int = SETTINGS_LIMIT) -> str:
    """A whole UTF-8 file or stdin (`-`), bounded: see `det_k8s.safe_read.read_file`.

    Stdin can be read once per command: `-f - --snapshot -` is a usage error, not an empty second file.
    """
    from ..safe_read import read_file

    if str(path) == STDIN:
        import sys

        if any(seen is sys.stdin for seen in _stdin_read):
            raise UsageError(_TWICE, hint=_TWICE_HINT)
        _stdin_read.append(sys.stdin)
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError(f"- reads the {what} from stdin, and stdin is a terminal",
                             hint="pipe it in: cat site.yaml | det-k8s ... -f -")
    return read_file(path, what, limit)


def stdin_once(*inputs: str | Path | Sequence[str | Path] | None) -> None:
    """Stdin may be named once per command, across all its options and arguments (`plan - --snapshot -`,
    `--snapshot - -f -`): named twice is a usage error raised before anything is read, so the first reader
    never parses the other input's text and blames its content."""
    named = 0
    for given in inputs:
        items = given if isinstance(given, list | tuple) else (given,)
        named += sum(1 for item in items if item is not None and str(item) == STDIN)
    if named > 1:
        raise UsageError(_TWICE, hint=_TWICE_HINT)


def decode_bounded(handle: Any, shown: str, what: str, limit: int) -> str:
    """A binary stream's UTF-8 text (a fetched URL's body), with a file's bounds: see `det_k8s.safe_read.read_stream`."""
    from ..safe_read import read_stream

    return read_stream(handle, shown, what, limit)


def load_settings_from_cli(files: Sequence[str | Path] | None, sets: Sequence[str] | None,
                           set_strings: Sequence[str] | None, *, required: bool = True,
                           chart: Path | None = None) -> LoadedSettings:
    """Read -f files (paths, - for stdin, URLs) and apply --set flags; problems are collected in the result. With a
    user's `chart`, settings that name no appVersion are for the release that chart names."""
    from ..settings import Document, load_settings

    if required and not files and not sets and not set_strings:
        raise UsageError("no settings given", hint="pass a settings file with -f, e.g. -f examples/gpu-cluster.yaml")
    from ..scrub_output import register, register_plain
    from ..settings.secret_settings import plain_in, secrets_in

    stdin_once(files)
    documents = [Document(*read_source(given, "settings file", SETTINGS_LIMIT)) for given in files or ()]
    default = None
    if chart is not None:
        from ..chart.assemble import chart_app_version

        default = chart_app_version(chart)
    loaded = load_settings(documents, sets or (), set_strings or (), default_app_version=default,
                           bundled_chart=chart is None)
    register_plain(*plain_in(loaded.user_values))  # a secret that is also a host's name is masked as a field only
    register(*secrets_in(loaded.user_values))  # from here on, no output can show them (cli/output.py)
    return loaded


def load_documents(path: Path) -> list[Any]:
    """All documents of a JSON or YAML file (JSON parsed natively: big snapshots load 10x faster).

    Bounded like every input (`det_k8s.safe_read`): YAML's depth is checked before it is composed;
    JSON's C scanner stops at its own recursion guard (the text is then read as YAML, whose checks
    name the line), and the snapshot's readers read only known fields whose shapes they check, so a
    big JSON snapshot is not walked a second time.
    """
    import json

    from ..safe_read import load_yaml_all

    text = read_text(path, "snapshot file", limit=SNAPSHOT_LIMIT)
    if text.lstrip().startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except (ValueError, RecursionError):
            pass  # YAML flow style looks like JSON at first sight; too deep or a huge number: YAML's reader says where
    return load_yaml_all(text, "stdin" if str(path) == STDIN else str(path), limit=None)


def load_snapshot(path: Path, read_pod: Callable[[Mapping[str, Any]], Pod] | None = None) -> Snapshot:
    """A Kubernetes List of Nodes and Pods (`kubectl get nodes,pods -A -o yaml`); `read_pod` reads each pod (`plan`:
    the master's as a pass reads them, `scheduling.master.ServedReader`)."""
    from ..cluster.read import snapshot_from_objects

    shown = "stdin" if str(path) == STDIN else str(path)
    snapshot = snapshot_from_objects(load_documents(path), shown, read_pod)
    if not snapshot.nodes:
        raise InputError(f"{shown}: no Node objects in it; nothing can be checked or planned against it",
                         hint="write it with `kubectl get nodes,pods -A -o json > snapshot.json`")
    return snapshot


URL_TIMEOUT = 30.0  # seconds: to connect, and for each read
URL_DEADLINE = 120.0  # seconds for the whole fetch, body included
MAX_REDIRECTS = 5
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def is_url(given: str) -> bool:
    return bool(_SCHEME.match(given))


def read_source(given: str | Path, what: str, limit: int) -> tuple[str, str]:
    """(the name messages use, the text) of a file, `-` for stdin, or an http(s) URL."""
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


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cycle collector while a snapshot's millions of acyclic objects are built and used.

    Parsing a 30,000-pod snapshot allocates so many containers that the collector runs hundreds
    of times for nothing (JSON data has no cycles); pausing it makes `plan` about 2x faster. The
    command is short-lived, so nothing accumulates.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def with_policy_file(flags: Policy, path: Path) -> Policy:
    """The policy a file gives (`det-k8s scheduler policy -o yaml` prints one; or a queue document alone, as
    `scheduler policy --queues` takes it; its queues are checked like settings), with the switches the command line
    turns on; keys the file leaves out come from the command line."""
    from ..live.policy import policy_from_data
    from ..safe_read import load_yaml

    shown = "stdin" if str(path) == "-" else str(path)
    raw = load_yaml(read_text(path, "policy file"), shown)
    raw = {} if raw is None else raw
    if isinstance(raw, dict) and isinstance(raw.get("queues"), list):  # a queue document, as --queues takes it
        raw = {"queues": raw}
    policy = policy_from_data(raw, shown)
    given = raw if isinstance(raw, dict) else {}
    return replace(policy, preemption=policy.preemption or flags.preemption,
                   autoscaling=policy.autoscaling or flags.autoscaling,
                   topology_required=policy.topology_required or flags.topology_required,
                   topology_key=policy.topology_key if "topology_key" in given else flags.topology_key,
                   extended_resource_toleration=(policy.extended_resource_toleration
                                                 if "extended_resource_toleration" in given
                                                 else flags.extended_resource_toleration))
