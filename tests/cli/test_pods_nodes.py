"""pods and nodes through the real entry point: the API emulator for reads, deletes and the GPU check pod; a
recording kubectl for labels and taints."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.support.k8s_emulator import node, pod

ON_REAL_CLUSTER_TOO = True  # pods list/cleanup and nodes list against the real API server too


def tasks(cluster) -> None:
    api = cluster.api
    api.put(pod("exp-1-trial-2-0-a-cat", labels={"determined": "a"}, node_name="gpu-0",
                requests={"nvidia.com/gpu": "4", "cpu": "2"}))
    api.put(pod("cmd-0-b-dog", namespace="ml", labels={"determined": "b"}, phase="Pending"))
    api.put(pod("exp-3-trial-4-0-c-owl", labels={"determined": "c", "team": "nlp"}, phase="Failed"))
    api.put(pod("determined-master-deployment-demo-x", labels={"app": "determined-master-demo"}))
    api.put(pod("unrelated", requests={"cpu": "1"}, node_name="gpu-0"))
    for name, ns in (("exp-1-trial-2-0-a-cat", "default"), ("exp-3-trial-4-0-c-owl", "default"),
                     ("cmd-0-b-dog", "ml")):
        api.put({"kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": {"determined": "x"}}})
    api.put({"kind": "ConfigMap", "metadata": {"name": "unrelated", "namespace": "default"}})


def test_pods_list_shows_only_task_pods(run_cli, cluster):
    tasks(cluster)
    result = run_cli("pods", "list")
    assert result.code == 0
    rows = [line.split() for line in result.out.splitlines()]
    assert rows[0] == ["NAME", "NAMESPACE", "PHASE", "NODE", "GPUS", "AGE", "JOB"]
    assert rows[1][:5] == ["exp-1-trial-2-0-a-cat", "default", "Running", "gpu-0", "4"]
    assert rows[2][:4] == ["exp-3-trial-4-0-c-owl", "default", "Failed", "0"]  # no node: that column is blank
    everywhere = json.loads(run_cli("pods", "list", "-A", "-o", "json").out)
    assert [(p["name"], p["gpus"]) for p in everywhere] == [("exp-1-trial-2-0-a-cat", 4), ("exp-3-trial-4-0-c-owl", 0),
                                                            ("cmd-0-b-dog", 0)]


@pytest.mark.emulator_only
def test_a_selector_narrows_but_never_widens(run_cli, cluster):
    tasks(cluster)
    narrowed = json.loads(run_cli("pods", "list", "-l", "team=nlp", "-o", "json").out)
    assert [p["name"] for p in narrowed] == ["exp-3-trial-4-0-c-owl"]
    widened = json.loads(run_cli("pods", "list", "-l", "app=determined-master-demo", "-o", "json").out)
    assert widened == []
    selector = "determined,app.kubernetes.io/managed-by!=det-k8s,app=determined-master-demo"
    assert ("GET", "/api/v1/namespaces/default/pods", {"labelSelector": selector, "limit": "500"}) in cluster.api.calls


@pytest.mark.emulator_only
def test_cleanup_dry_run_lists_and_deletes_nothing(run_cli, cluster):
    tasks(cluster)
    result = run_cli("pods", "cleanup", "--dry-run")
    assert result.code == 0
    assert "This would delete 2 pod(s) and 2 ConfigMap(s):" in result.err
    assert "  Pod default/exp-1-trial-2-0-a-cat" in result.err and "  ConfigMap default/exp-3-trial-4-0-c-owl" in result.err
    assert cluster.api.count("DELETE") == 0


@pytest.mark.emulator_only
def test_cleanup_without_consent_refuses(run_cli, cluster):
    tasks(cluster)
    result = run_cli("pods", "cleanup", "-A")
    assert result.code == 2 and "error: pods cleanup: not confirmed, nothing was changed" in result.err
    assert cluster.api.count("DELETE") == 0


def test_cleanup_deletes_task_pods_and_their_config_maps_only(run_cli, cluster):
    tasks(cluster)
    result = run_cli("pods", "cleanup", "-A", "--yes")
    assert result.code == 0 and "Deleted 3 pod(s) and 3 ConfigMap(s)" in result.err
    left = [p for p in cluster.api.items("pods") if not p["metadata"].get("deletionTimestamp")]  # (real: graceful)
    assert [p["metadata"]["name"] for p in left] == ["determined-master-deployment-demo-x", "unrelated"]
    # (the real API server also has each namespace's kube-root-ca.crt, and kube-system's own)
    assert [c["metadata"]["name"] for c in cluster.api.items("configmaps")
            if c["metadata"]["name"] != "kube-root-ca.crt" and c["metadata"]["namespace"] != "kube-system"] == [
        "unrelated"]


@pytest.mark.emulator_only
def test_cleanup_of_a_pod_already_gone_counts_it_once(run_cli, cluster):
    tasks(cluster)
    cluster.api.fail("DELETE", "pods", 404, 'pods "exp-1-trial-2-0-a-cat" not found', name="exp-1-trial-2-0-a-cat")
    result = run_cli("pods", "cleanup", "--yes")
    assert result.code == 0 and "Deleted 1 pod(s) and 2 ConfigMap(s)" in result.err


# -- nodes -----------------------------------------------------------------------------------


@pytest.mark.emulator_only  # a node that stays NotReady: kwok keeps every node it manages Ready
def test_nodes_list_shows_allocatable_and_requested(run_cli, cluster):
    tasks(cluster)
    cluster.api.put(node("gpu-0", gpus=4, cpu="15", labels={"determined.ai/pedl-agent": "present"},
                         taints=[{"key": "determined.ai/pedl-agent", "value": "present", "effect": "NoSchedule"}]))
    cluster.api.put(node("cpu-0", unschedulable=True, ready=False))
    result = run_cli("nodes", "list")
    assert result.code == 0
    rows = [line.split() for line in result.out.splitlines()]
    assert rows[0][:3] == ["NAME", "READY", "SCHEDULABLE"]
    assert rows[1] == ["cpu-0", "no", "no", "0/0", "7910m/0", "-", "-"]
    assert rows[2] == ["gpu-0", "yes", "yes", "4/4", "15/3", "determined.ai/pedl-agent=present:NoSchedule", "yes"]
    data = json.loads(run_cli("nodes", "list", "-o", "json").out)
    assert data[1]["gpu"] == {"capacity": 4, "allocatable": 4, "requested": 4} and data[1]["agent"] is True


def test_nodes_label_unlabel_and_taint_run_kubectl(run_cli, kubeconfig, fake_kubectl):
    assert run_cli("nodes", "label", "gpu-0", "gpu-1", "--kube-context", "prod").code == 0
    assert run_cli("nodes", "unlabel", "gpu-1").code == 0
    assert run_cli("nodes", "taint", "gpu-0", "determined.ai/pedl-agent=present:NoSchedule").code == 0
    assert run_cli("nodes", "taint", "gpu-0", "determined.ai/pedl-agent=present:NoSchedule", "--remove").code == 0
    tail = ["--request-timeout", "30s"]
    assert fake_kubectl.calls == [
        ["label", "nodes", "gpu-0", "gpu-1", "determined.ai/pedl-agent=present", "--overwrite", "--context", "prod",
         *tail],
        ["label", "nodes", "gpu-1", "determined.ai/pedl-agent-", *tail],
        ["taint", "nodes", "gpu-0", "determined.ai/pedl-agent=present:NoSchedule", "--overwrite", *tail],
        ["taint", "nodes", "gpu-0", "determined.ai/pedl-agent=present:NoSchedule-", *tail],
    ]


def test_kubectls_taint_removal_key_dash_removes_every_effect(run_cli, kubeconfig, fake_kubectl):
    removed = run_cli("nodes", "taint", "gpu-0", "gpu-1", "determined.ai/pedl-agent-")
    assert removed.code == 0, removed.err
    assert "Removed taint determined.ai/pedl-agent (every effect) on gpu-0, gpu-1" in removed.err
    assert run_cli("nodes", "taint", "gpu-0", "determined.ai/pedl-agent", "--remove").code == 0
    tail = ["--request-timeout", "30s"]
    assert fake_kubectl.calls == [["taint", "nodes", "gpu-0", "gpu-1", "determined.ai/pedl-agent-", *tail],
                                  ["taint", "nodes", "gpu-0", "determined.ai/pedl-agent-", *tail]]
    bad = run_cli("nodes", "taint", "gpu-0", "not a key-")
    assert bad.code == 2 and bad.err.startswith("error: taint 'not a key-': key 'not a key' is not a valid label key")


@pytest.mark.parametrize("args", [["gpu-0", "accelerator=gpu:Sometimes"], ["gpu-0"], ["gpu-0", "accelerator=gpu"]])
def test_bad_taints_never_reach_kubectl(run_cli, fake_kubectl, args):
    result = run_cli("nodes", "taint", *args)
    assert result.code == 2 and "determined.ai/pedl-agent=present:NoSchedule" in result.err
    assert fake_kubectl.all_calls == []


def test_kubectl_failure_keeps_its_message(run_cli, kubeconfig, fake_kubectl):
    fake_kubectl.respond("label", stderr='Error from server (NotFound): nodes "gpu-9" not found\n', rc=1)
    result = run_cli("nodes", "label", "gpu-9")
    assert result.code == 1
    assert result.err.strip() == ('error: kubectl label nodes failed (exit 1): Error from server (NotFound): '
                                  'nodes "gpu-9" not found')


def finish_gpu_pod(cluster, phase: str, logs: str, stop: threading.Event) -> threading.Thread:
    """Play kubelet: once the check pod exists, give it logs and a final phase."""

    def run() -> None:
        while not stop.is_set():
            for obj in cluster.api.items("pods"):
                labels = obj["metadata"].get("labels") or {}
                if labels.get("det-k8s.determined.ai/check") == "gpu":
                    name = obj["metadata"]["name"]
                    cluster.api.pod_logs[("default", name)] = logs
                    cluster.api.update("pods", name, {"spec": {"nodeName": "gpu-0"}, "status": {"phase": phase}})
                    return
            time.sleep(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.emulator_only
@pytest.mark.parametrize("phase,code", [("Succeeded", 0), ("Failed", 1)])
def test_check_gpu_prints_nvidia_smi_and_always_deletes_the_pod(run_cli, cluster, phase, code):
    from tests.support.k8s_emulator import node

    cluster.api.put(node("gpu-0", gpus=4))  # the node named must exist (a pod pinned elsewhere only waits)
    stop = threading.Event()
    thread = finish_gpu_pod(cluster, phase, "| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15 |\n", stop)
    try:
        result = run_cli("nodes", "check-gpu", "gpu-0", "--timeout", "60s")
    finally:
        stop.set()
        thread.join()
    assert result.code == code, result.err
    assert "NVIDIA-SMI 550.54.15" in result.out
    assert cluster.api.items("pods") == []
    created = [c for c in cluster.api.calls if c[0] == "POST"]
    assert len(created) == 1 and "Deleted pod default/det-k8s-gpu-check-" in result.err
    assert ("GPU check passed on gpu-0" in result.err) == (phase == "Succeeded")


@pytest.mark.emulator_only
def test_check_gpu_timeout_explains_the_pending_pod_and_deletes_it(run_cli, cluster):
    def add_event() -> None:
        for _ in range(200):
            pods = cluster.api.items("pods")
            if pods:
                cluster.api.put({"kind": "Event", "metadata": {"name": "ev", "namespace": "default"},
                                 "reason": "FailedScheduling", "involvedObject": {"name": pods[0]["metadata"]["name"]},
                                 "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."})
                return
            time.sleep(0.02)

    thread = threading.Thread(target=add_event, daemon=True)
    thread.start()
    result = run_cli("nodes", "check-gpu", "--timeout", "2s")
    thread.join()
    assert result.code == 1
    assert "did not finish within 2s: no node offers nvidia.com/gpu to this pod (0/2 nodes are available" in result.err
    assert cluster.api.items("pods") == []


def test_cleanup_leaves_det_k8s_gang_scheduled_pods_to_their_queue(run_cli, cluster):
    cluster.api.put(pod("exp-1-trial-1-0-a-b", labels={"determined": "1.a.1"}))
    cluster.api.put(pod("mnist-7f3a2c1b-0", labels={"determined": "7f3a2c1b", "app.kubernetes.io/managed-by": "det-k8s",
                                                    "det-k8s.io/group": "7f3a2c1b"}))
    result = run_cli("pods", "cleanup", "--yes")
    assert result.code == 0, result.err
    assert [p["metadata"]["name"] for p in cluster.api.items("pods")] == ["mnist-7f3a2c1b-0"]
