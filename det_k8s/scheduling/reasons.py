"""Building `Reason` data for groups that wait or are rejected (the text is `explain.describe`'s job).

A waiting reason is about the resource that is short (the *limiting* resource: the one of which
the fewest pods would fit if it were the only one asked; the key resource on a tie), on the
group's eligible nodes, right now: allocatable = in use + reserved for a starved group + free
(free counted at zero on a node that is over-committed), the nodes with the most of it free (only
nodes with some), who holds it (running det-k8s groups, other pods by namespace, this plan's own
placements), the nodes excluded and why, the nodes inter-pod rules refused, who is ahead. A
rejected reason is about the same nodes with only DaemonSet and static pods on them, which no
scheduling decision frees: what can never fit.

Waiting groups usually come in crowds once a cluster is full, asking alike: the numbers are cached
per (nodes, demand) until the capacity changes.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..cluster.model import Snapshot
from ..labels import EXPERIMENT, GROUP
from .fit import SHOWN_NODES, Failure, Fitter, Limits, Nodes, Shape
from .labels import determined_task, is_managed
from .model import PodGroup, QueueHold, Reason, ReasonCode
from .reserve import Reservations

SHOWN_AHEAD = 3
SHOWN_HOLDERS = 3


def _lacking(nodes: Nodes, shape: Shape, name: str) -> str | None:
    """The first resource the shape asks for that node `name` has none of (the key resource first): kube-scheduler
    finds it Insufficient there whatever is free, so the node is not one of the shape's eligible nodes."""
    allocatable = nodes.by_name[name].allocatable
    for resource in (shape.key, *sorted(r for r, _ in shape.demand if r != shape.key)):
        if resource != "pods" and allocatable.get(resource, 0) <= 0:
            return resource
    return None


def complete(nodes: Nodes, shape: Shape, members: Sequence[str]) -> tuple[str, ...]:
    """`members` that offer every resource the shape asks for (an extended resource like vpc.amazonaws.com/efa
    that only some nodes have included)."""
    return tuple(name for name in members if _lacking(nodes, shape, name) is None)


def _excluded(nodes: Nodes, shape: Shape, missing: bool = True) -> tuple[tuple[str, int], ...]:
    """Why the nodes the shape cannot use are out: its constraints' causes, then (with `missing`) `no <resource>`
    for eligible nodes without a resource it asks for, naming that resource."""
    eligibility = nodes.eligible(shape.klass, shape.constraints, shape.volumes)
    lacking: Counter[str] = Counter()
    if missing:
        for name in eligibility.nodes:
            resource = _lacking(nodes, shape, name)
            if resource is not None:
                lacking[f"no {resource}"] += 1
    return (*eligibility.excluded, *sorted(lacking.items(), key=lambda item: (-item[1], item[0])))


