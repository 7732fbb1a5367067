"""A command builds an app holding only itself; what the user sees is the same as with the whole app."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest
from typer import main as typer_main

from det_k8s.cli.app import COMMANDS, COMPLETION_VARIABLE, _add, build_app, command_name, listed_order, plain_metavars
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["render", "-f", "x"], "render"),
        (["-n", "ml", "pods", "list"], "pods"),
        (["--namespace=ml", "--debug", "-vv", "plan", "--help"], "plan"),
        (["--kube-context", "c", "--kubeconfig", "k", "experiment", "list"], "experiment"),
        (["-n", "render", "nodes", "list"], "nodes"),  # "render" is the namespace here
        (["-nml", "pods"], None),  # attached values are not guessed at
        (["-vn", "ml", "pods"], None),
        (["--help"], None),
        (["--version"], None),
        (["rendr"], None),  # unknown: the whole app suggests the right name
        ([], None),
        (["-n"], None),
    ],
)
def test_the_command_is_found_only_when_certain(args, expected):
    assert command_name(args) == expected


def test_shell_completion_gets_the_whole_app(monkeypatch):
    monkeypatch.setenv(COMPLETION_VARIABLE, "complete_bash")
    assert command_name(["render"]) is None


def help_of(app, args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        plain_metavars(typer_main.get_command(app)).main(args=args, prog_name="det-k8s", standalone_mode=True)
    return out.getvalue()


def eager_app():
    """Every command imported and added up front, as a plain Typer group holds them."""
    app = build_app(only="render")
    for name in COMMANDS:
        if name != "render":
            _add(app, name)
    return app


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_commands_help_is_the_same_loaded_lazily_as_with_every_command_imported(name, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    lazy, eager = help_of(build_app(), [name, "--help"]), help_of(eager_app(), [name, "--help"])
    assert lazy == eager and f"Usage: det-k8s {name}" in lazy


def test_the_root_help_is_the_same_loaded_lazily(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert help_of(build_app(), ["--help"]) == help_of(eager_app(), ["--help"])
    assert listed_order() == list(typer_main.get_command(eager_app()).commands)


def test_the_lazy_group_imports_only_the_command_asked_for():
    group = typer_main.get_command(build_app())
    assert list(group.commands) == listed_order() and group.commands.loaded() == []
    assert "rendr" not in group.commands and "render" in group.commands and group.commands.loaded() == []
    assert group.get_command(None, "nodes").name == "nodes" and group.commands.loaded() == ["nodes"]
    assert group.get_command(None, "rendr") is None


def test_the_whole_app_lists_every_command(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    listed = [line.split()[0] for line in help_of(build_app(), ["--help"]).split("Commands:")[1].splitlines()
              if line.startswith("  ") and not line.startswith("   ")]
    assert sorted(listed) == sorted(COMMANDS)  # Typer lists single commands before command groups


def test_a_command_imports_no_other_command_module(tmp_path):
    probe = (
        "import sys; from det_k8s.cli import main; "
        f"main(['render', '-f', {str(ROOT / 'examples' / 'gpu-cluster.yaml')!r}, '-o', {str(tmp_path / 'c')!r}]); "
        "print(sorted(m for m in sys.modules if m.startswith('det_k8s.cli.')), file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    loaded = set(eval(result.stderr.strip().splitlines()[-1]))  # noqa: S307 - our probe's list of names
    other = {f"det_k8s.cli.{module}" for module, _, _ in COMMANDS.values()} - {"det_k8s.cli.commands.chart"}
    assert "det_k8s.cli.commands.chart" in loaded and not loaded & other


def test_an_unknown_command_still_gets_a_suggestion(run_cli):
    result = run_cli("rendr")
    assert result.code == 2 and "unknown command 'rendr'; did you mean 'render'?" in result.err


def _outcome(call):
    try:
        return "ok", call()
    except Exception as exc:  # noqa: BLE001 - the same error either way is what is compared
        return type(exc).__name__, str(exc)


def test_an_option_passed_over_typers_conversion_gets_what_typer_would_give_it():
    """PlainOption skips Typer's conversion (pydantic, from Typer 0.29) where it would change nothing: every option
    of every command, with values as Click hands them over, gets the same value, or the same error, either way."""
    from typer._click import Context
    from typer.core import TyperOption

    from det_k8s.cli.app import _TYPER, PlainOption, load_command

    samples = [None, "", "x", "table", "json", "-", "ml", "a,b", (), ("a",), ("a", "b=c"), [], 0, 1, 3, True, False]
    compared = passed_over = 0
    for name in COMMANDS:
        command = load_command(name)
        for sub in [command, *(getattr(command, "commands", None) or {}).values()]:
            ctx = Context(sub, info_name=sub.name)
            for param in sub.params:
                if not isinstance(param, PlainOption):
                    continue
                for value in [*samples, param.default]:
                    if _outcome(lambda p=param, v=value: p.plain_value(v)) == ("ok", _TYPER):
                        continue  # Typer converts it, as before
                    passed_over += 1
                    typer_gives = _outcome(lambda p=param, v=value, c=ctx: TyperOption.process_value(p, c, v))
                    assert _outcome(lambda p=param, v=value, c=ctx: p.process_value(c, v)) == typer_gives, (
                        name, sub.name, param.name, value)
                    compared += 1
    assert compared == passed_over > 100
