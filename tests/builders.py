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
        L.DETERMINED: group_id,
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
