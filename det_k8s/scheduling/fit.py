"""Where a group's pods may go, and whether all of them fit at once.

Node-level filters (readiness, cordons, nodeSelector, required node affinity with matchFields,
taints, OS, volumes) do not change during a pass, so eligible nodes are computed once per
constraint *signature* (with the count of nodes excluded per cause, for why-pending). A group's
pods are grouped into *shapes* (same request, same node-level constraints); a Determined task is
one shape of N identical pods. Placement is all-or-nothing: shapes are tried largest first on a
scratch overlay and committed only when every pod has a node.

Two refinements on top of best fit:

- topology (`Policy.topology_key`): a group of several pods is first tried within one domain (a
  zone, a rack), the tightest domain that holds it first; with `topology_required` nowhere else.
- pods that inter-pod rules judge (`interpod.Space`: affinity, anti-affinity, spread, host ports,
  other pods' anti-affinity) or that prefer nodes (preferred node affinity) are placed one at a
  time, each on the tightest node every rule allows given the pods placed before it, as
  kube-scheduler would see them. Everything else takes the bucketed fast path.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..cluster.admission import Admission
from ..cluster.model import GPU, PODS, Constraints, Node
from .capacity import Capacity, Demand, FreeIndex, count, take
from .interpod import Space
from .model import Placement, PodGroup, PodRequest
from .volumes import NO_VOLUMES, Storage, VolumeRule

Signature = Hashable  # a shape's class: an int within a pass (`Shaper`), or the signature itself
ONE_POD = 1000  # every pod also takes one of the node's `pods` allocatable
SHOWN_NODES = 3  # nodes named in why-pending messages
MAX_DOMAINS = 64  # beyond this many topology domains a group is not tried in each one


CAUSES_KEPT = 16  # signatures whose node-level causes are remembered from pass to pass (`Nodes.eligible`)
# signature, lasting -> id(node) -> (the node, its cause): a memo of a pure function of the two (the node object is
# kept with its answer, so an id reused by another object is never taken for it)
_CAUSES: dict[tuple[object, bool], dict[int, tuple[Node, str | None]]] = {}


def signature(constraints: Constraints) -> tuple[object, ...]:
    """A hashable key: pods with equal signatures pass exactly the same node-level filters (volumes aside)."""
    selector = tuple(sorted(constraints.node_selector.items()))
    return (selector, constraints.required_terms, constraints.tolerations, constraints.os)


@dataclass(frozen=True)
class Eligibility:
    nodes: tuple[str, ...]
    excluded: tuple[tuple[str, int], ...]  # (cause, node count), most common first


@dataclass(frozen=True)
class Limits:
    """What the eligible nodes could hold if nothing but DaemonSet and static pods ran on them."""

    max_pods: int  # pods of this demand all eligible nodes together could take
    largest_node: int  # pods of this demand the biggest single node could take
    key_total: int  # lasting allocatable key resource over the eligible nodes
    without_key: int  # eligible nodes offering none of the key resource
    bounds: tuple[tuple[str, int], ...]  # per resource: pods the nodes could take were it the only one asked
    largest: tuple[tuple[str, int], ...]  # the nodes with the most lasting allocatable key resource
    totals: tuple[tuple[str, int], ...] = ()  # lasting allocatable per resource asked

    def limiting(self, pods: int, key: str) -> str:
        """The resource that keeps `pods` pods from fitting: the key resource unless another is shorter."""
        by_name = dict(self.bounds)
        if by_name.get(key, 0) < pods:
            return key
        return next((name for name, bound in self.bounds if bound < pods), key)


class Nodes:
    """The snapshot's nodes, with eligibility and lasting allocatable cached per signature.

    `lasting` is each node's allocatable minus what DaemonSet and static pods hold: what no
    scheduling can ever free. "Never fits" is decided against it.
    """

    def __init__(self, nodes: Sequence[Node], lasting: Mapping[str, Mapping[str, int]] | None = None) -> None:
        self.nodes = nodes
        self.by_name = {node.name: node for node in nodes}
        self.lasting = lasting or {node.name: node.allocatable for node in nodes}
        self._eligible: dict[tuple[Signature, bool], Eligibility] = {}
        self._limits: dict[tuple[object, ...], Limits] = {}
        self._members: dict[tuple[Signature, str], tuple[str, ...]] = {}

    def eligible(self, klass: Signature, constraints: Constraints, volumes: VolumeRule = NO_VOLUMES, *,
                 lasting: bool = False) -> Eligibility:
        """The nodes the pods of `klass` may run on now; `lasting`: may run on once passing conditions clear."""
        found = self._eligible.get((klass, lasting))
        if found is None:
            keep: list[str] = []
            excluded: Counter[str] = Counter()
            # node-level causes depend only on the node and the signature: remembered from the last pass that asked,
            # for the node objects it had (a watch keeps a node's object until the node changes)
            memo_key = (signature(constraints), lasting) if not volumes.checks else None
            before = _CAUSES.get(memo_key, {}) if memo_key is not None else {}
            memo: dict[int, tuple[Node, str | None]] = {}
            for node in self.nodes:
                known = before.get(id(node))
                fresh = known is None or known[0] is not node
                cause = constraints.node_cause(node, lasting=lasting) if fresh else known[1]  # type: ignore[index]
                memo[id(node)] = (node, cause)
                cause = cause or volumes.cause(node)
                if cause is None:
                    keep.append(node.name)
                else:
                    excluded[cause] += 1
            if memo_key is not None:
                _CAUSES.pop(memo_key, None)
                if len(memo) * 2 < len(before):  # a pass over a few nodes (a fast pass's candidates): the rest stay
                    before.update(memo)  # known (a pass over most nodes replaces them all, dropping old objects)
                    memo = before
                _CAUSES[memo_key] = memo  # (the newest last)
                while len(_CAUSES) > CAUSES_KEPT:
                    del _CAUSES[next(iter(_CAUSES))]
            causes = tuple(sorted(excluded.items(), key=lambda item: (-item[1], item[0])))
            found = self._eligible[(klass, lasting)] = Eligibility(tuple(keep), causes)
        return found

    def members(self, klass: Signature, constraints: Constraints, key: str,
                volumes: VolumeRule = NO_VOLUMES) -> tuple[str, ...]:
        """Eligible nodes that offer the key resource at all: the nodes that matter for a shape."""
        found = self._members.get((klass, key))
        if found is None:
            nodes = self.eligible(klass, constraints, volumes).nodes
            found = self._members[(klass, key)] = tuple(
                name for name in nodes if self.by_name[name].allocatable.get(key, 0) > 0)
        return found

    def limits(self, klass: Signature, eligibility: Eligibility, demand: Demand, key: str,
               only: frozenset[str] | None = None) -> Limits:
        cache = (klass, demand, key, only)
        found = self._limits.get(cache)
        if found is None:
            total = largest = key_total = without_key = 0
            bounds = dict.fromkeys((name for name, _ in demand), 0)
            totals = dict.fromkeys((name for name, _ in demand), 0)
            sizes: list[tuple[int, int, str]] = []
            for position, name in enumerate(eligibility.nodes):
                if only is not None and name not in only:
                    continue
                allocatable = self.lasting[name]
                fit = count(allocatable, demand)
                total += fit
                largest = max(largest, fit)
                amount = allocatable.get(key, 0)
                key_total += max(amount, 0)
                without_key += self.by_name[name].allocatable.get(key, 0) <= 0
                sizes.append((-amount, position, name))
                for resource, asked in demand:
                    have = max(allocatable.get(resource, 0), 0)
                    bounds[resource] += have // asked
                    totals[resource] += have
            top = tuple((name, -negative) for negative, _, name in heapq.nsmallest(SHOWN_NODES, sizes) if negative < 0)
            found = self._limits[cache] = Limits(
                total, largest, key_total, without_key, tuple(sorted(bounds.items())), top,
                tuple(sorted(totals.items())))
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
    """Identical pods of one group: same demand, same node-level constraints and volumes."""

    klass: Signature
    constraints: Constraints
    demand: Demand
    key: str
    amount: int  # demand of `key` per pod
    ranks: tuple[int, ...]  # positions in group.pods
    members: tuple[PodRequest, ...] = ()  # the pods, in the order of `ranks`
    volumes: VolumeRule = NO_VOLUMES
    general: bool = False  # placed pod by pod (inter-pod rules or node preferences)
    judged: bool = False  # inter-pod rules judge its pods

    @property
    def pods(self) -> int:
        return len(self.ranks)

    @property
    def request(self) -> dict[str, int]:
        """The per-pod request as the user sees it (without the implicit `pods` slot)."""
        return {name: amount for name, amount in self.demand if name != PODS}


def demand_of(pod: PodRequest) -> Demand:
    asked = dict(pod.requests)
    asked[PODS] = asked.get(PODS, 0) + ONE_POD
    return tuple(sorted((n, a) for n, a in asked.items() if a > 0))


class Shaper:
    """Groups' pods into shapes, for one pass: what each pod is once admitted, its volumes, its class.

    A class is interned to a small int (equal signatures and volume rules, equal class): every index
    and cache of the pass is keyed by it, so nested constraint tuples are hashed once per pod shape,
    not at every lookup. Pods built from the same spec share their constraints object, so what a pod
    becomes is remembered per constraints object and demand.
    """

    def __init__(self, storage: Storage | None = None, admission: Admission | None = None,
                 space: Space | None = None) -> None:
        self.storage = storage
        self.admission = admission
        self.space = space
        self.classes: dict[tuple[object, ...], int] = {}
        self._pods: dict[tuple[int, Demand, str, bool], tuple[Constraints, Constraints, VolumeRule, int]] = {}

    def kind(self, pod: PodRequest, demand: Demand) -> tuple[Constraints, VolumeRule, int]:
        """(constraints once admitted, volume rule, class) of one pod."""
        namespace = pod.namespace or "default"
        ephemeral = any(claim.ephemeral for claim in pod.constraints.claims)
        memo = (id(pod.constraints), demand, namespace if not ephemeral else f"{namespace}/{pod.name}", pod.admitted)
        found = self._pods.get(memo)
        if found is None:
            constraints = pod.constraints
            if self.admission is not None and not pod.admitted:  # a pod that exists went through admission
                constraints = self.admission.admit(constraints, (name for name, _ in demand))
            volumes = (self.storage.rule(namespace, constraints.claims, pod.name) if self.storage is not None
                       else NO_VOLUMES)
            klass = self.classes.setdefault((signature(constraints), volumes.key), len(self.classes))
            found = self._pods[memo] = (pod.constraints, constraints, volumes, klass)  # keeps the key object alive
        return found[1], found[2], found[3]

    def shapes(self, group: PodGroup) -> tuple[Shape, ...]:
        """The group's pods grouped by (class, demand), the largest key amount first."""
        found: dict[tuple[int, Demand], list[int]] = {}
        first: dict[tuple[int, Demand], tuple[Constraints, VolumeRule]] = {}
        for position, pod in enumerate(group.pods):
            demand = demand_of(pod)
            constraints, volumes, klass = self.kind(pod, demand)
            kind = (klass, demand)
            found.setdefault(kind, []).append(position)
            first.setdefault(kind, (constraints, volumes))
        shapes = []
        space = self.space
        for (klass, demand), ranks in found.items():
            constraints, volumes = first[(klass, demand)]
            key = key_resource(demand)
            amount = dict(demand)[key]
            members = tuple(group.pods[r] for r in ranks)
            if constraints is not members[0].constraints:
                members = tuple(_with_constraints(m, constraints) for m in members)
            judged = space is not None and space.used and any(space.judged(m) for m in members)
            general = judged or any(m.constraints.preferred_terms for m in members)
            shapes.append(Shape(klass, constraints, demand, key, amount, tuple(ranks), members, volumes, general,
                                judged))
        shapes.sort(key=lambda shape: (-shape.amount, -shape.pods, shape.ranks[0]))
        return tuple(shapes)


