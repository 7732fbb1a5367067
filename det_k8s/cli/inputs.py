"""Reading the files users name on the command line, with one clear error per problem.

Only the option declarations are needed to build `--help`, so everything else is imported
inside the functions that read files: `det-k8s --help` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InputError, UsageError

if TYPE_CHECKING:
    from ..cluster.model import Pod, Snapshot
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
    from .sources import read_source

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
