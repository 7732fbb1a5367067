"""The one reading layer: every YAML and JSON det-k8s takes in is bounded here before it is used.

Settings files, stdin, experiment files, snapshots, kubeconfigs, the master's configuration,
helm's JSON, queue entries and the scheduling policy all come through these functions, so the
same limits hold everywhere:

- **Only regular files and stdin** (`-`). A named pipe, a device, a socket or a directory is refused
  at once, before it is opened (opening a FIFO would block until someone writes to it).
- **Size**: a file is read at most `limit` bytes deep, refused at the first NUL byte.
- **Depth** (`MAX_DEPTH` levels of mappings and lists). YAML is checked on PyYAML's event stream
  (`yaml.parse`), which does not recurse, before the composer and constructor, which do (libyaml's
  C composer recurses without a guard: 30,000 levels crash the interpreter). An alias counts as
  deep as what it names, and the values a document expands to through aliases are counted too
  (`MAX_VALUES`, "billion laughs"). JSON's C scanner guards its own recursion: its RecursionError
  becomes a clear error, and small documents (not snapshots, whose readers only read known fields
  of checked shapes) are checked against `MAX_DEPTH` after parsing.
- **Numbers**: an integer with more digits than Python converts (4,300) is an error on its line,
  not a ValueError.

Every failure is an `InputError` naming the source (file, file:line, or what the text is) and
what is wrong; nothing here lets a parser's own exception through.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from .errors import InputError

MAX_DEPTH = 100  # levels of nested mappings and lists; Kubernetes objects and settings stay far below 30
MAX_VALUES = 1_000_000  # values once YAML aliases are expanded
SETTINGS_LIMIT = 16 * 2**20  # settings and experiment files are small; a larger one is a mistake (or /dev/zero)
SNAPSHOT_LIMIT = 2 * 2**30  # `kubectl get nodes,pods -A -o json` of a very large cluster
TEXT_LIMIT = 16 * 2**20  # text that is not a file: helm's output, a ConfigMap's value
CHUNK = 2**20
STDIN = "-"
URL_AS_PATH = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/(?!/)")  # https://x as a Path is https:/x

try:  # the C loader is several times faster on big files
    Loader: type[yaml.SafeLoader] = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    Loader = yaml.SafeLoader


# -- files ----------------------------------------------------------------------------------


def _kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_file(path: Path | str, what: str = "file", limit: int = SETTINGS_LIMIT) -> str:
    """A whole UTF-8 regular file (or stdin for `-`), read at most `limit` bytes deep.

    Refused at once: a directory, a named pipe, a device or a socket (never opened, so never
    blocking). Refused at the first NUL byte (never in YAML or JSON text), so a binary file fails at
    once. UTF-16 (what Windows PowerShell's `>` writes) is named as such; a UTF-8 byte-order mark
    is dropped.
    """
    shown = str(path)
    if shown == STDIN:
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise InputError(f"{STDIN}: there is no stdin to read the {what} from")
        try:
            return _decode(_read_stream(stream, "stdin", what, limit), "stdin")
        except (OSError, ValueError) as exc:
            raise InputError(f"stdin: cannot read the {what}: {exc}") from exc
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{shown}: is a directory, expected a {what}")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{shown}: {_kind_of(info.st_mode)}, not a regular file; det-k8s reads only regular "
                             "files and stdin", hint=f"save it to a file, or pipe it in and pass {STDIN}")
        # O_NONBLOCK: if a FIFO was put there since the check, opening it must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise InputError(f"{shown}: not a regular file; det-k8s reads only regular files and stdin")
            data = _read_stream(handle, shown, what, limit)
    except FileNotFoundError as exc:
        if URL_AS_PATH.match(shown):  # a URL read as a path: its `//` became `/`
            url = shown.replace(":/", "://", 1)
            raise InputError(f"{url}: det-k8s reads a {what} from a file or {STDIN} (stdin), not from a URL",
                             hint=f"download it first, or pipe it in: curl -fsSL {url} | det-k8s ... {STDIN}") from exc
        raise InputError(f"{shown}: no such {what}") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{shown}: is a directory, expected a {what}") from exc
    except PermissionError as exc:
        raise InputError(f"{shown}: permission denied") from exc
    except OSError as exc:  # a name too long, a symlink loop, an I/O error...
        raise InputError(f"{_clip(shown)}: cannot read the {what}: {exc.strerror or exc}") from exc
    return _decode(data, shown)


def read_stream(handle: Any, shown: str, what: str, limit: int) -> str:
    """A binary stream's UTF-8 text (stdin, an HTTP body), with the same bounds and messages as a file's."""
    return _decode(_read_stream(handle, shown, what, limit), shown)


def _clip(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _read_stream(handle: Any, shown: str, what: str, limit: int) -> bytearray:
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
        raise InputError(f"{shown}: larger than {_size(limit)}; is this the right {what}?")
    return data


def _size(limit: int) -> str:
    return f"{limit // 2**30} GiB" if limit >= 2**30 and not limit % 2**30 else f"{limit // 2**20} MiB"


def _decode(data: bytearray, shown: str) -> str:
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return bytes(memoryview(data)[bom:]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown}: not UTF-8 text (byte {bom + exc.start + 1} is not valid UTF-8)",
                         hint="save it as UTF-8") from exc


def bounded_text(text: str, name: str, limit: int = TEXT_LIMIT) -> str:
    """Text that did not come from a file (helm's output, a ConfigMap value), refused when larger than `limit`."""
    if len(text) > limit:
        raise InputError(f"{name}: larger than {_size(limit)}")
    return text


# -- YAML -----------------------------------------------------------------------------------


def _line_of(text: str, position: int | None) -> int | None:
    if position is None or position < 0:
        return None
    return text.count("\n", 0, position) + 1


def yaml_error(exc: yaml.YAMLError, name: str, text: str = "", *, max_depth: int = MAX_DEPTH) -> InputError:
    """A PyYAML error as one line naming name:line (ReaderError, for a control character, has no mark).

    PyYAML 6.0.4 and later stop at a nesting depth of their own (libyaml's) before det-k8s's event walk
    counts `max_depth` levels: that is reported as det-k8s's own depth error, the same with every PyYAML.
    """
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        if "maximum nesting depth" in (exc.problem or ""):
            return InputError(f"{where}: nested more than {max_depth} levels deep", hint=_DEEP_HINT)
        reason = exc.problem or exc.context or "invalid YAML"
        return InputError(f"{where}: YAML syntax error: {reason}", hint="check indentation and quoting on that line")
    if isinstance(exc, yaml.reader.ReaderError):
        line = _line_of(text, exc.position) if text else None
        where = f"{name}:{line}" if line else name
        if isinstance(exc.character, int):
            what = f"the control character {exc.character:#04x}" if exc.character < 0x20 or exc.character == 0x7f \
                else f"the character {exc.character:#x}"
        else:
            what = "a byte that is not valid text"
        return InputError(f"{where}: {what} is not allowed in YAML", hint="remove it, or quote and escape it")
    return InputError(f"{name}: YAML error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def check_yaml(text: str, name: str, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> None:
    """Refuse YAML nested deeper than `max_depth` or expanding to more than `max_values` values.

    Walks the parser's events, which libyaml produces without recursion, so nothing can overflow
    here; the composer that would recurse has not run yet. Syntax errors surface here too, as
    InputError naming name:line.

    A small text without anchors is let through at once when it cannot nest `max_depth` deep: every
    level needs a line break or an indicator (`[`, `{`, `-`, `?`), and without an anchor there is
    no alias to expand (200 experiment files cost `plan` ~10 ms of events otherwise).
    """
    if "&" not in text and 1 + sum(text.count(c) for c in "\n[{-?") <= max_depth:
        return
    depth = 0
    total = 0
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (depth of its subtree, values it expands to)
    stack: list[list[Any]] = []  # [anchor, depth at start, deepest inside, values inside]
    collection_start = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    collection_end = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    try:
        for event in yaml.parse(text, Loader=Loader):
            if isinstance(event, yaml.ScalarEvent):
                total += 1
                if stack:
                    stack[-1][3] += 1
                if event.anchor:
                    anchors[event.anchor] = (0, 1)
            elif isinstance(event, collection_start):
                depth += 1
                total += 1
                if depth > max_depth:
                    raise _too_deep(name, event, max_depth)
                stack.append([event.anchor, depth, depth, 1])
            elif isinstance(event, collection_end):
                anchor, start, deepest, values = stack.pop()
                if anchor:
                    anchors[anchor] = (deepest - start + 1, values)
                if stack:
                    stack[-1][2] = max(stack[-1][2], deepest)
                    stack[-1][3] += values
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                extra, values = anchors.get(event.anchor or "", (0, 1))
                total += values
                if depth + extra > max_depth:
                    raise _too_deep(name, event, max_depth, alias=True)
                if stack:
                    stack[-1][2] = max(stack[-1][2], depth + extra)
                    stack[-1][3] += values
            if total > max_values:
                line = event.start_mark.line + 1 if event.start_mark is not None else None
                raise InputError(f"{name}{f':{line}' if line else ''}: more than {max_values:,} values once YAML "
                                 "aliases are expanded",
                                 hint="the file repeats aliases (*name) too much to be what det-k8s reads")
    except yaml.YAMLError as exc:
        raise yaml_error(exc, name, text, max_depth=max_depth) from exc


_DEEP_HINT = "no Kubernetes object, settings or experiment file needs that; is this the right file?"


def _too_deep(name: str, event: Any, max_depth: int, *, alias: bool = False) -> InputError:
    line = event.start_mark.line + 1 if event.start_mark is not None else None
    via = " (through an alias)" if alias else ""
    return InputError(f"{name}{f':{line}' if line else ''}: nested more than {max_depth} levels deep{via}",
                      hint=_DEEP_HINT)


def load_yaml(text: str, name: str, *, max_depth: int = MAX_DEPTH, limit: int | None = TEXT_LIMIT) -> Any:
    """One YAML document as plain data (None for an empty one), bounded as the module docstring says."""
    documents = load_yaml_all(text, name, max_depth=max_depth, limit=limit)
    if len(documents) > 1:
        raise InputError(f"{name}: expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None


def load_yaml_all(text: str, name: str, *, max_depth: int = MAX_DEPTH, limit: int | None = TEXT_LIMIT) -> list[Any]:
    """Every document of a YAML stream (empty ones dropped), bounded as the module docstring says."""
    if limit is not None:
        bounded_text(text, name, limit)
    check_yaml(text, name, max_depth=max_depth)
    try:
        return [doc for doc in yaml.load_all(text, Loader=Loader) if doc is not None]
    except yaml.YAMLError as exc:
        raise yaml_error(exc, name, text) from exc
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"{name}: {number_problem(exc)}") from exc
    except RecursionError as exc:  # pragma: no cover - check_yaml keeps the depth far below the limit
        raise InputError(f"{name}: nested too deeply") from exc


def number_problem(exc: ValueError) -> str:
    """The message for a number Python refuses to convert (more than 4,300 digits)."""
    if "digits" in str(exc):
        return "a number with more than 4300 digits; no setting needs one"
    return f"a value that cannot be read: {exc}"


# -- JSON -----------------------------------------------------------------------------------


def load_json(text: str | bytes, name: str, *, max_depth: int | None = MAX_DEPTH,
              limit: int | None = TEXT_LIMIT) -> Any:
    """A JSON document, bounded: size (`limit`), depth (`max_depth`, checked after the C scanner, which
    guards its own recursion; None skips the check for big documents read field by field), and numbers."""
    if limit is not None and len(text) > limit:
        raise InputError(f"{name}: larger than {_size(limit)}")
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise InputError(f"{name}: nested more than {max_depth or MAX_DEPTH} levels deep",
                         hint="no Kubernetes object needs that; is this the right data?") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text") from exc
    except ValueError as exc:  # an integer of more than 4,300 digits
        raise InputError(f"{name}: {number_problem(exc)}") from exc
    if max_depth is not None and deeper_than(data, max_depth):
        raise InputError(f"{name}: nested more than {max_depth} levels deep",
                         hint="no Kubernetes object needs that; is this the right data?")
    return data


def deeper_than(data: Any, max_depth: int) -> bool:
    """Is `data` nested more than `max_depth` levels of dicts and lists deep? (iterative: never recurses)"""
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            children: Iterator[Any] = iter(node.values())
        elif isinstance(node, list):
            children = iter(node)
        else:
            continue
        if depth > max_depth:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def type_name(value: Any) -> str:
    """A user-facing name for the type of a value read from YAML or JSON (settings, objects, kubeconfigs).

    The one wording of every `expected X, found Y` message: an int is "an integer", a float "a number"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__
