"""Shared fixtures: real helm/kubectl binaries, storage emulators (tests/emulators.py), the CLI in-process."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.emulators import (  # noqa: F401
    azurite,
    blackhole,
    closed_port,
    fake_gcs,
    gcs_server,
    moto_s3,
    moto_server,
    tarpit,
)

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / ".tools"
EXAMPLES = ROOT / "examples"


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run `det-k8s ARGS` in this process through the real entry point; returns code, stdout, stderr."""
    from det_k8s.cli import main

    monkeypatch.delenv("HELM_NAMESPACE", raising=False)
    monkeypatch.delenv("HELM_KUBECONTEXT", raising=False)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def _tool(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} missing: run scripts/fetch_tools.py (./scripts/test does it)")
    return path


@pytest.fixture(scope="session", params=["helm3", "helm4"])
def helm(request: pytest.FixtureRequest) -> Path:
    """The real helm binary, once for helm 3.17 and once for helm 4.1."""
    return _tool(TOOLS / request.param / "helm")


@pytest.fixture(scope="session")
def helm3() -> Path:
    return _tool(TOOLS / "helm3" / "helm")


@pytest.fixture(scope="session")
def helm4() -> Path:
    return _tool(TOOLS / "helm4" / "helm")


@pytest.fixture(scope="session")
def kubectl() -> Path:
    return _tool(TOOLS / "kubectl35" / "kubectl")


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME with no kubeconfig and no helm state, so no test touches the developer's files."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", str(home / ".kube" / "config"))
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        monkeypatch.setenv(var, str(home / var.lower()))
    return home


def example(name: str) -> Path:
    return EXAMPLES / name


def which_or_none(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH"))
