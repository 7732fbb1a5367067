"""det-k8s's scheduler on the real API server as the ServiceAccount `scheduler manifest` ships, with exactly that
RBAC (authorization Node,RBAC): it binds the master's pods whole, and the API server's audit log shows no request
it refused. Its why-pending shows where `kubectl describe` (the real kubectl) looks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from det_k8s.chart.deploy import scheduler_manifests
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, master_task

pytestmark = pytest.mark.real
SA = "system:serviceaccount:determined:det-k8s-scheduler"


@pytest.fixture
def shipped(real_cluster, tmp_path):
    """The manifests `det-k8s scheduler manifest -n determined` prints, applied (but for the Deployment: the test
    runs the scheduler itself), and a kubeconfig for its ServiceAccount."""
    real_cluster.api.namespaces.add("determined")
    real_cluster.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "determined"}})
    for doc in scheduler_manifests("example.com/det-k8s:test", "determined", preemption=True):
        if doc["kind"] != "Deployment":
            real_cluster.plane.apply(doc)
    return real_cluster.plane.service_account_kubeconfig("determined", "det-k8s-scheduler", tmp_path / "sa.kubeconfig")


def bound(real_cluster, task) -> list[str]:
    return [p["spec"].get("nodeName", "") for p in real_cluster.api.items("pods", "determined")
            if p["metadata"]["labels"].get("determined") == task.allocation]


def test_the_loop_as_the_shipped_service_account_binds_whole_and_is_never_refused(real_cluster, shipped):
    for i in range(3):
        real_cluster.api.put(node(f"gpu-{i}", gpus=4))
    admin = real_cluster.connect("determined")
    first = create_task(admin, master_task("0.38.1", experiment=1, slots_per_trial=8, namespace="determined"),
                        job_controller=True)
    env = {**os.environ, "KUBECONFIG": str(shipped), "NO_COLOR": "1", "DET_K8S_LEASE_NAMESPACE": "default"}
    loop = subprocess.Popen([sys.executable, "-m", "det_k8s", "scheduler", "run", "-n", "determined",
                             "--interval", "2s", "--preemption"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        real_cluster.wait_for("the first trial bound whole", lambda: all(bound(real_cluster, first)), timeout=60)
        second = create_task(admin, master_task("0.38.1", experiment=2, slots_per_trial=8, namespace="determined"),
                             job_controller=True)  # 8 GPUs of the 4 left: it must wait, whole
        real_cluster.wait_for("the second trial's why-pending", lambda: any(
            e["reason"] == "GangWaiting" for e in real_cluster.api.items("events", "determined")), timeout=60)
        assert not any(bound(real_cluster, second))
    finally:
        os.killpg(loop.pid, signal.SIGINT)
        out, err = loop.communicate(timeout=60)
    assert loop.returncode in (0, 130), err
    assert real_cluster.plane.forbidden(SA) == [], err
    assert len(real_cluster.plane.audit(SA)) > 10  # the session really ran as the ServiceAccount
    assert "forbidden" not in err.lower()


def test_kubectl_describe_shows_the_condition_and_the_events(real_cluster, kubectl):
    real_cluster.api.put(node("gpu-0", gpus=4))
    task = create_task(real_cluster.connect(), master_task("0.38.1", slots_per_trial=8), job_controller=True)
    from det_k8s.live.scheduler import LiveScheduler
    from det_k8s.scheduling.model import Policy

    LiveScheduler(real_cluster.connect(), "default", Policy(), "t", serve="coscheduler").run_pass()
    pod = task.pods[0]["metadata"]["name"]
    deadline = time.monotonic() + 30
    while True:
        described = subprocess.run([str(kubectl), "describe", "pod", pod, "-n", "default"], capture_output=True,
                                   text=True, timeout=60, env={**os.environ, "KUBECONFIG": str(real_cluster.kubeconfig)})
        if "GangUnschedulable" in described.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    conditions = text[text.index("Conditions:"):text.index("Volumes:")]
    assert re.search(r"PodScheduled\s+False", conditions), conditions
    (event,) = [line for line in text.splitlines() if "GangUnschedulable" in line]
    assert re.match(r"\s*Warning\s+GangUnschedulable\s+\S+\s+det-k8s\s+det-k8s: gang \S+ never fits this cluster: "
                    r"needs 8 nvidia.com/gpu \(2 pods x 4\), cluster has 4 on 1 eligible node", event), event
