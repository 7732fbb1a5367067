"""Write docs/reference/cli.md: every det-k8s command and subcommand (usage, help, arguments, options), from the Typer
app itself, so the reference cannot drift from the code.

    .venv/bin/python scripts/cli_reference.py           # rewrites docs/reference/cli.md
    .venv/bin/python scripts/cli_reference.py --check   # exit 1 when the committed file differs

tests/cli/test_cli_reference.py regenerates it in memory and compares. The output is the same on every machine: a
fixed width, no colour, no terminal (COLUMNS, NO_COLOR and TERM are set before Typer is imported).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "reference" / "cli.md"
UPDATE = ".venv/bin/python scripts/cli_reference.py"
FIXED_ENV = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}


def _escape(text: str) -> str:
    """Markdown-safe prose: outside `code spans`, the characters Markdown would take as markup or HTML."""
    pieces = text.split("`")
    for index in range(0, len(pieces), 2):  # the even pieces are outside code spans
        piece = pieces[index].replace("\\", "\\\\")
        for char in "*_[]|":
            piece = piece.replace(char, "\\" + char)
        pieces[index] = piece.replace("<", "&lt;").replace(">", "&gt;")
    if len(pieces) % 2 == 0:  # an unpaired backtick: keep it literal
        return "\\`".join(["`".join(pieces[:-1]), pieces[-1]])
    return "`".join(pieces)


def _help_paragraphs(text: str) -> list[str]:
    """A command's help as paragraphs: Click's `\\b` (no rewrap) markers dropped, lines of a paragraph joined."""
    cleaned = inspect.cleandoc(text).replace("\b", "")
    return [" ".join(line.strip() for line in block.splitlines()) for block in re.split(r"\n\s*\n", cleaned)
            if block.strip()]


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9-]", "", path.replace(" ", "-").lower())


def _command_markdown(command: Any, ctx: Any, level: int) -> list[str]:
    path = ctx.command_path
    lines = [f"{'#' * level} {path}", ""]
    if command.help:
        for paragraph in _help_paragraphs(command.help):
            lines += [_escape(paragraph), ""]
    usage = " ".join([path, *command.collect_usage_pieces(ctx)])
    lines += ["```text", f"Usage: {usage}", "```", ""]
    arguments = [p for p in command.get_params(ctx) if p.param_type_name == "argument"]
    options = [p for p in command.get_params(ctx) if p.param_type_name == "option"]
    if arguments:
        lines += ["**Arguments**", ""]
        for names, help_text in (record for record in (a.get_help_record(ctx) for a in arguments) if record):
            lines.append(f"- `{names}`: {_escape(' '.join(help_text.split()))}".rstrip(": "))
        lines.append("")
    records = [record for record in (option.get_help_record(ctx) for option in options) if record]
    if records:
        lines += ["**Options**", ""]
        for names, help_text in records:
            lines.append(f"- `{names}`: {_escape(' '.join(help_text.split()))}".rstrip(": "))
        lines.append("")
    if hasattr(command, "list_commands"):
        subcommands = [(name, command.get_command(ctx, name)) for name in command.list_commands(ctx)]
        subcommands = [(name, sub) for name, sub in subcommands if sub is not None and not sub.hidden]
        if subcommands:
            lines += ["**Commands**", ""]
            for name, sub in subcommands:
                summary = sub.get_short_help_str(limit=300)
                lines.append(f"- [`{name}`](#{_anchor(f'{path} {name}')}): {_escape(summary)}")
            lines.append("")
            for name, sub in subcommands:
                lines += _command_markdown(sub, sub.context_class(sub, info_name=name, parent=ctx), level + 1)
    return lines


def generate() -> str:
    """The whole reference, as Markdown."""
    os.environ.update(FIXED_ENV)
    from typer import main as typer_main

    from det_k8s.cli.app import build_app, plain_metavars

    root = plain_metavars(typer_main.get_command(build_app()))
    ctx = root.context_class(root, info_name="det-k8s", terminal_width=100, max_content_width=100)
    lines = ["# CLI reference", "",
             "Every det-k8s command, generated from the command-line app by `scripts/cli_reference.py`; do not edit "
             f"this page by hand. After changing a command, run `{UPDATE}`.", "",
             "Global options (`-n/--namespace`, `--kube-context`, `--kubeconfig`, `-v/--verbose`, `--debug`) go before "
             "or after the command, as with helm.", ""]
    body = _command_markdown(root, ctx, 2)
    text = "\n".join(lines + body).rstrip("\n") + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def main(argv: list[str]) -> int:
    text = generate()
    if argv == ["--check"]:
        if OUTPUT.exists() and OUTPUT.read_text() == text:
            return 0
        print(f"{OUTPUT.relative_to(ROOT)} is out of date; run {UPDATE}", file=sys.stderr)
        return 1
    if argv:
        print("usage: scripts/cli_reference.py [--check]", file=sys.stderr)
        return 2
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
