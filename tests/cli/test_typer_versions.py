"""The CLI with the oldest and the newest Typer pyproject.toml allows, not only the one constraints.txt pins.

Each Typer comes from PyPI once into a cache outside the clone ($DET_K8S_CACHE or ~/.cache/det-k8s, under
typer/<version>/, `pip install --no-deps --target`: Typer alone, on top of this venv's other dependencies), and the
essentials run with it first on the path: the root help is the cache's text byte for byte (the cache does not look
at the installed Typer), what `--version`, `--help`, every `COMMAND --help` and `validate -f` import (pydantic kept
out), each command's help alike loaded lazily and with every command imported, an option passed over Typer's
conversion getting what Typer gives it, and the usage errors in det-k8s's words.
Without PyPI: skipped on a contributor's machine, failed in CI (tests/support/needs.py). The newest is looked up each run
(a second or two); an install is a few seconds once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import ROOT
from tests.support.needs import need

# What runs with each Typer: the tests that say what the CLI prints and imports (both Typers: 112 s with the
# downloads, on 2 cores at load 13; 30 s once cached, at load 5).
ESSENTIALS = [
    "tests/cli/test_root_help.py",
    "tests/cli/test_startup.py::test_version_imports_no_typer_and_no_command",
    "tests/cli/test_startup.py::test_root_help_imports_no_typer_and_no_command",
    "tests/cli/test_startup.py::test_each_commands_help_imports_its_own_command_module_and_not_what_runs_it",
    "tests/cli/test_startup.py::test_validate_imports_what_it_checks_with_and_not_pydantic",
    "tests/cli/test_lazy_commands.py",
    "tests/cli/test_usage_errors.py",
]


def typer_requirement() -> str:
    """`typer>=A,<B` as pyproject.toml gives it."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (spec,) = [d for d in dependencies if re.match(r"typer\b", d)]
    return spec.replace(" ", "")


def oldest(spec: str) -> str:
    found = re.search(r">=([0-9][0-9.]*)", spec)
    assert found, f"{spec}: no lower bound; pyproject.toml must say which Typer is the oldest it takes"
    return f"typer=={found.group(1)}"


def cache() -> Path:
    return Path(os.environ.get("DET_K8S_CACHE") or Path.home() / ".cache" / "det-k8s") / "typer"


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--quiet",
                           "--no-input", "--timeout", "15", "--retries", "1"],
                          capture_output=True, text=True, timeout=300, check=False)


def fetched(requirement: str) -> tuple[str, Path]:
    """(version, the directory holding that Typer alone), from the cache or PyPI; skips (fails in CI) offline."""
    wheels = cache() / "wheels"
    result = pip("download", "--no-deps", "--only-binary", ":all:", "--dest", str(wheels), requirement)
    need(result.returncode == 0, f"cannot fetch {requirement} from PyPI: "
         f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
    wanted = Requirement(requirement).specifier
    found = {Version(p.name.split("-")[1]): p for p in wheels.glob("typer-*.whl")}
    version = max(v for v in found if wanted.contains(v))  # what pip chose: the newest the requirement takes
    target = cache() / str(version)
    if not (target / "typer" / "__init__.py").exists():
        installed = pip("install", "--no-deps", "--target", str(target), str(found[version]))
        assert installed.returncode == 0, installed.stderr[-2000:]
    return str(version), target


@pytest.mark.parametrize("which", ["oldest", "newest"])
def test_the_cli_essentials_pass_with_the_oldest_and_the_newest_allowed_typer(which):
    spec = typer_requirement()
    version, target = fetched(oldest(spec) if which == "oldest" else spec)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)]), "PYTHONDONTWRITEBYTECODE": "1"}
    loaded = subprocess.run([sys.executable, "-c", "import typer; print(typer.__version__, typer.__file__)"],
                            capture_output=True, text=True, env=env, timeout=60, check=True).stdout.split()
    assert loaded == [version, str(target / "typer" / "__init__.py")]
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *ESSENTIALS],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"with Typer {version} ({which} allowed by {spec}):\n{result.stdout[-4000:]}"
