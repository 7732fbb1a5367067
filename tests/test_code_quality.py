"""The code stays clean: ruff (including the ban on module-level kubernetes/boto3/google/azure imports)
and mypy in strict mode over det_k8s."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean():
    result = run("ruff", "check", "det_k8s", "tests", "benchmarks", "scripts")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean():
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
