"""What a user sees: the real `kubectl describe pod` (kubectl 1.35) on the master's pods det-k8s scheduled,
against the API emulator. A waiting pod shows PodScheduled False and det-k8s's GangWaiting event; a bound one
the Scheduled event from det-k8s, as kube-scheduler would write it."""

from __future__ import annotations

import subprocess

import pytest

from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, master_task

pytestmark = pytest.mark.emulator


def describe(kubectl, kubeconfig, pod: str) -> str:
    result = subprocess.run([str(kubectl), "--kubeconfig", str(kubeconfig), "describe", "pod", pod],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kubectl_describe_shows_why_a_pod_waits_and_who_placed_the_others(cluster, kubectl):
    cluster.api.serve_discovery()
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    api = cluster.connect()
    first = create_task(api, master_task("0.38.1", experiment=7, slots_per_trial=12))
    second = create_task(api, master_task("0.26.2", experiment=8, slots_per_trial=12))
    LiveScheduler(api, "default", Policy(), "sched", serve="coscheduler").run_pass()

    waiting = describe(kubectl, cluster.kubeconfig, second.names[0])
    conditions = waiting.split("Conditions:")[1].split("Volumes:")[0]
    assert "PodScheduled   False" in conditions
    events = waiting.split("Events:")[1]
    assert "Normal  GangWaiting" in events and "det-k8s" in events
    assert "det-k8s: gang exp8trial1 waiting for resources: needs 3 pods x 4 nvidia.com/gpu" in events

    placed = describe(kubectl, cluster.kubeconfig, first.names[0])
    assert "PodScheduled   True" in placed.split("Conditions:")[1]
    node_name = cluster.api.get("pods", first.names[0])["spec"]["nodeName"]
    assert any(line.startswith("Node:") and node_name in line for line in placed.splitlines())
    assert "Normal  Scheduled  " in placed
    assert f"Successfully assigned default/{first.names[0]} to {node_name}" in placed