class Explainer:
    """Reasons for one pass, with the numbers they need cached until capacity changes."""

    def __init__(self, snapshot: Snapshot, fitter: Fitter, reservation: Reservations) -> None:
        self.snapshot = snapshot
        self.fitter = fitter
        self.reservation = reservation
        self._holders: dict[str, dict[str, list[tuple[tuple[str, str], int]]]] = {}
        self._used = snapshot.used  # free before this plan: allocatable minus this
        self._cache: dict[tuple[object, ...], dict[str, Any]] = {}
        self._about_cache: dict[tuple[object, ...], tuple[Any, ...]] = {}

    # -- rejected --------------------------------------------------------------------------------

    def rejection(self, group: PodGroup, shape: Shape, limits: Limits, code: ReasonCode) -> Reason:
        """The group can never fit the eligible nodes (or there are none)."""
        nodes = self.fitter.nodes
        members = complete(nodes, shape, self.fitter.members(shape))
        eligibility = nodes.eligible(shape.klass, shape.constraints, shape.volumes)
        if len(members) < len(eligibility.nodes):  # the numbers over the nodes that offer all it asks for
            limits = nodes.limits(shape.klass, eligibility, shape.demand, shape.key, frozenset(members))
        short = limits.limiting(shape.pods, shape.key)
        largest = limits.largest
        total = limits.key_total
        if short != shape.key:
            sized = sorted(((nodes.lasting[n].get(short, 0), i, n) for i, n in enumerate(members)),
                           key=lambda row: (-row[0], row[1]))
            largest = tuple((n, amount) for amount, _, n in sized[:SHOWN_NODES] if amount > 0)
            total = dict(limits.totals).get(short, 0)
        return Reason(
            code=code, pods=group.size, per_pod=shape.request, resource=short, key=shape.key,
            needed=dict(shape.demand).get(short, 0) * shape.pods, cluster_total=total,
            fits_at_most=limits.max_pods, largest_free=largest, limiting=short, eligible_nodes=len(members),
            excluded=_excluded(nodes, shape), autoscaling=True,
        )

    def domain_rejection(self, group: PodGroup, shapes: Sequence[Shape], key: str, nodes: Nodes) -> Reason:
        """The policy requires one topology domain, and none can ever hold the group."""
        shape = shapes[0]
        eligibility = nodes.eligible(shape.klass, shape.constraints, shape.volumes)
        best = ("", 0)
        for domain, members in self.fitter.domains(shape).items():
            limits = nodes.limits(shape.klass, eligibility, shape.demand, shape.key, frozenset(members))
            if limits.max_pods > best[1] or not best[0]:
                best = (domain, min(limits.max_pods, shape.pods))
        return Reason(
            code=ReasonCode.EXCEEDS_DOMAIN, pods=group.size, per_pod=shape.request, resource=shape.key,
            key=shape.key, needed=shape.amount * shape.pods, eligible_nodes=len(self.fitter.members(shape)),
            excluded=_excluded(nodes, shape, missing=False), topology=(key, best[0], best[1]), autoscaling=True,
        )

    def pod_rules_rejection(self, group: PodGroup, shapes: Sequence[Shape], failure: Failure | None) -> Reason:
        """Even with only DaemonSet and static pods running, the group's pods' rules leave no node."""
        shape = shapes[0]
        blocked = tuple(sorted(failure.causes.items(), key=lambda item: (-item[1], item[0]))) if failure else ()
        pod = failure.pod if failure and failure.pod else (shape.members[0].name if shape.members else "")
        return Reason(
            code=ReasonCode.EXCEEDS_CLUSTER, pods=group.size, per_pod=shape.request, resource=shape.key,
            key=shape.key, needed=shape.amount * shape.pods, eligible_nodes=len(self.fitter.members(shape)),
            excluded=_excluded(self.fitter.nodes, shape, missing=False), blocked=blocked, detail=pod, autoscaling=True,
        )

    # -- waiting ---------------------------------------------------------------------------------

    def holders(self, resource: str) -> dict[str, list[tuple[tuple[str, str], int]]]:
        """Per node, who holds `resource`: ("group", experiment) for det-k8s groups, ("task", `exp 3 trial 1`) for
        the Determined master's tasks (running groups too, in a pass that serves them), ("pods", namespace) for
        others."""
        found = self._holders.get(resource)
        if found is None:
            per_node: dict[str, dict[tuple[str, str], int]] = {}
            for pod in self.snapshot.pods:
                amount = pod.requests.get(resource, 0) if resource != "pods" else 1000
                if amount <= 0 or not pod.active:
                    continue
                labels = pod.labels
                if is_managed(labels):
                    who = ("group", labels.get(EXPERIMENT) or labels[GROUP])
                else:
                    task = determined_task(pod)
                    who = ("task", task) if task is not None else ("pods", pod.namespace)
                bucket = per_node.setdefault(pod.node or "", {})
                bucket[who] = bucket.get(who, 0) + amount
            found = self._holders[resource] = {node: list(items.items()) for node, items in per_node.items()}
        return found

    def numbers(self, shape: Shape) -> dict[str, Any]:
        """Free, reserved and bounds over the shape's eligible nodes, per resource asked (cached until capacity
        changes); allocatable, which never changes, cached for the pass."""
        capacity = self.fitter.capacity
        key = (shape.klass, shape.key, shape.demand, capacity.version)
        found = self._cache.get(key)
        if found is not None:
            return found
        members = complete(self.fitter.nodes, shape, self.fitter.members(shape))
        blocked = capacity.blocked
        resources = [name for name, _ in shape.demand]
        free = dict.fromkeys(resources, 0)
        reserved = dict.fromkeys(resources, 0)
        bounds = dict.fromkeys(resources, 0)
        asked = shape.demand
        free_of = capacity.free
        for node in members:
            now = free_of[node]
            if node in blocked:
                for name, _ in asked:
                    reserved[name] += max(now.get(name, 0), 0)
                continue
            for name, per_pod in asked:
                amount = now.get(name, 0)
                if amount > 0:
                    free[name] += amount
                    bounds[name] += amount // per_pod
        static = ("allocatable", shape.klass, shape.key, shape.demand)
        total = self._cache.get(static)
        if total is None:
            allocatable = dict.fromkeys(resources, 0)
            for node in members:
                have = capacity.allocatable[node]
                for name in resources:
                    allocatable[name] += max(have.get(name, 0), 0)
            total = self._cache[static] = allocatable
        found = self._cache[key] = {"allocatable": total, "free": free, "reserved": reserved, "bounds": bounds,
                                    "members": members}
        return found

    def blocks(self, members: Sequence[str], resource: str) -> tuple[tuple[tuple[str, int], ...], int]:
        """The nodes with the most of `resource` free (unreserved, some free), and what this plan placed there."""
        capacity = self.fitter.capacity
        blocked, free_of, allocatable = capacity.blocked, capacity.free, capacity.allocatable
        rows = []
        planned = 0
        for position, node in enumerate(members):
            amount = max(free_of[node].get(resource, 0), 0)
            before = max(allocatable[node].get(resource, 0) - self._used.get(node, {}).get(resource, 0), 0)
            planned += before - amount
            if amount > 0 and node not in blocked:
                rows.append((amount, -position, node))
        largest = tuple((node, amount) for amount, _, node in heapq.nlargest(SHOWN_NODES, rows))
        return largest, planned

    def held_by(self, shape: Shape, members: Sequence[str], resource: str) -> list[tuple[str, str, int]]:
        """Who holds most of `resource` on the nodes, from the snapshot (most first, the first few)."""
        cache = ("holders", shape.klass, shape.key, resource)
        found = self._cache.get(cache)
        if found is None:
            totals: Counter[tuple[str, str]] = Counter()
            holders = self.holders(resource)
            for node in members:
                for who, amount in holders.get(node, ()):
                    totals[who] += amount
            rows = heapq.nsmallest(SHOWN_HOLDERS, totals.items(), key=lambda item: (-item[1], item[0]))
            found = self._cache[cache] = {"rows": [(kind, name, amount) for (kind, name), amount in rows]}
        return list(found["rows"])  # the first few only: who is named

    def waiting(self, group: PodGroup, shapes: Sequence[Shape], code: ReasonCode, *,
                ahead: Sequence[PodGroup], reserved_for: PodGroup | None = None,
                reserved_nodes: tuple[str, ...] = (), preemptible: int | None = None,
                would_start: bool | None = None, detail: str = "", failure: object = None,
                preemption: str = "", topology_key: str = "") -> Reason:
        """Why a group that fits the cluster waits now."""
        shape = shapes[0]
        cache = (shape.klass, shape.demand, shape.pods, topology_key, self.fitter.capacity.version)
        found = self._about_cache.get(cache)
        if found is None:
            found = self._about_cache[cache] = self._about(shape, topology_key)
        short, largest, allocatable, free, reserved, holders, topology, fits, eligible, excluded = found
        blocked: tuple[tuple[str, int], ...] = ()
        if isinstance(failure, Failure):
            blocked = tuple((cause, n) for cause, n in sorted(failure.causes.items(), key=lambda i: (-i[1], i[0]))
                            if cause != "insufficient resources")
        return Reason(
            code=code, pods=group.size, per_pod=shape.request, resource=short, key=shape.key,
            needed=sum(dict(s.demand).get(short, 0) * s.pods for s in shapes),
            cluster_total=allocatable, free_total=free, reserved=reserved,
            in_use=max(allocatable - free - reserved, 0), fits_at_most=fits,
            largest_free=largest, limiting=short, eligible_nodes=eligible, excluded=excluded,
            ahead=tuple(g.experiment for g in ahead[:SHOWN_AHEAD]),
            ahead_ids=tuple(g.id for g in ahead[:SHOWN_AHEAD]),
            ahead_count=len(ahead), reserved_for=reserved_for.experiment if reserved_for else None,
            reserved_nodes=reserved_nodes, preemptible=preemptible, detail=detail,
            holders=holders, blocked=blocked, topology=topology,
            preemption_would_start=would_start, autoscaling=False, preemption=preemption,
        )

    def queue_limited(self, group: PodGroup, shapes: Sequence[Shape], hold: QueueHold,
                      ahead: Sequence[PodGroup]) -> Reason:
        """A group a queue's limit holds back: the queue, the ask and who is ahead. The cluster's free capacity is
        not why it waits, so it is not worked out (the line does not show it, and a pass that holds thousands of
        groups by their queues would spend most of its time on it)."""
        shape = shapes[0]
        return Reason(
            code=ReasonCode.QUEUE_LIMIT, pods=group.size, per_pod=shape.request, resource=shape.key, key=shape.key,
            needed=sum(dict(s.demand).get(shape.key, 0) * s.pods for s in shapes),
            ahead=tuple(g.experiment for g in ahead[:SHOWN_AHEAD]), ahead_ids=tuple(g.id for g in ahead[:SHOWN_AHEAD]),
            ahead_count=len(ahead), queue=hold)

    def _about(self, shape: Shape, topology_key: str) -> tuple[Any, ...]:
        """The parts of a waiting reason that depend only on the shape and the capacity now."""
        numbers = self.numbers(shape)
        index = self.fitter.index(shape)
        bounds = numbers["bounds"]
        short = min((name for name, _ in shape.demand),
                    key=lambda name: (bounds[name], name != shape.key, name))
        if bounds[short] >= shape.pods:  # each resource alone would do: the key resource is the one to show
            short = shape.key
        largest, planned = self.blocks(numbers["members"], short)
        holders = self.held_by(shape, numbers["members"], short)
        if planned > 0:
            holders.append(("planned", "this plan", planned))
            holders.sort(key=lambda row: (-row[2], row[0], row[1]))
        topology = None
        if topology_key:
            best = ("", 0)
            for domain in self.fitter.domains(shape):
                total = self.fitter.index(shape, domain).total(shape.demand) or 0
                if total > best[1]:
                    best = (domain, total)
            if best[0]:
                topology = (topology_key, best[0], min(best[1], shape.pods))
        return (short, largest, numbers["allocatable"][short], numbers["free"][short], numbers["reserved"][short],
                tuple(holders[:SHOWN_HOLDERS]), topology, index.total(shape.demand), len(numbers["members"]),
                _excluded(self.fitter.nodes, shape))