def shapes_of(group: PodGroup, storage: Storage | None = None, admission: Admission | None = None,
              space: Space | None = None) -> tuple[Shape, ...]:
    """The group's pods grouped by (signature, volumes, demand), the largest key amount first.

    With `admission`, each pod's constraints are those it has once admitted (tolerations the
    API server adds); with `storage`, its claims become node tests; with `space`, pods inter-pod
    rules judge are marked for pod-by-pod placement. (A pass uses one `Shaper` for all its groups.)
    """
    return Shaper(storage, admission, space).shapes(group)


def _with_constraints(pod: PodRequest, constraints: Constraints) -> PodRequest:
    if pod.constraints.tolerations == constraints.tolerations:
        return pod
    return PodRequest(pod.name, pod.rank, pod.requests, pod.constraints.with_tolerations(constraints.tolerations),
                      pod.labels, pod.namespace, pod.admitted)


Taken = list[tuple[Shape, list[tuple[str, int]]]]


@dataclass
class Failure:
    """Why the last pod-by-pod placement found no node for a pod: nodes with room refused, by cause."""

    pod: str = ""
    causes: Counter[str] = field(default_factory=Counter)


class Fitter:
    """All-or-nothing placement of groups onto a `Capacity`."""

    def __init__(self, nodes: Nodes, capacity: Capacity, space: Space | None = None, topology_key: str = "",
                 topology_required: bool = False) -> None:
        self.nodes = nodes
        self.capacity = capacity
        self.space = space
        self.topology_key = topology_key
        self.topology_required = topology_required and bool(topology_key)
        self.failure: Failure | None = None
        self._domains: dict[tuple[Signature, str], dict[str, tuple[str, ...]]] = {}

    def members(self, shape: Shape) -> tuple[str, ...]:
        return self.nodes.members(shape.klass, shape.constraints, shape.key, shape.volumes)

    def index(self, shape: Shape, domain: str | None = None) -> FreeIndex:
        if domain is None:
            return self.capacity.index(shape.klass, self.members(shape), shape.key)
        members = self.domains(shape).get(domain, ())
        return self.capacity.index((shape.klass, self.topology_key, domain), members, shape.key)

    def domains(self, shape: Shape) -> dict[str, tuple[str, ...]]:
        """The shape's nodes by their value of the topology label (nodes without it are in none)."""
        found = self._domains.get((shape.klass, shape.key))
        if found is None:
            grouped: dict[str, list[str]] = {}
            key = self.topology_key
            for name in self.members(shape):
                value = self.nodes.by_name[name].labels.get(key)
                if value is not None:
                    grouped.setdefault(value, []).append(name)
            found = self._domains[(shape.klass, shape.key)] = {v: tuple(n) for v, n in sorted(grouped.items())}
        return found

    def topology_applies(self, shapes: Sequence[Shape]) -> bool:
        if not self.topology_key:
            return False
        return self.topology_required or sum(shape.pods for shape in shapes) > 1

    def domain_order(self, shapes: Sequence[Shape], overlay: Mapping[str, Mapping[str, int]] | None) -> list[str]:
        """Domains that may hold the group, the tightest (least free key resource) first."""
        first = shapes[0]
        rows = []
        for domain in self.domains(first):
            possible = True
            for shape in shapes:
                index = self.index(shape, domain)
                if not overlay:
                    total = index.total(shape.demand)
                    if total is not None and total < shape.pods:
                        possible = False
                        break
            if possible:
                rows.append((self.index(first, domain).key_sum, domain))
        rows.sort()
        return [domain for _, domain in rows[:MAX_DOMAINS]]

    def try_place(self, shapes: Sequence[Shape],
                  overlay: Mapping[str, Mapping[str, int]] | None = None) -> Taken | None:
        """Nodes for every pod, or None. Nothing is committed; `overlay` overrides free capacity."""
        self.failure = None
        if self.topology_applies(shapes) and (len(self.domains(shapes[0])) > 1 or self.topology_required):
            for domain in self.domain_order(shapes, overlay):
                found = self._place(shapes, overlay, domain)
                if found is not None:
                    return found
            if self.topology_required:
                return None
        return self._place(shapes, overlay, None)

    def _place(self, shapes: Sequence[Shape], overlay: Mapping[str, Mapping[str, int]] | None,
               domain: str | None) -> Taken | None:
        if any(shape.general for shape in shapes):
            return self._general(shapes, overlay, domain)
        if len(shapes) == 1 and not overlay:
            shape = shapes[0]
            index = self.index(shape, domain)
            total = index.total(shape.demand)
            if total is not None and total < shape.pods:
                return None
            found = take(index, self.capacity, shape.demand, shape.amount, shape.pods)
            return None if found is None else [(shape, found)]
        if len(shapes) == 1:  # one shape with an overlay: take() only reads it
            shape = shapes[0]
            found = take(self.index(shape, domain), self.capacity, shape.demand, shape.amount, shape.pods, overlay)
            return None if found is None else [(shape, found)]
        scratch: dict[str, dict[str, int]] = {node: dict(free) for node, free in (overlay or {}).items()}
        taken: Taken = []
        for shape in shapes:
            found = take(self.index(shape, domain), self.capacity, shape.demand, shape.amount, shape.pods, scratch)
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

    def _candidates(self, index: FreeIndex, amount: int,
                    overlay: Mapping[str, Mapping[str, int]] | None) -> Iterator[tuple[int, str]]:
        if not overlay:
            return index.ascending(amount)
        members, key, position = index.members, index.key, self.capacity.position
        extra = sorted(((free.get(key, 0), node) for node, free in overlay.items()
                        if node in members and free.get(key, 0) >= amount),
                       key=lambda item: (item[0], position[item[1]]))
        base = ((value, node) for value, node in index.ascending(amount) if node not in overlay)
        return heapq.merge(base, extra, key=lambda item: item[0])

    def _general(self, shapes: Sequence[Shape], overlay: Mapping[str, Mapping[str, int]] | None,
                 domain: str | None) -> Taken | None:
        """Pod by pod, each on the tightest node every rule allows given the pods placed before it."""
        space = self.space
        scratch: dict[str, dict[str, int]] = {}
        added: list[tuple[PodRequest, str]] = []
        taken: Taken = []
        try:
            for shape in shapes:
                index = self.index(shape, domain)
                found: list[tuple[str, int]] = []
                for member in shape.members:
                    node = self._choose(shape, member, index, overlay, scratch, domain)
                    if node is None:
                        return None
                    free = scratch.get(node)
                    if free is None:
                        base = overlay.get(node) if overlay else None
                        free = scratch[node] = dict(base if base is not None else self.capacity.free[node])
                    for name, amount in shape.demand:
                        free[name] = free.get(name, 0) - amount
                    if space is not None:
                        # a group's pods are created together, so each sees the ones before it as kube-scheduler
                        # does (a preemptor's too: they only stop counting for the pass's other groups once placed)
                        space.add_pod(member, node)
                        added.append((member, node))
                    found.append((node, 1))
                taken.append((shape, found))
            return taken
        finally:
            if space is not None:
                for member, node in reversed(added):
                    space.add_pod(member, node, sign=-1)

    def _choose(self, shape: Shape, member: PodRequest, index: FreeIndex,
                overlay: Mapping[str, Mapping[str, int]] | None, scratch: Mapping[str, Mapping[str, int]],
                domain: str | None) -> str | None:
        space = self.space if shape.judged else None
        preferred = member.constraints.preferred_terms
        best: tuple[int, str] | None = None  # (free key amount, node) of the first node that passed
        best_score = -1
        causes: Counter[str] = Counter()
        free_of = self.capacity.free
        for value, node in self._candidates(index, shape.amount, overlay):
            if best is not None and value > best[0]:
                break
            free = scratch.get(node)
            if free is None:
                free = (overlay.get(node) if overlay else None) or free_of[node]
            if count(free, shape.demand) < 1:
                causes["insufficient resources"] += 1
                continue
            if space is not None:
                cause = space.cause(member, node)
                if cause is not None:
                    causes[cause] += 1
                    continue
            if not preferred:
                return node
            score = member.constraints.preference(self.nodes.by_name[node])
            if best is None or score > best_score:
                best, best_score = (value, node), score
        if best is not None:
            return best[1]
        if domain is None and overlay is None:
            self.failure = Failure(member.name, causes)
        return None

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


def placed_pods(group: PodGroup, taken: Taken) -> list[tuple[PodRequest, str]]:
    """(pod, node) for every pod of a placement, in rank order within each shape."""
    out = []
    for shape, found in taken:
        members = iter(shape.members or tuple(group.pods[r] for r in shape.ranks))
        for node, pods in found:
            for _ in range(pods):
                out.append((next(members), node))
    return out
