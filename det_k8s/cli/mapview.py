"""Drawing an `OccupancyMap`: one row per node and one cell per slot, or a summary per pool.

The same lines serve every output: Rich on a terminal (holders in colour, planned slots
highlighted, evicted ones struck through), plain ASCII when piped, with NO_COLOR or TERM=dumb,
and SVG or HTML files through Rich's own export (`Console(record=True)`). A cell is one character
per key letter: `A` a running holder (see the legend), `a` where the plan starts that group, `x` a
slot the plan frees by eviction, `.` free, `#` other pods, `~` reserved for a waiting group, `-`
terminating. Rows never wrap: when the rows do not fit the width (or there are more than
`MAX_ROWS` nodes), each pool is summarised instead: how many nodes have 0, 1, ... N slots free,
and the largest free blocks.
"""

from __future__ import annotations

import html
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..quantity import format_decimal
from ..scheduling.occupancy import Cell, CellKind, Holder, NodeRow, OccupancyMap
from .output import UNPRINTABLE, _is_tty

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

MAX_ROWS = 200  # more nodes than this are summarised, whatever the width
MIN_WIDTH = 20  # a narrower terminal is drawn for as 20 columns
STATE_ROOM = 24  # characters of a node's state a row must have room for (else the pools are summarised)
LEGEND_IN_SUMMARY = 8  # holders listed under a summary: reserved-for, evicted and planned first, then the largest
# Letters are black (grey0, never the theme's "black") on colours lighter than WCAG's AA contrast asks (4.5:1),
# the other styles likewise; 256-colour names, which no terminal or SVG theme remaps (`test_map_styles_contrast`).
PALETTE = ("dodger_blue1", "medium_orchid1", "dark_cyan", "orange3", "deep_pink1", "chartreuse3", "steel_blue",
           "gold3", "medium_purple1", "turquoise2", "indian_red1", "dark_olive_green3")
GLYPH = {CellKind.FREE: ".", CellKind.FOREIGN: "#", CellKind.RESERVED: "~", CellKind.TERMINATING: "-",
         CellKind.DRA: "%"}
STYLE = {CellKind.FREE: "grey62", CellKind.FOREIGN: "grey85 on grey30", CellKind.RESERVED: "bold yellow1 on grey23",
         CellKind.TERMINATING: "grey66 on grey19", CellKind.DRA: "bold orchid1 on grey15"}
PLANNED_STYLE = "bold grey0 on green1"
REPLACING_STYLE = "bold grey0 on dark_orange"  # planned where an evicted group runs now
VICTIM_STYLE = "bold strike grey100 on red3"
KINDS = {"det-k8s": "det-k8s group", "determined": "Determined task", "queue": "team queue"}
_CONTROL = UNPRINTABLE  # names from a hand-edited snapshot never drive the terminal


@dataclass(frozen=True)
class Note:
    """A line under the map: a group the plan did not place (or placed by preempting), and why."""

    name: str
    status: str
    reason: str


@dataclass
class View:
    """How to draw: `plain` ASCII or Rich styles; `width` None for a file (as wide as it needs)."""

    plain: bool
    width: int | None
    summary: bool | None = None  # None: when the rows do not fit or there are too many


class _Lines:
    """Rich Text lines, styled only when the view is not plain."""

    def __init__(self, view: View) -> None:
        from rich.text import Text

        self.view = view
        self.lines: list[Text] = []
        self._text = Text

    def new(self) -> Text:
        line = self._text()
        self.lines.append(line)
        return line

    def add(self, line: Text, text: str, style: str = "") -> None:
        line.append(text.translate(_CONTROL), style=None if self.view.plain or not style else style)

    def blank(self) -> None:
        self.new()


def holder_style(index: int) -> str:
    return f"bold grey0 on {PALETTE[index % len(PALETTE)]}"


def _cell(cell: Cell, width: int, plain: bool, styles: dict[str, str]) -> tuple[str, str]:
    """(text, style) of one cell."""
    if cell.kind is CellKind.VICTIM:
        if cell.planned:
            return cell.planned.lower(), REPLACING_STYLE
        return ("x" * width, "") if plain else (cell.holder or "x" * width, VICTIM_STYLE)
    if cell.kind is CellKind.PLANNED:
        return (cell.holder or "?").lower(), PLANNED_STYLE
    if cell.kind in (CellKind.DET_K8S, CellKind.DETERMINED):
        key = cell.holder or "?"
        return key, styles.get(key, "")
    return GLYPH[cell.kind] * width, STYLE[cell.kind]


