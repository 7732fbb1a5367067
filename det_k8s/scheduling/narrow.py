"""The nodes a fast pass plans ready gangs on: the tightest ones that can take their pods (issue 24).

kube-scheduler does not score every node of a large cluster either (`percentageOfNodesToScore`: about 10% of
5,000 nodes). A pass over every node of the snapshot costs milliseconds per thousand nodes before the first
pod is placed (free capacity, indexes, eligibility), and at 5,000 nodes that was most of the time from a gang's
last pod to its binding. Best fit places a pod on the node whose free key resource (GPUs, else CPU: `fit.key_resource`)
is smallest and still enough, so planning the gangs on the tightest nodes for each pod size finds the placement
the whole snapshot would, whenever nothing else decides where they go.

`narrowed` gives the smaller snapshot only where that holds, and None otherwise (the caller plans on the whole
snapshot):
- no team queues and no required topology; a gang of more than one pod only where the nodes are all in one
  topology domain (or none has the label): the preferred domain is chosen from whole domains;
- only pods that exist (the master's: admission has had its say), each asking for its key resource;
- no queued pod with pod (anti-)affinity, spread, host ports, volumes, DRA claims, preferred node affinity or
  something det-k8s does not model; no DRA devices published; no pod in the cluster with required pod
  anti-affinity (the only rule of another pod that reaches a new pod, and across a whole domain).
The subset keeps every pod on its nodes, so their free capacity is exact, and the running groups wholly on them
(the others cannot be victims of a plan that sees only these nodes). A plan from it is used only when `clean`: it
places every gang, with no victim and nothing waiting, and every pod on a node among the tightest for its own size
(a pod that spilled onto a looser node chosen for another size would skip tighter nodes outside the subset).

What it reads of every node (its allocatable key resource, whether it takes pods, its topology domain) is kept from
pass to pass (`NodeIndex`): the watch's view replaces only the nodes an event changed, so the next snapshot's nodes
are mostly the same objects, and only the ones that are not are read again. The tightest nodes are then the nodes
pods use (their free capacity worked out from the pods) merged with the empty ones in order of what they have, a walk
that stops at the count wanted, instead of every node's free capacity worked out and ordered on every pass.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import compress, islice
from operator import is_not

from ..cluster.model import GPU, Node, Snapshot
from .model import Plan, PodGroup, PodRequest, Policy, RunningGroup

MIN_NODES = 64  # candidate nodes for each pod size of a pass's gangs, at least
NODES_PER_POD = 2  # and this many per pod of that size

Size = tuple[str, int]  # (the key resource, the amount a pod asks for)


@dataclass(frozen=True)
class Narrowed:
    snapshot: Snapshot  # the candidate nodes, every pod on them (and unbound ones)
    running: tuple[RunningGroup, ...]  # the running groups wholly on them
    candidates: Mapping[Size, frozenset[str]]  # per pod size, the tightest nodes with room for it


def size_of(pod: PodRequest) -> Size | None:
    """The resource best fit orders nodes by for this pod (as `fit.key_resource`), and how much it asks."""
    key = GPU if pod.requests.get(GPU, 0) > 0 else "cpu"
    amount = pod.requests.get(key, 0)
    return (key, amount) if amount > 0 else None


def narrowed(snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy,
             running: Sequence[RunningGroup]) -> Narrowed | None:
    """The snapshot cut to the candidate nodes, or None: plan on the whole (see the module docstring)."""
    if not queue or policy.queues is not None or policy.topology_required or snapshot.slices:
        return None
    sizes: dict[Size, int] = {}
    for group in queue:
        for pod in group.pods:
            c = pod.constraints
            size = size_of(pod)
            if (not pod.admitted or size is None or c.interpod or c.claims or c.resource_claims or c.preferred_terms
                    or c.unmodelled):
                return None
            sizes[size] = sizes.get(size, 0) + 1
    if sum(max(MIN_NODES, NODES_PER_POD * n) for n in sizes.values()) * 2 >= len(snapshot.nodes):
        return None  # (a small cluster is planned whole: little to save)
    if any(p.constraints.anti_affinity for p in snapshot.pods):
        return None
    # what the pods hold of each key resource, per node (`Snapshot.used` for those keys alone: a fast pass at 5,000
    # nodes need not work out every resource of every node)
    keys = {key for key, _ in sizes}
    held: dict[str, dict[str, int]] = {key: {} for key in keys}
    for other in snapshot.pods:
        where = other.node
        if where is not None and other.active:
            for key in keys:
                amount = other.requests.get(key, 0)
                if amount:
                    on = held[key]
                    on[where] = on.get(where, 0) + amount
    topology = policy.topology_key if any(len(group.pods) > 1 for group in queue) else ""
    candidates: dict[Size, frozenset[str]] = {}
    chosen: set[int] = set()
    with _LOCK:  # (the indexes are shared from pass to pass)
        indexes = {key: _index(snapshot.nodes, key, topology) for key in keys}
        if topology and len(indexes[next(iter(keys))].domains) > 1:
            return None  # (a gang of several pods: the domain it prefers is chosen by what the whole domain has free)
        for (key, amount), count in sizes.items():  # the tightest nodes that take a pod of each size
            wanted = max(MIN_NODES, NODES_PER_POD * count)
            found = indexes[key].tightest(amount, held[key], wanted)
            if len(found) < wanted:
                return None  # (few nodes have room: the whole snapshot says best why a gang waits)
            chosen.update(i for _, i in found)
            candidates[(key, amount)] = frozenset(snapshot.nodes[i].name for _, i in found)
    nodes = tuple(snapshot.nodes[i] for i in sorted(chosen))  # (in the snapshot's order)
    kept = {node.name for node in nodes}
    narrow = replace(snapshot, nodes=nodes, pods=tuple(p for p in snapshot.pods if p.node is None or p.node in kept))
    return Narrowed(narrow, tuple(g for g in running if all(p.node in kept for p in g.pods)), candidates)


def clean(plan: Plan, queue: Sequence[PodGroup], narrow: Narrowed | None = None) -> bool:
    """The plan places every queued gang, evicting nothing and holding nothing back; with `narrow`, every pod on a
    node among the tightest for its own size."""
    if (len(plan.placements) != len(queue) or plan.waiting or plan.rejected or plan.victims or plan.preempting
            or plan.reservations):
        return False
    if narrow is None:
        return True
    for group in queue:
        by_name = {pod.name: pod for pod in group.pods}
        for name, node in plan.placements.get(group.id, ()):
            pod = by_name.get(name)
            size = size_of(pod) if pod is not None else None
            if size is None or node not in narrow.candidates.get(size, ()):
                return False
    return True


class NodeIndex:
    """What `narrowed` reads of every node of one tuple of nodes, for one key resource (and topology label): each
    node's allocatable amount (-1 where it takes no pods: not ready, or cordoned), the nodes that take pods by that
    amount, and how many nodes each domain of the label has. `follow` moves it to the next snapshot's nodes by the
    ones that are other objects (see the module docstring). Node names are unique in a snapshot (the API server's
    names; the view holds nodes by name): `tightest` finds a used node by its name."""

    def __init__(self, nodes: tuple[Node, ...], key: str, topology: str) -> None:
        self.key, self.topology = key, topology
        self._build(nodes)

    def _build(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self.names = [node.name for node in nodes]
        self.positions = {name: i for i, name in enumerate(self.names)}  # (names stay: `follow` builds afresh)
        self.amounts = [self._amount(node) for node in nodes]
        self.by_amount: dict[int, list[int]] = {}
        for i, amount in enumerate(self.amounts):
            if amount >= 0:
                self.by_amount.setdefault(amount, []).append(i)
        self.levels = sorted(self.by_amount)
        self.domains: Counter[str | None] = Counter(
            node.labels.get(self.topology) for node in nodes) if self.topology else Counter()

    def _amount(self, node: Node) -> int:
        return node.allocatable.get(self.key, 0) if node.ready and not node.unschedulable else -1

    def follow(self, nodes: tuple[Node, ...]) -> None:
        """Be the index of `nodes`: by the nodes that changed when the names are the same, in the same order, and at
        most a quarter of them are other objects; built afresh otherwise."""
        if nodes is self.nodes:
            return
        old = self.nodes
        changed = list(compress(range(len(nodes)), map(is_not, old, nodes))) if len(nodes) == len(old) else None
        if changed is None or len(changed) * 4 > len(nodes) or any(old[i].name != nodes[i].name for i in changed):
            self._build(nodes)
            return
        for i in changed:
            before, after = old[i], nodes[i]
            amount = self._amount(after)
            if amount != self.amounts[i]:
                self._move(i, self.amounts[i], amount)
                self.amounts[i] = amount
            if self.topology:
                was, now = before.labels.get(self.topology), after.labels.get(self.topology)
                if was != now:
                    self.domains[was] -= 1
                    if not self.domains[was]:
                        del self.domains[was]
                    self.domains[now] += 1
        self.nodes = nodes

    def _move(self, i: int, before: int, after: int) -> None:
        if before >= 0:
            bucket = self.by_amount[before]
            del bucket[bisect.bisect_left(bucket, i)]
            if not bucket:
                del self.by_amount[before]
                del self.levels[bisect.bisect_left(self.levels, before)]
        if after >= 0:
            if after not in self.by_amount:
                self.by_amount[after] = []
                bisect.insort(self.levels, after)
            bisect.insort(self.by_amount[after], i)

    def tightest(self, amount: int, held: Mapping[str, int], wanted: int) -> list[tuple[int, int]]:
        """The `wanted` nodes with the least free (allocatable less `held`, by node name) that is still `amount` or
        more, as (free, index), ordered by free, then index: the nodes pods use worked out one by one, merged with
        the unused ones taken in order of their allocatable amount."""
        used = []
        for name, taken in held.items():
            i = self.positions.get(name)
            if i is not None and self.amounts[i] - taken >= amount and self.amounts[i] >= 0:
                used.append((self.amounts[i] - taken, i))
        used.sort()
        return list(islice(heapq.merge(used, self._unused(amount, held)), wanted))

    def _unused(self, amount: int, held: Mapping[str, int]) -> Iterator[tuple[int, int]]:
        names = self.names
        for level in self.levels[bisect.bisect_left(self.levels, amount):]:
            for i in self.by_amount[level]:
                if names[i] not in held:
                    yield level, i


_INDEXES: dict[tuple[str, str], NodeIndex] = {}
_LOCK = threading.Lock()


def _index(nodes: tuple[Node, ...], key: str, topology: str) -> NodeIndex:
    """The index of these nodes for `key` (and the `topology` label): the last one, followed to them (under _LOCK).
    It is out of the memo while it follows: one stopped half-way (an exception, a signal) is never used again."""
    found = _INDEXES.pop((key, topology), None)
    if found is None:
        found = NodeIndex(nodes, key, topology)
    else:
        found.follow(nodes)
    _INDEXES[(key, topology)] = found
    return found
