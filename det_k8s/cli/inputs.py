"""Reading the files users name on the command line, with one clear error per problem.

Only the option declarations are needed to build `--help`, so everything else is imported
inside the functions that read files: `det-k8s --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError, UsageError

if TYPE_CHECKING:
    from ..cluster.model import Snapshot
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
CHUNK = 2**20


STDIN = "-"
_stdin_read: list[Any] = []  # the stdin objects already read (one per process; tests swap sys.stdin)


def read_text(path: Path, what: str = "file", limit: int = SETTINGS_LIMIT) -> str:
    """A whole UTF-8 file, or stdin for `-`, read at most `limit` bytes deep (see `decode_bounded`).

    Stdin can be read once per command: `-f - --snapshot -` is a usage error, not an empty second file.
    """
    if str(path) == STDIN:
        import sys

        if any(seen is sys.stdin for seen in _stdin_read):
            raise UsageError("- (stdin) is named twice; it can be read only once",
                             hint="pipe one input in and pass the others as files")
        _stdin_read.append(sys.stdin)
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError(f"- reads the {what} from stdin, and stdin is a terminal",
                             hint="pipe it in: cat site.yaml | det-k8s ... -f -")
        return decode_bounded(sys.stdin.buffer, "stdin", what, limit)
    try:
        with path.open("rb") as handle:
            return decode_bounded(handle, str(path), what, limit)
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such {what}") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{path}: is a directory, expected a {what}") from exc
    except PermissionError as exc:
        raise InputError(f"{path}: permission denied") from exc


def decode_bounded(handle: Any, shown: str, what: str, limit: int) -> str:
    """A binary stream's UTF-8 text, read in chunks at most `limit` bytes deep, so a device or a huge input fails
    cleanly.

    It is refused at the first NUL byte (never in YAML or JSON text), so `/dev/zero` or a binary file fails at once
    rather than after filling memory up to the limit. UTF-16 (what Windows PowerShell's `>` writes) is named as such
    rather than called binary, and a UTF-8 byte-order mark is dropped.
    """
    data = bytearray()
    while len(data) <= limit:
        chunk = handle.read(min(CHUNK, limit + 1 - len(data)))
        if not chunk:
            break
        if not data and chunk.startswith((b"\xff\xfe", b"\xfe\xff")):
            raise InputError(f"{shown}: UTF-16 text; det-k8s reads UTF-8",
                             hint="save it as UTF-8 (in PowerShell: ... | Out-File -Encoding utf8)")
        if b"\0" in chunk:
            raise InputError(f"{shown}: binary data (a NUL byte), not text; is this the right {what}?")
        data += chunk
    if len(data) > limit:
        raise InputError(f"{shown}: larger than {limit // 2**20} MiB; is this the right {what}?")
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return bytes(memoryview(data)[bom:]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown}: not UTF-8 text (byte {bom + exc.start + 1} is not valid UTF-8)",
                         hint="save it as UTF-8") from exc


def load_settings_from_cli(files: Sequence[str | Path] | None, sets: Sequence[str] | None,
                           set_strings: Sequence[str] | None, *, required: bool = True) -> LoadedSettings:
    """Read -f files (paths, - for stdin, URLs) and apply --set flags; problems are collected in the result."""
    from ..settings import Document, load_settings
    from .sources import read_source

    if required and not files and not sets and not set_strings:
        raise UsageError("no settings given", hint="pass a settings file with -f, e.g. -f examples/gpu-cluster.yaml")
    documents = [Document(*read_source(given, "settings file", SETTINGS_LIMIT)) for given in files or ()]
    return load_settings(documents, sets or (), set_strings or ())


def load_documents(path: Path) -> list[Any]:
    """All documents of a JSON or YAML file (JSON parsed natively: big snapshots load 10x faster)."""
    import json

    import yaml

    from ..settings.source import _Loader

    text = read_text(path, limit=SNAPSHOT_LIMIT)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError:
            pass  # YAML flow style looks like JSON at first sight
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        shown = "stdin" if str(path) == STDIN else str(path)
        where = f"{shown}:{mark.line + 1}" if mark is not None else shown
        raise InputError(f"{where}: YAML syntax error: {exc.problem}") from exc


def load_snapshot(path: Path) -> Snapshot:
    """A Kubernetes List of Nodes and Pods (`kubectl get nodes,pods -A -o yaml`)."""
    from ..cluster.read import snapshot_from_objects

    return snapshot_from_objects(load_documents(path), "stdin" if str(path) == STDIN else str(path))
