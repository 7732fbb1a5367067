"""Every command README.md, the documentation pages (docs/**/*.md) and the examples' comments show runs as printed
and shows what the text says.

The commands are extracted from the ```sh blocks of README.md and of every page under docs/ (a `det-k8s ...` line,
`\\` continuations joined, a trailing `# comment` dropped) and from the `#   det-k8s ...` lines of the files under
examples/. A command runs here when it needs no cluster and every file it names is in the repository: the real entry
point in a subprocess, from the repository root, piped (as a reader copying the lines would see it). It must exit as
the text implies (0; validate's documented errors 1), and every output line the text prints under it (`#   ...`
paragraphs, `...` eliding, a pod name's hash free) must be in its output. Every other command is accounted for
here: it needs a cluster, or a file of the reader's own (site.yaml): a new command in the README or a page is never
skipped silently. A command printed alike in several places (the README's examples are also on their pages) runs
once.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Commands that talk to a cluster (or a registry), by their first words.
CLUSTER = ("install", "upgrade", "uninstall", "status", "diff", "get", "history", "rollback", "list", "pods",
           "nodes list", "nodes label", "nodes unlabel", "nodes taint", "nodes check-gpu", "experiment",
           "scheduler run", "scheduler policy", "queues", "doctor", "checkpoint check")  # the last: the storage
# ...unless an option makes them offline.
OFFLINE_WITH = {"install": "--dry-run", "nodes map": "--snapshot"}
# Files a reader brings: a command naming one shows the syntax, it cannot run as printed here.
READERS_FILES = ("site.yaml", "exp-a.yaml", "exp-b.yaml", "snapshot.json", "./determined-helm-chart",
                 "search.yaml", "cluster.svg", "cluster.html")


@dataclass
class Documented:
    where: str
    argv: list[str]
    expected: list[str] = field(default_factory=list)  # output paragraphs the text shows under it

    @property
    def words(self) -> str:
        return " ".join(a for a in self.argv[1:3] if not a.startswith("-"))


def _paragraphs(comments: list[str]) -> list[str]:
    """`#   text` lines after a command: a paragraph per line starting at the first column, deeper lines
    continuing it; paragraphs in parentheses are the text's own remarks, not output."""
    paragraphs: list[list[str]] = []
    for line in comments:
        body = line[1:]
        if not body.strip():
            continue
        if body.startswith("   ") and not body.startswith("    ") or not paragraphs:
            paragraphs.append([body.strip()])
        else:
            paragraphs[-1].append(body.strip())
    texts = [" ".join(p) for p in paragraphs]
    return [t for t in texts if not t.startswith("(") and not t.startswith("...")]


def _command(text: str) -> list[str]:
    """The words of a command line, without a trailing comment, up to a pipe (`... | kubectl apply -f -`: the
    det-k8s part is what runs here)."""
    code = text.split("  #", 1)[0].split(" # ", 1)[0].strip()
    words = shlex.split(code)
    return words[:words.index("|")] if "|" in words else words


def page_commands(path: Path) -> list[Documented]:
    """The `det-k8s ...` commands of one Markdown file's ```sh blocks, each with the output its comment shows."""
    found: list[Documented] = []
    text = path.read_text()
    name = path.relative_to(ROOT).as_posix()
    for block_start, block in ((m.start(), m[1]) for m in re.finditer(r"```sh\n(.*?)```", text, re.DOTALL)):
        line_no = text.count("\n", 0, block_start) + 2
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            start = i
            if line.startswith("det-k8s "):
                joined = line
                while joined.split("  #", 1)[0].rstrip().endswith("\\"):
                    i += 1
                    joined = joined.split("  #", 1)[0].rstrip()[:-1] + " " + lines[i].strip()
                comments = []
                while i + 1 < len(lines) and lines[i + 1].startswith("#"):
                    i += 1
                    comments.append(lines[i])
                found.append(Documented(f"{name}:{line_no + start}", _command(joined), _paragraphs(comments)))
            i += 1
    return found


def readme_commands() -> list[Documented]:
    return page_commands(ROOT / "README.md")


DOCS_PAGES = sorted((ROOT / "docs").rglob("*.md"))


def docs_commands() -> list[Documented]:
    return [command for page in DOCS_PAGES for command in page_commands(page)]


def example_commands() -> list[Documented]:
    found: list[Documented] = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines):
            if not line.startswith("#   det-k8s "):
                continue
            joined = line[1:].strip()
            following = number
            while joined.endswith("\\"):
                following += 1
                joined = joined[:-1] + " " + lines[following][1:].strip()
            comments = []
            while following + 1 < len(lines) and lines[following + 1].startswith("#   ") and not lines[
                    following + 1].startswith("#   det-k8s "):
                following += 1
                comments.append(lines[following])
            found.append(Documented(f"{path.relative_to(ROOT)}:{number + 1}", _command(joined),
                                    _paragraphs(comments)))
    return found


