"""The starvation guard: nodes held for the first group that has waited long although it would fit.

A group that fits the eligible nodes' allocatable but not their free capacity would starve if
smaller groups kept taking every GPU that frees up. Starving takes time, though: a group that
has just arrived may fit on the next pass, and holding nodes idle for it would only waste them.
So the first such group of a pass that has waited `Policy.reserve_after` seconds (`waited`)
reserves the nodes that will free up soonest (most free first) until, once the det-k8s groups on them finish,
it fits there. Later groups of the pass backfill elsewhere, or into the reservation's *slack*:
capacity it holds beyond what the starved group needs, counting every backfilled pod as if it
never left, so backfilling cannot delay it (conservative backfill, without runtime estimates).

Capacity held by pods det-k8s does not manage is assumed to stay; when the group cannot fit
without it, nothing is reserved (that would block others for nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from ..cluster.model import Snapshot
from .capacity import Capacity, Demand, count
from .fit import Fitter, Shape, Signature, Taken
from .model import PodGroup, RunningGroup
from .preempt import with_pod


def waited(group: PodGroup, now: datetime | None) -> float | None:
    """Seconds since the group was submitted (RFC 3339 `submitted_at`), or None when not known."""
    if now is None or not group.submitted_at:
        return None
    try:
        submitted = datetime.fromisoformat(group.submitted_at)
    except ValueError:
        return None
    if submitted.tzinfo is None:
        submitted = submitted.replace(tzinfo=UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return (now - submitted).total_seconds()


class Reservations:
    def __init__(self, snapshot: Snapshot, running: Sequence[RunningGroup], fitter: Fitter) -> None:
        self._snapshot = snapshot
        self._running = running
        self._fitter = fitter
        self._capacity: Capacity = fitter.capacity
        self._foreign: dict[str, dict[str, int]] | None = None
        self._potential: dict[tuple[Signature, Demand, str | None], list[tuple[str, int]]] = {}
        self.group: PodGroup | None = None
        self.nodes: tuple[str, ...] = ()
        self._demand: Demand | None = None  # the starved group's pod shape (slack only for one shape)
        self._need = 0
        self._left: dict[str, dict[str, int]] = {}  # per reserved node: potential minus backfill
        self._pods = 0  # pods of the starved shape the reserved nodes hold once det-k8s groups leave
        self._behind: dict[tuple[Signature, Demand], tuple[int, int]] = {}
        self._version = 0

    def foreign_used(self) -> dict[str, dict[str, int]]:
        """Per node, what pods outside det-k8s's running groups hold (they may never leave)."""
        if self._foreign is None:
            foreign = {node: dict(used) for node, used in self._snapshot.used.items()}
            for group in self._running:
                for pod in group.pods:
                    held = foreign.get(pod.node)
                    if held is not None:
                        for name, amount in with_pod(pod.requests).items():
                            held[name] = held.get(name, 0) - amount
            self._foreign = foreign
        return self._foreign

    def _left_on(self, node: str) -> dict[str, int]:
        allocatable, held = self._capacity.allocatable[node], self.foreign_used().get(node, {})
        return {name: allocatable.get(name, 0) - held.get(name, 0) for name in allocatable}

    def potential(self, shape: Shape, domain: str | None = None) -> list[tuple[str, int]]:
        """(node, pods of the shape it could take once det-k8s groups on it are gone), unblocked nodes.

        Fixed during a pass until the first reservation, which also ends the calls: cached.
        """
        key = (shape.klass, shape.demand, domain)
        found = self._potential.get(key)
        if found is None:
            found = []
            members = self._fitter.index(shape, domain).members - self._capacity.blocked
            for node in self._capacity.in_order(members):
                could = count(self._left_on(node), shape.demand)
                if could > 0:
                    found.append((node, could))
            self._potential[key] = found
        return found

    def choose(self, shapes: Sequence[Shape]) -> tuple[str, ...]:
        """Nodes to hold for a starved group: most free first, until it fits them; () if it never would.

        When the topology policy requires one domain, the nodes are all in one: the domain needing fewest.
        """
        fitter = self._fitter
        if fitter.topology_required and fitter.topology_applies(shapes):
            best: tuple[str, ...] = ()
            for domain in fitter.domains(shapes[0]):
                nodes = self._choose(shapes, domain)
                if nodes and (not best or len(nodes) < len(best)):
                    best = nodes
            return best
        return self._choose(shapes, None)

    def _choose(self, shapes: Sequence[Shape], domain: str | None) -> tuple[str, ...]:
        chosen: dict[str, None] = {}
        for shape in shapes:
            potential = self.potential(shape, domain)
            if sum(could for _, could in potential) < shape.pods:
                return ()
            rows = []
            for node, could in potential:
                free = self._capacity.free[node]
                rows.append((-count(free, shape.demand), -free.get(shape.key, 0),
                             self._capacity.position[node], node, could))
            need = shape.pods
            for *_, node, could in sorted(rows):
                chosen[node] = None
                need -= could
                if need <= 0:
                    break
        return tuple(chosen)

    def hold(self, group: PodGroup, shapes: Sequence[Shape], nodes: tuple[str, ...]) -> None:
        self.group, self.nodes = group, nodes
        self._capacity.block(nodes)
        if len(shapes) == 1:
            self._demand, self._need = shapes[0].demand, shapes[0].pods
            self._left = {node: self._left_on(node) for node in nodes}
            self._pods = sum(count(left, self._demand) for left in self._left.values())

    def behind(self, shapes: Sequence[Shape]) -> bool:
        """Would the group fit if the reserved nodes were open to it?"""
        if self.group is None:
            return False
        for shape in shapes:
            index = self._fitter.index(shape)
            total = index.total(shape.demand)
            cached = self._behind.get((shape.klass, shape.demand))
            if cached is None or cached[0] != self._version:
                extra = sum(count(self._capacity.free[node], shape.demand)
                            for node in self.nodes if node in index.members)
                cached = self._behind[(shape.klass, shape.demand)] = (self._version, extra)
            if total is None or total + cached[1] < shape.pods:
                return False
        return True

    def backfill(self, shapes: Sequence[Shape]) -> Taken | None:
        """A placement using the reservation's slack only, or None. Nothing is committed."""
        if self._demand is None or not self.behind(shapes):
            return None
        overlay = {node: self._capacity.free[node] for node in self.nodes}
        taken = self._fitter.try_place(shapes, overlay)
        if taken is None or self._pods - self._loss(taken) < self._need:
            return None
        return taken

    def _loss(self, taken: Taken, commit: bool = False) -> int:
        assert self._demand is not None
        loss = 0
        for shape, found in taken:
            for node, pods in found:
                left = self._left.get(node)
                if left is None:
                    continue
                before = count(left, self._demand)
                after = dict(left)
                for name, amount in shape.demand:
                    after[name] = after.get(name, 0) - amount * pods
                loss += before - count(after, self._demand)
                if commit:
                    self._left[node] = after
        return loss

    def use(self, taken: Taken) -> None:
        """Record a backfill into the reservation (its pods count as never leaving)."""
        self._pods -= self._loss(taken, commit=True)
        self._version += 1

    def uses(self, taken: Taken) -> bool:
        held = set(self.nodes)
        return any(node in held for _, found in taken for node, _ in found)