def _styles(omap: OccupancyMap) -> dict[str, str]:
    return {key: holder_style(i) for i, key in enumerate(omap.holders)}


def _key_width(omap: OccupancyMap) -> int:
    return max((len(key) for key in omap.holders), default=1)


def _cells_width(row: NodeRow, key_width: int) -> int:
    return row.drawn * key_width + (row.drawn - 1 if key_width > 1 and row.drawn else 0)


def _fit(text: str, room: int, plain: bool) -> str:
    if room <= 0:
        return ""
    if len(text) <= room:
        return text
    ellipsis = "..." if plain else "…"
    return text[: max(room - len(ellipsis), 0)] + ellipsis


def _amount(unit_size: int) -> str:
    return format_decimal(Fraction(unit_size, 1000))


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def title(omap: OccupancyMap, after_plan: bool) -> tuple[str, str]:
    """What the map shows, and its cells counted by kind (the counts add up to the slots)."""
    unit = omap.unit
    what = f"GPU slots ({unit.resource})" if unit.slot_type == "gpu" else f"CPU slots ({_amount(unit.size)} CPUs each)"
    slots = sum(row.slots for row in omap.rows)
    by = f", by {omap.group_by}" if omap.group_by else ""
    head = f"{'After the plan' if after_plan else 'Now'}: {slots:,} {what} on {plural(len(omap.rows), 'node')}{by}"
    replacing = sum(1 for row in omap.rows for cell in row.cells if cell.planned)
    freed = omap.count(CellKind.VICTIM) - replacing
    held = omap.count(CellKind.DET_K8S) + omap.count(CellKind.DETERMINED)
    parts = [f"{held:,} held by det-k8s and Determined", f"{omap.count(CellKind.FOREIGN):,} by other pods"]
    if omap.count(CellKind.TERMINATING):
        parts.append(f"{omap.count(CellKind.TERMINATING):,} terminating")
    if omap.count(CellKind.DRA):
        parts.append(f"{omap.count(CellKind.DRA):,} managed by DRA")
    if after_plan:
        planned = omap.count(CellKind.PLANNED) + replacing
        parts.append(f"{planned:,} planned" + (f" ({replacing:,} in place of evicted groups)" if replacing else ""))
        if freed:
            parts.append(f"{freed:,} freed by eviction")
    if omap.count(CellKind.RESERVED):
        parts.append(f"{omap.count(CellKind.RESERVED):,} reserved")
    free, usable = omap.count(CellKind.FREE), omap.usable_free
    parts.append(f"{free:,} free" + (f" ({usable:,} where Determined's pods may run)" if usable != free else ""))
    return head, ", ".join(parts)


def _pool_header(name: str, rows: Sequence[NodeRow], group_by: str | None) -> str:
    slots = sum(row.slots for row in rows)
    free = sum(row.free for row in rows)
    usable = sum(row.free for row in rows if row.available)
    label = name or f"(no {group_by} label)"
    return (f"{label}: {plural(len(rows), 'node')}, {slots:,} slots, {free:,} free"
            + (f" ({usable:,} usable)" if usable != free else ""))


