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
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ..cluster.model import GPU, Snapshot
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
    domains = policy.topology_key and any(len(group.pods) > 1 for group in queue)
    seen: set[str | None] = set()
    rooms: dict[str, list[tuple[int, int]]] = {key: [] for key in keys}
    for i, node in enumerate(snapshot.nodes):  # (one loop over the nodes for all of it)
        if domains:
            seen.add(node.labels.get(policy.topology_key))
        if node.ready and not node.unschedulable:
            for key in keys:
                rooms[key].append((node.allocatable.get(key, 0) - held[key].get(node.name, 0), i))
    if len(seen) > 1:
        return None  # (a gang of several pods: the domain it prefers is chosen by what the whole domain has free)
    candidates: dict[Size, frozenset[str]] = {}
    chosen: set[int] = set()
    for (key, amount), count in sizes.items():  # the tightest nodes that take a pod of each size
        wanted = max(MIN_NODES, NODES_PER_POD * count)
        found = heapq.nsmallest(wanted, ((free, i) for free, i in rooms[key] if free >= amount))
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
