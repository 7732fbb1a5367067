"""What det-k8s knows of a cluster: nodes, pods, their resources and placement constraints.

Resources are integer milli-units per resource name (`cpu` 7910 = 7.91 cores, `memory` in
milli-bytes, `nvidia.com/gpu` 4000 = 4 GPUs, `pods` 1000 per pod), the same rounding
kube-scheduler uses, so sums and comparisons are exact and cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

Resources = Mapping[str, int]
GPU = "nvidia.com/gpu"
PODS = "pods"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def add(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def fits(request: Resources, free: Resources) -> bool:
    """True when every requested amount is available (a resource the node lacks counts as 0)."""
    return all(amount <= 0 or free.get(name, 0) >= amount for name, amount in request.items())


def limiting(request: Resources, free: Resources) -> str | None:
    """The first resource (sorted by name) that does not fit, or None when the request fits."""
    for name in sorted(request):
        if request[name] > 0 and free.get(name, 0) < request[name]:
            return name
    return None


def count_fits(request: Resources, free: Resources) -> int:
    """How many copies of `request` fit into `free` (a large number when nothing is requested)."""
    best = 1 << 30
    for name, amount in request.items():
        if amount > 0:
            best = min(best, max(free.get(name, 0), 0) // amount)
    return best


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: empty effect matches all effects; empty key with Exists matches all keys."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and self.values:
            try:
                left, right = int(value or ""), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False


@dataclass(frozen=True, slots=True)
class Constraints:
    """Where a pod may run: nodeSelector, required node affinity (OR of ANDs), tolerations."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def selector_matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        if self.required_terms:
            return any(all(req.matches(labels) for req in term) for term in self.required_terms)
        return True

    def untolerated(self, taints: Iterable[Taint]) -> Taint | None:
        """The first NoSchedule/NoExecute taint no toleration covers (PreferNoSchedule is a preference)."""
        for taint in taints:
            if taint.effect == "PreferNoSchedule":
                continue
            if not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None


NO_CONSTRAINTS = Constraints()


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    capacity: Resources = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """Allocatable GPUs (whole devices)."""
        return self.allocatable.get(GPU, 0) // 1000


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    namespace: str = "default"
    node_name: str | None = None
    phase: str = "Pending"
    requests: Resources = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    constraints: Constraints = NO_CONSTRAINTS
    created: str = ""
    deleting: bool = False
    reason: str = ""  # status.reason, e.g. Evicted or OutOfnvidia.com/gpu
    owner: str = ""  # the controlling ownerReference as Kind/name, e.g. DaemonSet/kube-proxy ("" when none)
    priority: int | None = None  # spec.priority, set from the pod's PriorityClass at admission

    @property
    def active(self) -> bool:
        """Holds resources on its node: bound and not finished."""
        return self.node_name is not None and self.phase not in TERMINAL_PHASES


@dataclass(frozen=True)
class Snapshot:
    """Nodes and pods at one moment. Used capacity per node is derived once, on first use."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...] = ()

    @cached_property
    def nodes_by_name(self) -> dict[str, Node]:
        return {node.name: node for node in self.nodes}

    @cached_property
    def used(self) -> dict[str, dict[str, int]]:
        """Node name -> sum of effective requests of its active pods (plus one `pods` each)."""
        used: dict[str, dict[str, int]] = {node.name: {} for node in self.nodes}
        for pod in self.pods:
            if not pod.active or pod.node_name not in used:
                continue
            bucket = used[pod.node_name]
            for name, amount in pod.requests.items():
                bucket[name] = bucket.get(name, 0) + amount
            bucket[PODS] = bucket.get(PODS, 0) + 1000
        return used

    @cached_property
    def free(self) -> dict[str, dict[str, int]]:
        """Node name -> allocatable minus used, clamped at zero (a node that lost a GPU is full)."""
        out: dict[str, dict[str, int]] = {}
        for node in self.nodes:
            used = self.used[node.name]
            free = dict(node.allocatable)
            for name, amount in used.items():
                free[name] = max(free.get(name, 0) - amount, 0)
            out[node.name] = free
        return out