def _full(omap: OccupancyMap, view: View, out: _Lines) -> None:
    plain = view.plain
    key_width = _key_width(omap)
    styles = _styles(omap)
    name_width = max((len(row.name) for row in omap.rows), default=0)
    cells_width = max((_cells_width(row, key_width) for row in omap.rows), default=0)
    count_width = max((len(f"{row.free} free") for row in omap.rows), default=0)
    fixed = 2 + name_width + 2 + cells_width + 2 + count_width
    pool: str | None = None
    for row in omap.rows:
        if omap.group_by and row.pool != pool:
            pool = row.pool
            same = [r for r in omap.rows if r.pool == pool]
            out.add(out.new(), _fit(_pool_header(pool, same, omap.group_by), view.width or 10**6, plain), "bold")
        line = out.new()
        out.add(line, "  " + row.name.ljust(name_width) + "  ")
        for index, cell in enumerate(row.cells):
            if index and key_width > 1:
                out.add(line, " ")
            text, style = _cell(cell, key_width, plain, styles)
            out.add(line, text, style)
        out.add(line, " " * (cells_width - _cells_width(row, key_width)) + "  ")
        out.add(line, f"{row.free} free".rjust(count_width), "" if row.free else "grey50")
        if row.states:
            room = (view.width - fixed - 2) if view.width else 10**6
            out.add(line, "  " + _fit(", ".join(row.states), room, plain), "bold red" if not row.available else "yellow")
    out.blank()
    _legend(omap, view, out, list(omap.holders.values()), styles)


def _replacing(omap: OccupancyMap) -> dict[str, dict[str, int]]:
    """planned key -> {evicted key: slots}: where a planned group starts in place of evicted groups."""
    out: dict[str, dict[str, int]] = {}
    for row in omap.rows:
        for cell in row.cells:
            if cell.planned and cell.holder:
                victims = out.setdefault(cell.planned, {})
                victims[cell.holder] = victims.get(cell.holder, 0) + 1
    return out


def _replaced(victims: dict[str, int]) -> str:
    """`; 4 slots in place of E`."""
    if not victims:
        return ""
    return f"; {plural(sum(victims.values()), 'slot')} in place of {', '.join(sorted(victims))}"


def _holder_line(holder: Holder, replacing: dict[str, dict[str, int]]) -> list[str]:
    kind = KINDS.get(holder.kind, holder.kind)
    what = {"running": kind, "terminating": f"{kind}, terminating", "evicted": f"{kind}, evicted",
            "planned": f"planned, {plural(holder.pods, 'pod')}{_replaced(replacing.get(holder.key, {}))}",
            "reserving": "waiting; nodes reserved for it"}.get(holder.status, holder.status)
    priority = f"priority {holder.priority}" if holder.priority is not None else "priority -"
    slots = f"{holder.slots} reserved" if holder.status == "reserving" else plural(holder.slots, "slot")
    return [holder.name, holder.user or "-", priority, slots, what]


def _legend(omap: OccupancyMap, view: View, out: _Lines, holders: Sequence[Holder], styles: dict[str, str],
            more: int = 0) -> None:
    plain = view.plain
    replacing = _replacing(omap)
    rows = [(holder, _holder_line(holder, replacing)) for holder in holders]
    widths = [max((len(cells[i]) for _, cells in rows), default=0) for i in range(5)]
    for holder, cells in rows:
        line = out.new()
        out.add(line, "  ")
        if holder.status == "planned":
            out.add(line, holder.key.lower(), PLANNED_STYLE)
        elif holder.status == "evicted":
            out.add(line, holder.key, VICTIM_STYLE)
        elif holder.status == "reserving":
            out.add(line, "~" * len(holder.key), STYLE[CellKind.RESERVED])
        else:
            out.add(line, holder.key, styles.get(holder.key, ""))
        text = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)).rstrip()
        room = (view.width - 4 - len(holder.key)) if view.width else 10**6
        out.add(line, "  " + _fit(text, room, plain))
    if more:
        out.add(out.new(), f"  ... and {more} more (-o json lists every holder)")
    symbols = []
    kinds = {cell.kind for row in omap.rows for cell in row.cells}
    for kind, text in ((CellKind.FREE, "free"), (CellKind.FOREIGN, "other pods"),
                       (CellKind.TERMINATING, "terminating"), (CellKind.RESERVED, "reserved for a waiting group"),
                       (CellKind.DRA, "GPU managed by DRA: det-k8s allocates no claims, so it places no pod there (a "
                                      "device plugin would; or let kube-scheduler place such pods)")):
        if kind in kinds:
            symbols.append((GLYPH[kind], STYLE[kind], text))
    if CellKind.PLANNED in kinds or replacing:
        symbols.append(("a-z", PLANNED_STYLE, "planned (the group's key, lowercase)"))
    if replacing and not plain:
        symbols.append(("a-z", REPLACING_STYLE, "planned where an evicted group runs now"))
    if any(c.kind is CellKind.VICTIM and not c.planned for row in omap.rows for c in row.cells):
        symbols.append(("x", VICTIM_STYLE, "freed by eviction"))
    if symbols:
        line = out.new()
        out.add(line, "  ")
        used = 2
        for glyph, style, text in symbols:
            piece = f"{text}   "
            if view.width and used + len(glyph) + 1 + len(piece) > view.width and used > 2:
                line = out.new()
                out.add(line, "  ")
                used = 2
            out.add(line, glyph, style)
            out.add(line, " " + piece)
            used += len(glyph) + 1 + len(piece)
        line.rstrip()


