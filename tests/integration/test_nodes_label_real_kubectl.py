"""`det-k8s nodes label|unlabel|taint` with the real kubectl (1.31 and 1.35) against the API emulator, which serves
the discovery documents kubectl needs: the node really changes, as it would on a cluster (the argv itself is
asserted with the recording fake in tests/cli/test_pods_nodes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TOOLS, _tool
from tests.support.k8s_emulator import node

AGENT = "determined.ai/pedl-agent"

ON_REAL_CLUSTER_TOO = True  # the real kubectl against the real API server too


@pytest.fixture(params=["kubectl31", "kubectl35"])
def real_kubectl(request) -> Path:
    return _tool(TOOLS / request.param / "kubectl")


def test_label_unlabel_and_taint_change_the_node(run_cli, cluster, real_kubectl):
    cluster.api.serve_discovery()
    for name in ("gpu-0", "gpu-1"):
        cluster.api.put(node(name, gpus=4))
    flags = ["--kubectl-binary", str(real_kubectl)]

    def labels(name: str) -> dict:
        return cluster.api.get("nodes", name)["metadata"].get("labels") or {}

    def taints(name: str) -> list:
        # det-k8s's taints only: on the real control plane the node lifecycle controller adds and removes its own
        # (node.kubernetes.io/not-ready, .../unreachable) whenever it judges the node's health, whatever this test does
        return [t for t in cluster.api.get("nodes", name)["spec"].get("taints") or () if t["key"] == AGENT]

    result = run_cli("nodes", "label", "gpu-0", "gpu-1", *flags)
    assert result.code == 0, result.err
    assert labels("gpu-0")[AGENT] == "present" and labels("gpu-1")[AGENT] == "present"
    assert run_cli("nodes", "unlabel", "gpu-1", *flags).code == 0
    assert AGENT not in labels("gpu-1") and labels("gpu-0")[AGENT] == "present"
    assert run_cli("nodes", "taint", "gpu-0", f"{AGENT}=present:NoSchedule", *flags).code == 0
    assert taints("gpu-0") == [{"key": AGENT, "value": "present", "effect": "NoSchedule"}]
    assert run_cli("nodes", "taint", "gpu-0", f"{AGENT}=present:NoSchedule", "--remove", *flags).code == 0
    assert taints("gpu-0") == []
    missing = run_cli("nodes", "label", "gpu-9", *flags)
    assert missing.code == 1 and missing.out == ""
    assert missing.err.strip().splitlines()[-1].startswith("error: "), missing.err
    assert "gpu-9" in missing.err and "memcache" not in missing.err, missing.err
