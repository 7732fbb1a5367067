"""Finding partly-started groups and deadlocks, whoever created the pods."""

from __future__ import annotations

from det_k8s.cluster.model import GPU, Node, Pod, Snapshot
from det_k8s.scheduling.doctor import find_partial_groups

G = 1000


def gpu_node(name: str, gpus: int = 4) -> Node:
    return Node(name, {GPU: gpus * G, "cpu": 32 * G, "pods": 110 * G})


def task(name: str, labels: dict, node: str | None = None, gpus: int = 4, phase: str | None = None) -> Pod:
    return Pod(name, "default", node, phase or ("Running" if node else "Pending"), {GPU: gpus * G}, labels)


def test_the_documents_deadlock_three_pods_run_and_the_fourth_waits():
    nodes = tuple(gpu_node(f"gpu-{i}") for i in range(3))
    labels = {"determined": "exp-1.trial-1"}
    pods = tuple(task(f"exp-1-{i}", labels, f"gpu-{i}" if i < 3 else None) for i in range(4))
    diagnosis = find_partial_groups(Snapshot(nodes, pods))
    (group,) = diagnosis.partial
    assert (group.owner, group.key, group.held_gpus) == ("determined", "exp-1.trial-1", 12)
    assert group.waiting == ("exp-1-3",) and group.needed == {GPU: 4 * G}
    assert "pause or kill this experiment in Determined" in group.advice
    assert diagnosis.deadlocked == ()  # one group alone is stuck, not deadlocked with another


def test_two_12_gpu_experiments_on_12_gpus_deadlock_each_other():
    nodes = tuple(gpu_node(f"gpu-{i}") for i in range(3))
    a = {"determined": "a"}
    b = {"determined": "b"}
    pods = (task("a-0", a, "gpu-0"), task("a-1", a, "gpu-1"), task("a-2", a),
            task("b-0", b, "gpu-2"), task("b-1", b), task("b-2", b))
    diagnosis = find_partial_groups(Snapshot(nodes, pods))
    assert [g.key for g in diagnosis.partial] == ["a", "b"]
    assert diagnosis.deadlocked == ("a", "b")
    assert not diagnosis.healthy


def test_det_k8s_groups_with_missing_pods_are_partial():
    labels = {"det-k8s.io/group": "mnist-7f3a2c", "det-k8s.io/size": "3", "determined": "mnist-7f3a2c"}
    pods = (task("mnist-7f3a2c-0", labels, "gpu-0"),)
    (group,) = find_partial_groups(Snapshot((gpu_node("gpu-0"),), pods)).partial
    assert (group.owner, group.missing, group.waiting) == ("det-k8s", 2, ())
    assert "det-k8s experiment kill mnist-7f3a2c" in group.advice


def test_coscheduler_pod_groups_are_recognised():
    labels = {"pod-group.scheduling.sigs.k8s.io/name": "pg", "pod-group.scheduling.sigs.k8s.io/min-available": "2"}
    pods = (task("pg-0", labels, "gpu-0"), task("pg-1", labels))
    (group,) = find_partial_groups(Snapshot((gpu_node("gpu-0"),), pods)).partial
    assert group.owner == "pod-group"


def test_complete_finished_and_unlabelled_groups_are_healthy():
    labels = {"determined": "ok"}
    pods = (task("ok-0", labels, "gpu-0"), task("ok-1", labels, "gpu-1"),
            task("done-0", {"determined": "done"}, "gpu-1", phase="Succeeded"), task("done-1", {"determined": "done"}),
            task("plain", {}, None))
    assert find_partial_groups(Snapshot((gpu_node("gpu-0"), gpu_node("gpu-1")), pods)).healthy


def test_groups_are_kept_apart_by_namespace():
    a = Pod("x-0", "team-a", "gpu-0", "Running", {GPU: G}, {"determined": "x"})
    b = Pod("x-1", "team-b", None, "Pending", {GPU: G}, {"determined": "x"})
    assert find_partial_groups(Snapshot((gpu_node("gpu-0"),), (a, b))).healthy