def _summary(omap: OccupancyMap, view: View, out: _Lines) -> None:
    plain = view.plain
    width = view.width or 10**6
    replacing: dict[str, int] = {}  # per pool: evicted groups' slots a planned group takes
    for node in omap.rows:
        for cell in node.cells:
            if cell.planned:
                replacing[node.pool] = replacing.get(node.pool, 0) + 1
    for pool in omap.pools():
        label = pool.name or (f"(no {omap.group_by} label)" if omap.group_by else "all nodes")
        counts = pool.counts
        held = counts.get("det-k8s", 0) + counts.get("determined", 0)
        taken = replacing.get(pool.name, 0)
        parts = [f"{held:,} held", f"{counts.get('foreign', 0):,} other"]
        for kind, amount in (("terminating", counts.get("terminating", 0)), ("planned", counts.get("planned", 0) + taken),
                             ("freed by eviction", counts.get("victim", 0) - taken),
                             ("reserved", counts.get("reserved", 0))):
            if amount:
                parts.append(f"{amount:,} {kind}")
        parts.append(f"{pool.free:,} free")
        header = f"{label}: {plural(pool.nodes, 'node')}, {pool.slots:,} slots: " + ", ".join(parts)
        if pool.unavailable:
            header += "; unavailable: " + ", ".join(f"{n:,} {cause}" for cause, n in pool.unavailable)
        for index, piece in enumerate(textwrap.wrap(header, width, subsequent_indent="  ", break_on_hyphens=False)):
            out.add(out.new(), piece, "bold" if index == 0 else "")
        if pool.histogram:
            heads = ["free slots"] + [str(free) for free, _ in pool.histogram]
            values = ["nodes"] + [f"{nodes:,}" for _, nodes in pool.histogram]
            columns = [max(len(h), len(v)) for h, v in zip(heads, values, strict=True)]
            start = 1
            while start < len(heads):  # as many columns per pair of lines as the width allows
                end, used = start, 4 + columns[0]
                while end < len(heads) and (used + 2 + columns[end] <= width or end == start):
                    used += 2 + columns[end]
                    end += 1
                for cells in (heads, values):
                    line = out.new()
                    out.add(line, "  " + cells[0].ljust(columns[0]))
                    for i in range(start, end):
                        out.add(line, "  " + cells[i].rjust(columns[i]), "bold" if cells is heads else "")
                start = end
        else:
            for piece in textwrap.wrap("no node of this pool can take Determined's pods now", max(width - 2, 8)):
                out.add(out.new(), "  " + piece)
        if pool.largest:
            blocks = ", ".join(f"{node} {free}" for node, free in pool.largest)
            out.add(out.new(), "  " + _fit(f"largest free blocks: {blocks}", width - 2, plain))
        out.blank()
    # the group reserved for and the evicted first, then planned groups, then the largest holders
    rank = {"reserving": 0, "evicted": 1, "planned": 2}
    chosen = sorted(omap.holders.values(), key=lambda h: (rank.get(h.status, 3), -h.slots, h.key))
    position = {key: i for i, key in enumerate(omap.holders)}
    shown = sorted(chosen[:LEGEND_IN_SUMMARY], key=lambda h: position[h.key])
    _legend(omap, view, out, shown, _styles(omap), more=len(omap.holders) - len(shown))


