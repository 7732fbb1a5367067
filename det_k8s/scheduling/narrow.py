"""The nodes a fast pass plans a ready gang on: the tightest ones that can take its pods (issue 24).

kube-scheduler does not score every node of a large cluster either (`percentageOfNodesToScore`: about 10% of
5,000 nodes). A pass over every node of the snapshot costs milliseconds per thousand nodes before the first
pod is placed (free capacity, indexes, eligibility), and at 5,000 nodes that was most of the time from a gang's
last pod to its binding. Best fit places a gang on the nodes whose free key resource (GPUs, else CPU) is
smallest and still enough, so planning it on those nodes alone finds the placement the whole snapshot would,
whenever nothing else decides where it goes.

`narrowed` gives the smaller snapshot only where that holds, and None otherwise (the caller plans on the whole
snapshot): no team queues and no required topology; only pods that exist (the master's: admission has had its
say); no queued pod with pod (anti-)affinity, spread, host ports,
volumes, DRA claims, preferred node affinity or something det-k8s does not model; no pod in the cluster with pod
(anti-)affinity or spread (their domains reach beyond any subset); no DRA devices published. The subset keeps
every pod on its nodes, so their free capacity is exact, and the running groups wholly on them (the others cannot
be victims of a plan that sees only these nodes). A plan from it is used only when it places every queued gang
with no victim and nothing waiting (`clean`); anything else is planned again on the whole snapshot.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace

from ..cluster.model import AMD_GPU, GPU, Snapshot
from .model import Plan, PodGroup, Policy, RunningGroup

MIN_NODES = 64  # candidate nodes for each pod size of a pass's gangs, at least
NODES_PER_POD = 2  # and this many per pod of that size


def narrowed(snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy,
             running: Sequence[RunningGroup]) -> tuple[Snapshot, list[RunningGroup]] | None:
    """(the snapshot on the candidate nodes, the running groups wholly on them), or None: plan on the whole."""
    if not queue or policy.queues is not None or policy.topology_required or snapshot.slices:
        return None
    pods = [pod for group in queue for pod in group.pods]
    for pod in pods:
        c = pod.constraints
        if not pod.admitted:
            return None  # (a pod to be created: admission plugins detected from every node and pod judge it)
        if c.interpod or c.claims or c.resource_claims or c.preferred_terms or c.unmodelled:
            return None
    if any(p.constraints.interpod for p in snapshot.pods):
        return None
    key = next((name for name in (GPU, AMD_GPU) if any(p.requests.get(name, 0) > 0 for p in pods)), "cpu")
    sizes: dict[int, int] = {}  # each pod size of the key resource -> the pods of at least that size
    for pod in pods:
        amount = pod.requests.get(key, 0)
        if amount <= 0:
            return None  # (a pod without the key resource may go anywhere: the whole snapshot)
        sizes[amount] = sizes.get(amount, 0) + 1
    if sum(max(MIN_NODES, NODES_PER_POD * n) for n in sizes.values()) * 2 >= len(snapshot.nodes):
        return None  # (a small cluster is planned whole: little to save)
    used = snapshot.used
    room = [(node.allocatable.get(key, 0) - used[node.name].get(key, 0), i)
            for i, node in enumerate(snapshot.nodes) if node.ready and not node.unschedulable]
    chosen: set[int] = set()
    for size, count in sizes.items():  # for each size, the tightest nodes that take a pod of it, best fit's first picks
        wanted = max(MIN_NODES, NODES_PER_POD * count)
        found = heapq.nsmallest(wanted, ((free, i) for free, i in room if free >= size))
        if len(found) < wanted:
            return None  # (few nodes have room: the whole snapshot says best why a gang waits)
        chosen.update(i for _, i in found)
    nodes = tuple(snapshot.nodes[i] for i in sorted(chosen))  # (in the snapshot's order)
    kept = {node.name for node in nodes}
    narrow = replace(snapshot, nodes=nodes, pods=tuple(p for p in snapshot.pods if p.node is None or p.node in kept))
    return narrow, [g for g in running if all(p.node in kept for p in g.pods)]


def clean(plan: Plan, queue: Sequence[PodGroup]) -> bool:
    """The plan places every queued gang, evicting nothing and holding nothing back."""
    return (len(plan.placements) == len(queue) and not plan.waiting and not plan.rejected and not plan.victims
            and not plan.preempting and not plan.reservations)
