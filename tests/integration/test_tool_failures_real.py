"""The real helm 3 and 4 and kubectl 1.31 and 1.35 against a dead API server: their own stderr, turned into the
one det-k8s line the API adapter says for the same failure (address, reason, context; no klog quoting left)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from det_k8s.errors import ClusterUnreachable
from det_k8s.tools.failures import explain
from tests.conftest import TOOLS, write_kubeconfig

BINARIES = {"helm3": TOOLS / "helm3" / "helm", "helm4": TOOLS / "helm4" / "helm",
            "kubectl31": TOOLS / "kubectl31" / "kubectl", "kubectl35": TOOLS / "kubectl35" / "kubectl"}


def _run(binary: Path, argv: list[str], kubeconfig: Path, home: Path) -> subprocess.CompletedProcess[str]:
    if not binary.exists():
        pytest.fail(f"{binary} missing: run scripts/fetch_tools.py (./scripts/test does it)")
    env = {"KUBECONFIG": str(kubeconfig), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run([str(binary), *argv], capture_output=True, text=True, timeout=120, env=env, check=False)


@pytest.mark.parametrize(("tool", "argv"), [
    ("helm3", ["helm", "list"]),
    ("helm4", ["helm", "list"]),
    ("kubectl31", ["kubectl", "label", "nodes", "gpu-0", "determined.ai/pedl-agent=present"]),
    ("kubectl35", ["kubectl", "label", "nodes", "gpu-0", "determined.ai/pedl-agent=present"]),
])
def test_a_dead_server_is_the_address_and_the_reason(tool, argv, closed_port, tmp_path):
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{closed_port}", "dead")
    ran = _run(BINARIES[tool], argv[1:], kubeconfig, tmp_path)
    assert ran.returncode != 0
    error = explain(argv[0], argv, ran.returncode, ran.stderr, ran.stdout, context="dead")
    assert isinstance(error, ClusterUnreachable)
    subcommand = " ".join(argv[1:3])
    # kubectl 1.35 logs `err="... connect: connection refused"`: the closing quote used to end the reason
    assert error.message == (f"{argv[0]} {subcommand}: cannot reach the Kubernetes API (context dead): "
                             f"127.0.0.1:{closed_port}: connection refused")