def fits(omap: OccupancyMap, width: int | None) -> bool:
    """Whether one row per node fits: no more than MAX_ROWS nodes, and every row's cells within the width."""
    if len(omap.rows) > MAX_ROWS:
        return False
    if width is None:
        return True
    key_width = _key_width(omap)
    name_width = max((len(row.name) for row in omap.rows), default=0)
    cells_width = max((_cells_width(row, key_width) for row in omap.rows), default=0)
    count_width = max((len(f"{row.free} free") for row in omap.rows), default=0)
    # a node's state (cordoned, NotReady, a taint) must show, or an unusable node reads as free: room for it whole,
    # or for STATE_ROOM characters of it
    states = max((min(len(", ".join(row.states)), STATE_ROOM) + 2 for row in omap.rows if row.states), default=0)
    return 2 + name_width + 2 + cells_width + 2 + count_width + states <= width


def render(omap: OccupancyMap, view: View, *, after_plan: bool = False, notes: Sequence[Note] = ()) -> list[Text]:
    """The map as lines: the title, the rows (or the pool summaries), the legend, then the notes."""
    out = _Lines(view)
    head, counts = title(omap, after_plan)
    width = view.width or 10**6
    out.add(out.new(), _fit(head, width, view.plain), "bold")
    for piece in textwrap.wrap(counts, width, break_on_hyphens=False) or [""]:
        out.add(out.new(), piece)
    out.blank()
    if not omap.rows:
        out.add(out.new(), "no node offers " + ("GPUs" if omap.unit.slot_type == "gpu" else "CPU slots"))
    else:
        summary = view.summary if view.summary is not None else not fits(omap, view.width)
        (_summary if summary else _full)(omap, view, out)
    if omap.without_slots:
        names = ", ".join(omap.without_slots[:5]) + (", ..." if len(omap.without_slots) > 5 else "")
        out.add(out.new(), _fit(f"  {plural(len(omap.without_slots), 'node')} without slots not shown: {names}",
                                view.width or 10**6, view.plain), "grey50")
    for heading, group in (("Not placed, and why", [n for n in notes if n.status != "placed"]),
                           ("Placed by preempting", [n for n in notes if n.status == "placed"])):
        if not group:
            continue
        out.blank()
        out.add(out.new(), heading, "bold")
        for note in group:
            line = out.new()
            name_room = (view.width - 2 - len(note.status) - 2) if view.width else 10**6
            out.add(line, f"  {_fit(note.name, max(name_room, 8), view.plain)}", "bold")
            out.add(line, f"  {note.status}", "yellow" if note.status == "queued" else
                    "red" if note.status == "rejected" else "green")
            wrap = max((view.width or 10**6) - 4, 8)
            for piece in textwrap.wrap(note.reason, wrap, break_on_hyphens=False) or [""]:
                out.add(out.new(), "    " + piece)
    while out.lines and not out.lines[-1].plain:
        out.lines.pop()
    return out.lines


# -- output -----------------------------------------------------------------------------------------


def plain_output() -> bool:
    """Plain ASCII unless stdout is a terminal that takes colour (NO_COLOR and TERM=dumb say no)."""
    return (not _is_tty(sys.stdout) or "NO_COLOR" in os.environ and os.environ["NO_COLOR"] != ""
            or os.environ.get("TERM") == "dumb")


def terminal_width() -> int | None:
    """The terminal's width, or COLUMNS when set. Piped without COLUMNS: None, lines as long as they need (piped
    text is whole, never cut or wrapped at an assumed 80 columns). At least MIN_WIDTH: narrower, words would be
    wrapped one letter a line."""
    import shutil

    if not _is_tty(sys.stdout) and not os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    return max(shutil.get_terminal_size((80, 24)).columns, MIN_WIDTH)


def show(omap: OccupancyMap, *, summary: bool | None = None, after_plan: bool = False,
         notes: Sequence[Note] = ()) -> None:
    """The map on stdout: Rich on a colour terminal, plain ASCII otherwise."""
    plain = plain_output()
    view = View(plain, terminal_width(), summary)
    lines = render(omap, view, after_plan=after_plan, notes=notes)
    if plain:
        sys.stdout.write("".join(line.plain.rstrip() + "\n" for line in lines))
        sys.stdout.flush()
        return
    console = _console()
    for line in lines:
        console.print(line, no_wrap=True, overflow="ellipsis", crop=True)