def why_not_run(command: Documented) -> str | None:
    """None when the command runs offline here as printed; else why not."""
    argv = command.argv
    if any(token in (">", "&&") or token.startswith("[") or token.startswith("2>") for token in argv) or (
            "|" in argv and argv.index("|") == 1):
        return "a shell pipeline or optional parts"
    if "|" in "".join(argv):  # pause|resume|kill: one of
        return "a shell pipeline or optional parts"
        return "a shell pipeline or optional parts"
    words = command.words
    if any(words.startswith(name) for name in CLUSTER) and not any(
            words.startswith(name) and flag in argv for name, flag in OFFLINE_WITH.items()):
        return "needs a cluster"
    if words.startswith("nodes map") and "--snapshot" not in argv:
        return "needs a cluster"
    if any(name in argv or name.lstrip("./") in argv for name in READERS_FILES):
        return "names a file of the reader's own"
    return None


ALL = readme_commands() + docs_commands() + example_commands()


def _once(commands: list[Documented]) -> list[Documented]:
    """The runnable commands, each command with the same shown output once (where it is first printed)."""
    first: dict[tuple[tuple[str, ...], tuple[str, ...]], Documented] = {}
    for command in commands:
        if why_not_run(command) is None:
            first.setdefault((tuple(command.argv), tuple(command.expected)), command)
    return list(first.values())


RUNNABLE = _once(ALL)


def test_the_documents_commands_are_found_and_each_is_run_or_accounted_for():
    assert len(ALL) >= 40
    assert len(RUNNABLE) >= 15
    assert all(c.argv[0] == "det-k8s" for c in ALL)
    reasons = {why_not_run(c) for c in ALL} - {None}
    assert reasons <= {"a shell pipeline or optional parts", "needs a cluster", "names a file of the reader's own"}
    for command in RUNNABLE:  # every file it names is in the repository
        for arg in command.argv:
            if arg.endswith((".yaml", ".json")) and not arg.startswith("out/"):
                assert (ROOT / arg).exists(), f"{command.where}: {arg} is not in the repository"
    assert any(c.expected for c in RUNNABLE if c.where.startswith("examples/"))
    assert any(c.where.startswith("README.md:") for c in RUNNABLE)  # the README's examples run


def test_every_page_with_commands_is_read():
    """The pages that print commands are read (a page renamed or emptied by mistake fails here, not silently)."""
    pages = {c.where.rsplit(":", 1)[0] for c in ALL}
    assert {"README.md", "docs/chart.md", "docs/release.md", "docs/scheduling.md", "docs/experiments.md",
            "docs/determined-master.md", "docs/gpu-map.md"} <= pages, sorted(pages)
    assert DOCS_PAGES and all(page.suffix == ".md" for page in DOCS_PAGES)


def _pattern(paragraph: str) -> re.Pattern[str]:
    parts = []
    for piece in re.split(r"(\.\.\.|\s+|[0-9a-f]{8})", paragraph):
        if not piece:
            continue
        if piece == "...":
            parts.append(r".*?")
        elif piece.isspace():
            parts.append(r"\s+")
        elif re.fullmatch(r"[0-9a-f]{8}", piece) and re.search(r"\d", piece):
            parts.append(r"[0-9a-f]{8}")  # a pod name's hash
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts), re.DOTALL)


@pytest.mark.parametrize("command", RUNNABLE, ids=[f"{c.where}" for c in RUNNABLE])
def test_a_documented_command_runs_as_printed_and_shows_what_the_text_says(command, tmp_path):
    argv = [("--output-dir" if a in ("-o",) and command.words == "render" else a) for a in command.argv[1:]]
    argv = [str(tmp_path / a) if a.startswith("out/") else a for a in argv]  # written into the test's directory
    env = {k: v for k, v in os.environ.items() if k not in ("HELM_NAMESPACE", "HELM_KUBECONTEXT", "COLUMNS")}
    env.update(KUBECONFIG=str(tmp_path / "no-kubeconfig"), HOME=str(tmp_path), NO_COLOR="1",
               PATH=f"{ROOT / '.tools' / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    result = subprocess.run([sys.executable, "-m", "det_k8s", *argv], cwd=ROOT, capture_output=True, text=True,
                            env=env, timeout=120)
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown and "internal error" not in shown, shown
    documented_errors = any(p.startswith("error:") for p in command.expected)
    assert result.returncode == (1 if documented_errors else 0), f"{command.where}: {shlex.join(command.argv)}\n{shown}"
    for paragraph in command.expected:
        assert _pattern(paragraph).search(shown), f"{command.where}: the text shows\n  {paragraph}\nbut it printed\n{shown}"
