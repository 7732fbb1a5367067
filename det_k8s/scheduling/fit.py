"""Where a group's pods may go, and whether all of them fit at once.

Groups built from the same settings share tolerations and selectors, so eligible nodes are
computed once per constraint *signature* (with the count of nodes excluded per cause, for
why-pending). A group's pods are grouped into *shapes* (same request, same constraints); a
Determined task is one shape of N identical pods. Placement is all-or-nothing: shapes are tried
largest first on a scratch overlay and committed only when every pod has a node.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cluster.model import GPU, PODS, Constraints, Node, Requirement, Toleration
from ..settings.node_rules import eligible_nodes
from .capacity import Capacity, Demand, FreeIndex, count, take
from .model import Placement, PodGroup

Signature = tuple[tuple[tuple[str, str], ...], tuple[tuple[Requirement, ...], ...], tuple[Toleration, ...]]
ONE_POD = 1000  # every pod also takes one of the node's `pods` allocatable
SHOWN_NODES = 3  # nodes named in why-pending messages


def signature(constraints: Constraints) -> Signature:
    """A hashable key: pods with equal signatures may run on exactly the same nodes."""
    selector = tuple(sorted(constraints.node_selector.items()))
    return (selector, constraints.required_terms, constraints.tolerations)


@dataclass(frozen=True)
class Eligibility:
    nodes: tuple[str, ...]
    excluded: tuple[tuple[str, int], ...]  # (cause, node count), most common first


@dataclass(frozen=True)
class Limits:
    """What the eligible nodes could hold if nothing ran on them (their allocatable)."""

    max_pods: int  # pods of this demand all eligible nodes together could take
    largest_node: int  # pods of this demand the biggest single node could take
    key_total: int  # allocatable key resource over the eligible nodes
    without_key: int  # eligible nodes offering none of the key resource
    bounds: tuple[tuple[str, int], ...]  # per resource: pods the nodes could take were it the only one asked
    largest: tuple[tuple[str, int], ...]  # the nodes with the most allocatable key resource

    def limiting(self, pods: int, key: str) -> str:
        """The resource that keeps `pods` pods from fitting: the key resource unless another is shorter."""
        by_name = dict(self.bounds)
        if by_name.get(key, 0) < pods:
            return key
        return next((name for name, bound in self.bounds if bound < pods), key)


class Nodes:
    """The snapshot's nodes, with eligibility and allocatable limits cached per signature."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self.by_name = {node.name: node for node in nodes}
        self._eligible: dict[Signature, Eligibility] = {}
        self._limits: dict[tuple[Signature, Demand, str], Limits] = {}
        self._members: dict[tuple[Signature, str], tuple[str, ...]] = {}

    def eligible(self, klass: Signature, constraints: Constraints) -> Eligibility:
        found = self._eligible.get(klass)
        if found is None:
            keep, excluded = eligible_nodes(self.nodes, constraints)
            causes = tuple(sorted(excluded.items(), key=lambda item: (-item[1], item[0])))
            found = self._eligible[klass] = Eligibility(tuple(node.name for node in keep), causes)
        return found

    def members(self, klass: Signature, constraints: Constraints, key: str) -> tuple[str, ...]:
        """Eligible nodes that offer the key resource at all: the nodes that matter for a shape."""
        found = self._members.get((klass, key))
        if found is None:
            nodes = self.eligible(klass, constraints).nodes
            found = self._members[(klass, key)] = tuple(
                name for name in nodes if self.by_name[name].allocatable.get(key, 0) > 0)
        return found

    def limits(self, klass: Signature, eligibility: Eligibility, demand: Demand, key: str) -> Limits:
        found = self._limits.get((klass, demand, key))
        if found is None:
            total = largest = key_total = without_key = 0
            bounds = dict.fromkeys((name for name, _ in demand), 0)
            sizes: list[tuple[int, int, str]] = []
            for position, name in enumerate(eligibility.nodes):
                allocatable = self.by_name[name].allocatable
                fit = count(allocatable, demand)
                total += fit
                largest = max(largest, fit)
                amount = allocatable.get(key, 0)
                key_total += amount
                without_key += amount <= 0
                sizes.append((-amount, position, name))
                for resource, asked in demand:
                    bounds[resource] += max(allocatable.get(resource, 0), 0) // asked
            top = tuple((name, -negative) for negative, _, name in heapq.nsmallest(SHOWN_NODES, sizes))
            found = self._limits[(klass, demand, key)] = Limits(
                total, largest, key_total, without_key, tuple(sorted(bounds.items())), top)
        return found