def _console(record: bool = False, width: int | None = None) -> Console:
    from rich.console import Console

    if record:
        import io

        return Console(record=True, file=io.StringIO(), width=width, force_terminal=True, color_system="truecolor",
                       highlight=False, no_color=False, legacy_windows=False)
    return Console(highlight=False)


def picture(omap: OccupancyMap, *, summary: bool | None = None, after_plan: bool = False,
            notes: Sequence[Note] = ()) -> Console:
    """A recording console holding the map as wide as it needs (Rich exports it as SVG or HTML)."""
    lines = render(omap, View(False, None, summary), after_plan=after_plan)  # the notes wrap to the map's width
    width = max(100, max((line.cell_len for line in lines), default=0))
    view = View(False, width, summary)
    console = _console(record=True, width=width)
    for line in render(omap, view, after_plan=after_plan, notes=notes):
        console.print(line, no_wrap=True, overflow="crop", crop=True)
    return console


# The SVG loads nothing: Rich's own template fetches Fira Code from a CDN; this copy of it names local monospace
# fonts only, and every character is placed at its own cell (`x` lists one position per glyph, no `textLength`
# stretching), so the cells line up whatever font the viewer has, offline too.
FONTS = "'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', 'Courier New', monospace"
SVG_TEMPLATE = """\
<svg class="rich-terminal" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">
    <!-- det-k8s, through Rich's SVG export; no external resources -->
    <style>
    .{unique_id}-matrix {{
        font-family: @FONTS@;
        font-size: {char_height}px;
        line-height: {line_height}px;
        font-variant-east-asian: full-width;
    }}

    .{unique_id}-title {{
        font-size: 18px;
        font-weight: bold;
        font-family: sans-serif;
    }}

    {styles}
    </style>

    <defs>
    <clipPath id="{unique_id}-clip-terminal">
      <rect x="0" y="0" width="{terminal_width}" height="{terminal_height}" />
    </clipPath>
    {lines}
    </defs>

    {chrome}
    <g transform="translate({terminal_x}, {terminal_y})" clip-path="url(#{unique_id}-clip-terminal)">
    {backgrounds}
    <g class="{unique_id}-matrix">
    {matrix}
    </g>
    </g>
</svg>
""".replace("@FONTS@", FONTS)
_TEXT = re.compile(r'<text class="(?P<cls>[^"]*)" x="(?P<x>[\d.]+)" y="(?P<y>[\d.]+)" textLength="(?P<len>[\d.]+)"'
                   r' clip-path="(?P<clip>[^"]*)">(?P<body>[^<]*)</text>')


def _placed(match: re.Match[str]) -> str:
    """One `<text>` of Rich's export with each character at its own cell."""
    from rich.cells import cell_len

    body = html.unescape(match["body"])
    step = float(match["len"]) / max(len(body), 1)  # Rich's width of one cell
    xs, at = [], float(match["x"])
    for char in body:
        xs.append(f"{at:.2f}".rstrip("0").rstrip("."))
        at += step * max(cell_len(char), 1)
    return (f'<text class="{match["cls"]}" x="{" ".join(xs)}" y="{match["y"]}" clip-path="{match["clip"]}">'
            f'{match["body"]}</text>')


def svg_of(console: Console, title: str) -> str:
    """Rich's SVG export of `console`, self-contained, every character at its cell."""
    return _TEXT.sub(_placed, console.export_svg(title=title, code_format=SVG_TEMPLATE))


def write_pictures(omap: OccupancyMap, *, svg: Path | None, html: Path | None, summary: bool | None = None,
                   after_plan: bool = False, notes: Sequence[Note] = (), title_text: str = "det-k8s nodes map") -> None:
    """Write the map as an SVG and/or an HTML file, through Rich's export; says where on stderr."""
    from . import output

    for path, kind in ((svg, "svg"), (html, "html")):
        if path is None:
            continue
        console = picture(omap, summary=summary, after_plan=after_plan, notes=notes)
        text = svg_of(console, title_text) if kind == "svg" else console.export_html(inline_styles=True)
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{path}: cannot write the {kind.upper()} file: {exc.strerror or exc}") from exc
        output.message(f"wrote {path}")
