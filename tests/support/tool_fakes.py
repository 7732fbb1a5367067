"""Recording fakes for helm and kubectl: small executables placed first on PATH.

Each fake is a Python script in its own directory. It appends every invocation (argv and the
names of the environment variables it received) to `calls.jsonl` beside itself and answers from
`responses.json`: the first rule whose argv prefix matches; with `delegate_to(real)`, calls no rule
answers run the real binary. They stand in only for the calls that need a live cluster; everything
that does not is tested with the real binaries.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = """#!{python}
import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
modes = {{a: oct(os.stat(a).st_mode & 0o777) for a in args if a.startswith("/") and os.path.exists(a)}}
for a in list(modes):
    modes[os.path.dirname(a)] = oct(os.stat(os.path.dirname(a)).st_mode & 0o777)
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({{"argv": args, "env": sorted(os.environ), "modes": modes}}) + "\\n")
with open(os.path.join(here, "responses.json")) as handle:
    rules = json.load(handle)
render = args[:1] == ["template"] or "--dry-run=client" in args  # helm rendering: needs no cluster
render_delegate = os.path.join(here, "render-delegate")
for rule in rules:
    if render and os.path.exists(render_delegate) and rule["prefix"][:1] != ["template"] \
            and "--dry-run=client" not in rule["prefix"]:
        continue  # (a rule for `install`/`upgrade` is not about rendering: see `render_with`)
    if args[:len(rule["prefix"])] == rule["prefix"]:
        sys.stdout.write(rule["stdout"])
        sys.stderr.write(rule["stderr"])
        sys.exit(rule["rc"])
if render and os.path.exists(render_delegate):
    real = open(render_delegate).read().strip()
    os.execv(real, [real, *args])
delegate = os.path.join(here, "delegate")
if os.path.exists(delegate):  # calls that need no cluster go to the real binary
    real = open(delegate).read().strip()
    os.execv(real, [real, *args])
sys.exit(0)
"""

HELM_VERSIONS = {3: "v3.17.3+ge4da497", 4: "v4.1.4+g05fa379"}
KUBECTL_VERSION = json.dumps({"clientVersion": {"major": "1", "minor": "35", "gitVersion": "v1.35.2"}})


@dataclass
class FakeTool:
    directory: Path
    name: str
    major: int = 0

    @property
    def path(self) -> Path:
        return self.directory / self.name

    def _rules(self) -> list[dict[str, Any]]:
        return json.loads((self.directory / "responses.json").read_text())

    def respond(self, *prefix: str, stdout: str = "", stderr: str = "", rc: int = 0) -> None:
        """Answer invocations starting with `prefix` (newest rule first)."""
        rules = [{"prefix": list(prefix), "stdout": stdout, "stderr": stderr, "rc": rc}, *self._rules()]
        (self.directory / "responses.json").write_text(json.dumps(rules))

    def modes(self, argv: list[str]) -> dict[str, str]:
        """Permissions of the paths an invocation named, as they were while it ran."""
        return next(c["modes"] for c in self.invocations() if c["argv"] == argv)

    def invocations(self) -> list[dict[str, Any]]:
        log = self.directory / "calls.jsonl"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line]

    @property
    def calls(self) -> list[list[str]]:
        """Every argv except the version probe."""
        return [c["argv"] for c in self.invocations() if c["argv"][:1] != ["version"]]

    @property
    def all_calls(self) -> list[list[str]]:
        return [c["argv"] for c in self.invocations()]

    def render_with(self, real: Path) -> None:
        """Rendering (`template`, `install --dry-run=client`) runs the real binary unless a rule names it."""
        (self.directory / "render-delegate").write_text(str(real))

    @property
    def cluster_calls(self) -> list[list[str]]:
        """`calls` without the renders (which need no cluster and run the real binary, see `render_with`)."""
        return [c for c in self.calls if not (c[:1] == ["template"] or "--dry-run=client" in c)]

    def delegate_to(self, real: Path) -> None:
        """Calls no rule answers run the real binary (for what needs no cluster: rendering, linting)."""
        (self.directory / "delegate").write_text(str(real))


def make_fake(directory: Path, name: str, version_stdout: str) -> FakeTool:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (directory / "responses.json").write_text("[]")
    fake = FakeTool(directory, name)
    fake.respond("version", stdout=version_stdout + "\n")
    return fake


def put_first_on_path(directory: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ.get('PATH', '')}")
