"""Everything det-k8s prints goes through here.

Data (tables, JSON, YAML, diffs) goes to stdout; messages, warnings and spinners go to stderr, so
`det-k8s pods list -o json | jq` always gets clean JSON. On a terminal, tables are Rich tables,
labels are coloured and long waits show a spinner; when piped, everything is plain text (tables as
aligned columns, like kubectl) and nothing moves. Table headers are upper-case either way.

`NO_COLOR` (any non-empty value, https://no-color.org) turns every style off, bold and italic
included, not only colour; `TERM=dumb` does too and also stops the spinner, as for a pipe.

Every text passes through the one scrubber (`det_k8s.scrub_output`) on its way out, so no secret that
det-k8s read, in any form, and nothing secret-looking (a URL's user:password@, a bearer token)
can be printed, whichever command or message carries it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

from ..scrub_output import scrub as _scrub


class OutputFormat(str, Enum):
    """What -o takes: a table for people, JSON or YAML for programs."""

    table = "table"
    json = "json"
    yaml = "yaml"


# Characters that drive a terminal instead of showing: C0 and C1 controls (ESC starts a sequence, U+009B is CSI on
# its own), DEL, and the bidirectional overrides that make a name read backwards. A table cell or a map holds names
# from hand-edited snapshots and other users' queue entries: each becomes `?`, as kubectl shows what it cannot print.
UNPRINTABLE = {code: "?" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x061C, 0x200E, 0x200F,
                                      *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


_IN_MESSAGES = {code: mark for code, mark in UNPRINTABLE.items() if chr(code) not in "\n\t"}  # lines may be several


def printable(text: str) -> str:
    """`text` with every character that would drive the terminal (`UNPRINTABLE`) shown as `?`."""
    return text.translate(UNPRINTABLE)


def _said(text: str) -> str:
    """A message for the person running the command: scrubbed, and nothing in it drives the terminal (a name from a
    snapshot or another user's queue entry, quoted in an error), its line breaks kept."""
    return _scrub(text).translate(_IN_MESSAGES)

if TYPE_CHECKING:
    from ..errors import Problem


def _console(stderr: bool) -> Any:
    from rich.console import Console  # rich costs ~15 ms to import: only when something is printed

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _dumb() -> bool:
    return os.environ.get("TERM") == "dumb"


def _styled(stream: Any) -> bool:
    """Styles (colour, bold) only on a terminal, and not with NO_COLOR or TERM=dumb."""
    return _is_tty(stream) and not os.environ.get("NO_COLOR") and not _dumb()


def _animated(stream: Any) -> bool:
    """Spinners only on a terminal that can redraw a line."""
    return _is_tty(stream) and not _dumb()


def message(text: str) -> None:
    """A line for the person running the command (stderr)."""
    print(_said(text), file=sys.stderr, flush=True)


def warning(text: str) -> None:
    text = _said(text)
    if _styled(sys.stderr):
        _console(True).print(f"[yellow]warning:[/yellow] {_escape(text)}")
    else:
        print(f"warning: {text}", file=sys.stderr, flush=True)


def error(text: str, hint: str | None = None) -> None:
    text, hint = _said(text), _said(hint) if hint else hint
    if _styled(sys.stderr):
        line = f"[red]error:[/red] {_escape(text)}" + (f"; {_escape(hint)}" if hint else "")
        _console(True).print(line)
    else:
        print(f"error: {text}" + (f"; {hint}" if hint else ""), file=sys.stderr, flush=True)


def success(text: str) -> None:
    text = _said(text)
    if _styled(sys.stderr):
        _console(True).print(f"[green]{_escape(text)}[/green]")
    else:
        print(text, file=sys.stderr, flush=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def problem(item: Problem, stream: Any = None) -> None:
    """One validation finding on its own line."""
    stream = stream or sys.stdout
    text = _said(item.render())
    if _styled(stream):
        colour = "red" if item.is_error else "yellow"
        label = item.severity.value
        _console(stream is sys.stderr).print(f"[{colour}]{label}:[/{colour}] {_escape(text[len(label) + 2:])}")
    else:
        print(text, file=stream, flush=True)


def data(obj: Any, fmt: OutputFormat) -> None:
    """Machine-readable output on stdout."""
    if fmt is OutputFormat.json:
        text = json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"
    else:
        import yaml

        text = yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True)
    sys.stdout.write(_scrub(text))
    sys.stdout.flush()


def text(content: str, *, own_words: bool = False) -> None:
    """Text for stdout as it is (manifests, describe's events), scrubbed like everything else (`own_words`: text made
    without the secrets, whose words a short secret only matches by chance; det_k8s/scrub_output.py:scrub)."""
    sys.stdout.write(_scrub(content, own_words=own_words))
    sys.stdout.flush()


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    """A table on stdout with upper-case headers: Rich on a styled terminal, aligned plain columns otherwise."""
    headers = [c.upper() for c in columns]
    if _styled(sys.stdout):
        cells = [["" if c is None else printable(_scrub(str(c))) for c in row] for row in rows]
        from rich import box
        from rich.table import Table

        rich_table = Table(*headers, box=box.SIMPLE, title=title, header_style="bold", pad_edge=False)
        for row in cells:
            rich_table.add_row(*(_escape(c) for c in row))
        _console(False).print(rich_table)
        return
    cells = [["" if c is None else printable(str(c)) for c in row] for row in rows]
    widths = [_width(c) for c in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], _width(cell))
    lines = [title] if title else []
    lines.append("   ".join(_pad(c, widths[i]) for i, c in enumerate(headers)).rstrip())
    lines.extend("   ".join(_pad(cell, widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells)
    text("\n".join(lines) + "\n")  # scrubbed once, as a whole: a 30,000-row table costs one pass


def _width(text: str) -> int:
    """The columns `text` takes on a terminal: a CJK character or an emoji takes two, a combining mark none."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len  # only for a cell that is not ASCII

    return int(cell_len(text))


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def diff_lines(title: str, lines: Sequence[str]) -> None:
    """One object's unified diff on stdout: the title, then `+`/`-` lines (green/red on a styled terminal)."""
    title, lines = _scrub(title), [_scrub(line) for line in lines]
    if not _styled(sys.stdout):
        print(title)
        for line in lines:
            print(line)
        print()
        sys.stdout.flush()
        return
    from rich.text import Text

    console = _console(False)
    console.print(Text(title, style="bold"))
    for line in lines:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else (
            "cyan" if line.startswith("@@") else "")
        console.print(Text(line, style=style))
    console.print()


def key_values(pairs: Mapping[str, Any]) -> None:
    """`Key: value` lines on stdout (describe-style output)."""
    width = max((len(k) for k in pairs), default=0)
    for key, value in pairs.items():
        print(_scrub(f"{(key + ':').ljust(width + 1)} {printable(str(value))}"))
    sys.stdout.flush()


@contextlib.contextmanager
def spinner(text: str) -> Iterator[None]:
    """A spinner on stderr while waiting, only on a terminal that can redraw a line."""
    if not _animated(sys.stderr):
        yield
        return
    with _console(True).status(text):
        yield
