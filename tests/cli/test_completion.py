"""Shell completion works through the installed console script (bash and zsh protocols)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def det_k8s() -> str:
    found = shutil.which("det-k8s", path=str(Path(sys.executable).parent))
    assert found, "the det-k8s console script is not installed next to this interpreter"
    return found


def complete(env: dict[str, str]) -> str:
    result = subprocess.run([det_k8s()], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_bash_completes_commands_and_options():
    assert complete({"_DET_K8S_COMPLETE": "complete_bash", "COMP_WORDS": "det-k8s ren", "COMP_CWORD": "1"}).split() == [
        "render"]
    options = complete({"_DET_K8S_COMPLETE": "complete_bash", "COMP_WORDS": "det-k8s render --ch",
                        "COMP_CWORD": "2"}).split()
    assert options == ["--chart"]


def test_zsh_completes_subcommands_with_their_help():
    out = complete({"_DET_K8S_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "det-k8s experiment cr"})
    assert '"create":"Submit an experiment' in out


def test_the_completion_script_can_be_shown():
    # Typer detects "the current shell" from the process's ancestors: run it from bash, as a user does (under a
    # test runner started without a shell, none is found and it says "Shell  not supported")
    result = subprocess.run(["bash", "-c", f"'{det_k8s()}' --show-completion; exit $?"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "_det_k8s_completion" in result.stdout
