"""`det-k8s --help` comes from a cache of Typer's own output: byte for byte what Typer prints, or Typer runs.

After an intended change to the root help (a command added, a docstring edited, Typer upgraded):
`UPDATE_GOLDEN=1 ./scripts/test tests/cli/test_root_help.py` rewrites det_k8s/cli/_root_help_text.py.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from typer._click.formatting import HelpFormatter

from det_k8s.cli import root_help
from tests.conftest import ROOT


def cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a fresh interpreter (stdout is a pipe, as in scripts)."""
    env = {**os.environ, "COLUMNS": str(columns)}
    code = f"import sys; from det_k8s.cli import main; sys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=60)


def test_the_cache_is_what_typer_prints_now():
    if os.environ.get("UPDATE_GOLDEN") == "1":
        root_help.write_cache()
    from det_k8s.cli import _root_help_text as cache

    cache = importlib.reload(cache)
    assert root_help.render_with_typer() == cache.TEXT, (
        "the root help changed: run UPDATE_GOLDEN=1 ./scripts/test tests/cli/test_root_help.py")
    assert cache.WIDTH == 78 and not hasattr(cache, "TYPER_VERSION")  # any allowed Typer: test_typer_versions.py


def test_help_and_h_print_typers_text_and_exit_0():
    expected = root_help.render_with_typer()
    for flag in ("--help", "-h"):
        result = cli(flag)
        assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")


def test_no_arguments_print_the_help_on_stderr_and_exit_2_like_typer():
    result = cli()
    assert (result.returncode, result.stdout, result.stderr) == (2, "", root_help.render_with_typer())


@pytest.mark.parametrize("columns", [60, 79])
def test_a_narrower_terminal_gets_typers_own_wrapping(columns):
    result = cli("--help", columns=columns)
    assert result.stdout == root_help.render_with_typer(columns - 2)
    assert result.stdout != root_help.render_with_typer()


def test_the_fast_path_imports_neither_typer_nor_the_commands():
    probe = ("import sys; from det_k8s.cli import main; main(['--help']); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'typing', 'det_k8s')), "
             "file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={**os.environ, "COLUMNS": "100"})
    loaded = eval(result.stderr.strip().splitlines()[-1])  # noqa: S307 - our own probe's repr of a list of names
    assert loaded == ["det_k8s", "det_k8s.cli", "det_k8s.cli._root_help_text", "det_k8s.cli.root_help"]


@pytest.mark.parametrize("columns", [20, 40, 52, 79, 80, 81, 200])
def test_the_width_is_the_one_click_would_wrap_at(columns, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert root_help.help_width() == HelpFormatter().width


def test_only_the_root_help_is_cached():
    for args in (["--help", "--debug"], ["-n", "ml", "--help"], ["render", "--help"], ["--version"], ["--helpx"]):
        assert root_help.cached(args) is None, args


def test_the_cache_does_not_depend_on_the_installed_typer(tmp_path):
    """Whichever allowed Typer is installed prints this help (tests/cli/test_typer_versions.py checks the oldest and
    the newest): the cache is used without looking at Typer at all, here a Typer that cannot even be imported."""
    fake = tmp_path / "typer"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "0.26.1"\nraise ImportError("not this one")\n')
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    code = "import sys; from det_k8s.cli import main; sys.exit(main(['--help']))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=60)
    assert (result.returncode, result.stdout) == (0, root_help.render_with_typer())
