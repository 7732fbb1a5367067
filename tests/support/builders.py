"""Small builders for scheduling tests: nodes, det-k8s task pods, other pods, queued groups.

Amounts are whole units (GPUs, cores, GiB) and converted to the model's milli-units here, so tests
read like the cluster they describe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from det_k8s.cluster.model import GPU, NO_CONSTRAINTS, Constraints, Node, Pod, Snapshot, Taint, Toleration
from det_k8s.scheduling import labels as L
from det_k8s.scheduling.model import PodGroup, PodRequest

GIB = 2**30 * 1000
GPU_TAINT = Taint("accelerator", "gpu", "NoSchedule")
TOLERATE_GPU = Constraints(tolerations=(Toleration("accelerator", "Equal", "gpu", "NoSchedule"),))


def node(
    name: str,
    gpus: int = 0,
    *,
    cpu: float = 32,
    memory_gib: int = 128,
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: Sequence[Taint] = (),
    ready: bool = True,
    cordoned: bool = False,
) -> Node:
    allocatable = {"cpu": int(cpu * 1000), "memory": memory_gib * GIB, "pods": pods * 1000}
    if gpus:
        allocatable[GPU] = gpus * 1000
    return Node(name, allocatable, labels or {}, tuple(taints), ready, cordoned)


def requests(gpus: float = 0, cpu: float = 0, memory_gib: float = 0) -> dict[str, int]:
    out = {GPU: int(gpus * 1000), "cpu": int(cpu * 1000), "memory": int(memory_gib * GIB)}
    return {name: amount for name, amount in out.items() if amount}


def task_pods(
    group_id: str,
    nodes: Sequence[str],
    *,
    gpus: float = 0,
    cpu: float = 0,
    priority: int = 50,
    user: str = "bob",
    experiment: str | None = None,
    created: str = "2024-01-01T00:00:00Z",
    phase: str = "Running",
    deleting: bool = False,
) -> list[Pod]:
    """The pods of a running det-k8s group, one per entry of `nodes`, labelled as det-k8s labels them."""
    labels = {
        L.MANAGED_BY: L.MANAGER,
        L.GROUP: group_id,
        L.EXPERIMENT: experiment or group_id,
        L.USER: user,
        L.PRIORITY: str(priority),
        L.SIZE: str(len(nodes)),
    }
    return [
        Pod(
            f"{group_id}-{rank}",
            "determined",
            node_name,
            phase,
            requests(gpus, cpu),
            {**labels, L.RANK: str(rank)},
            NO_CONSTRAINTS,
            created,
            deleting,
        )
        for rank, node_name in enumerate(nodes)
    ]


def other_pod(name: str, node_name: str, *, gpus: float = 0, cpu: float = 0, phase: str = "Running") -> Pod:
    """A pod det-k8s does not manage (inference, a DaemonSet, someone's notebook)."""
    return Pod(name, "default", node_name, phase, requests(gpus, cpu), {"app": name})


def gang(
    group_id: str,
    pods: int,
    gpus: float = 0,
    *,
    cpu: float = 0,
    priority: int = 50,
    user: str = "alice",
    sequence: int = 0,
    constraints: Constraints = NO_CONSTRAINTS,
) -> PodGroup:
    """A queued group of identical pods."""
    asked = requests(gpus, cpu)
    return PodGroup(
        group_id,
        group_id,
        user,
        priority,
        "2024-01-01T00:00:00Z",
        sequence,
        tuple(PodRequest(f"{group_id}-{rank}", rank, asked, constraints) for rank in range(pods)),
        int(gpus) * pods,
    )


def snapshot(nodes: Iterable[Node], pods: Iterable[Pod] = ()) -> Snapshot:
    return Snapshot(tuple(nodes), tuple(pods))


def queue(*groups: PodGroup) -> list[PodGroup]:
    """Groups submitted in this order (sequence numbers follow the argument order)."""
    from dataclasses import replace

    return [replace(group, sequence=i) for i, group in enumerate(groups)]


def determined_pod(name: str, node_name: str, gpus: float, allocation: str, *, priority: int | None = None,
                   **labels: str) -> Pod:
    """A task pod the Determined master created: label `determined` = its allocation."""
    return Pod(name, "determined", node_name, "Running", requests(gpus), {"determined": allocation, **labels},
               priority=priority)


def mixed_4_8_gpu_scenario() -> tuple[Snapshot, list[PodGroup]]:
    """Four 8-GPU and four 4-GPU nodes, busy; a queue whose plan (preemption on, reserve at once) evicts one
    group, reserves nodes for another and backfills a third (see tests/golden/maps/mixed-4-8-gpu.txt)."""
    nodes = [node(f"big-{i}", 8, labels={"node-pool": "a100"}) for i in range(4)] + [
        node(f"small-{i}", 4, labels={"node-pool": "v100"}) for i in range(4)]
    pods = (task_pods("low", ["small-0"], gpus=4, priority=10, experiment="nightly-eval", user="bob")
            + task_pods("mid", ["big-0"], gpus=4, priority=60, experiment="bert-finetune", user="carol")
            + task_pods("top", ["big-1"], gpus=8, priority=80, experiment="llm-pretrain", user="dave")
            + task_pods("etl", ["big-2"], gpus=4, priority=60, experiment="vision-etl", user="erin")
            + task_pods("eval", ["big-3"], gpus=2, priority=70, experiment="rl-eval", user="frank")
            + [determined_pod("exp-3-trial-9-0-ab12.1-calm-owl", "small-1", 4, "ab12.1", priority=50),
               other_pod("triton", "small-2", gpus=2)])
    groups = queue(gang("urgent", 5, 4, priority=90), gang("wide", 2, 8, priority=50),
                   gang("tiny", 1, 2, priority=40))
    return snapshot(nodes, pods), groups
def node_of(pod: dict) -> str | None:
    """The node a pod object runs on or is pinned to: spec.nodeName, else the one node its required
    node affinity names in matchFields (how det-k8s pins its pods; read here without det-k8s)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    names = {tuple(f["values"]) for term in required.get("nodeSelectorTerms") or ()
             for f in term.get("matchFields") or () if f["key"] == "metadata.name" and f["operator"] == "In"}
    return names.pop()[0] if len(names) == 1 else None