def key_resource(demand: Demand) -> str:
    """The resource nodes are ordered by: GPUs when asked for, else CPU, else what is asked."""
    names = [name for name, _ in demand if name != PODS]
    for preferred in (GPU, "cpu"):
        if preferred in names:
            return preferred
    return names[0] if names else PODS


@dataclass(frozen=True)
class Shape:
    """Identical pods of one group: same demand, same constraints."""

    klass: Signature
    constraints: Constraints
    demand: Demand
    key: str
    amount: int  # demand of `key` per pod
    ranks: tuple[int, ...]  # positions in group.pods

    @property
    def pods(self) -> int:
        return len(self.ranks)

    @property
    def request(self) -> dict[str, int]:
        """The per-pod request as the user sees it (without the implicit `pods` slot)."""
        return {name: amount for name, amount in self.demand if name != PODS}


def shapes_of(group: PodGroup) -> tuple[Shape, ...]:
    """The group's pods grouped by (signature, demand), the largest key amount first."""
    found: dict[tuple[Signature, Demand], list[int]] = {}
    constraints: dict[tuple[Signature, Demand], Constraints] = {}
    for position, pod in enumerate(group.pods):
        asked = dict(pod.requests)
        asked[PODS] = asked.get(PODS, 0) + ONE_POD
        kind = (signature(pod.constraints), tuple(sorted((n, a) for n, a in asked.items() if a > 0)))
        found.setdefault(kind, []).append(position)
        constraints.setdefault(kind, pod.constraints)
    shapes = []
    for (klass, demand), ranks in found.items():
        key = key_resource(demand)
        amount = dict(demand)[key]
        shapes.append(Shape(klass, constraints[(klass, demand)], demand, key, amount, tuple(ranks)))
    shapes.sort(key=lambda shape: (-shape.amount, -shape.pods, shape.ranks[0]))
    return tuple(shapes)


Taken = list[tuple[Shape, list[tuple[str, int]]]]


class Fitter:
    """All-or-nothing placement of groups onto a `Capacity`."""

    def __init__(self, nodes: Nodes, capacity: Capacity) -> None:
        self.nodes = nodes
        self.capacity = capacity

    def index(self, shape: Shape) -> FreeIndex:
        members = self.nodes.members(shape.klass, shape.constraints, shape.key)
        return self.capacity.index(shape.klass, members, shape.key)

    def try_place(self, shapes: Sequence[Shape],
                  overlay: Mapping[str, Mapping[str, int]] | None = None) -> Taken | None:
        """Nodes for every pod, or None. Nothing is committed; `overlay` overrides free capacity."""
        if len(shapes) == 1 and not overlay:
            shape = shapes[0]
            index = self.index(shape)
            total = index.total(shape.demand)
            if total is not None and total < shape.pods:
                return None
            found = take(index, self.capacity, shape.demand, shape.amount, shape.pods)
            return None if found is None else [(shape, found)]
        if len(shapes) == 1:  # one shape with an overlay: take() only reads it
            shape = shapes[0]
            found = take(self.index(shape), self.capacity, shape.demand, shape.amount, shape.pods, overlay)
            return None if found is None else [(shape, found)]
        scratch: dict[str, dict[str, int]] = {node: dict(free) for node, free in (overlay or {}).items()}
        taken: Taken = []
        for shape in shapes:
            found = take(self.index(shape), self.capacity, shape.demand, shape.amount, shape.pods, scratch)
            if found is None:
                return None
            taken.append((shape, found))
            for node, pods in found:
                free = scratch.get(node)
                if free is None:
                    free = scratch[node] = dict(self.capacity.free[node])
                for name, amount in shape.demand:
                    free[name] = free.get(name, 0) - amount * pods
        return taken

    def fits(self, shapes: Sequence[Shape], overlay: Mapping[str, Mapping[str, int]] | None = None) -> bool:
        return self.try_place(shapes, overlay) is not None

    def commit(self, taken: Taken) -> None:
        for shape, found in taken:
            for node, pods in found:
                self.capacity.consume(node, shape.demand, pods)


def assign(group: PodGroup, taken: Taken) -> Placement:
    """Pod names to nodes, in rank order."""
    nodes: list[str | None] = [None] * len(group.pods)
    for shape, found in taken:
        ranks = iter(shape.ranks)
        for node, pods in found:
            for _ in range(pods):
                nodes[next(ranks)] = node
    return tuple((pod.name, node or "") for pod, node in zip(group.pods, nodes, strict=True))
