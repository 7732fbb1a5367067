"""Making room for a group by moving this pass's own placements, which nothing has created yet.

Best fit places each group on the tightest nodes at its turn, without knowing what comes next; a
later group may then find the free GPUs split into pieces too small for its pods although they
would add up. Since none of this pass's placements exists yet, moving them costs nothing: when a
group does not fit, the groups placed since the last group that had to wait are packed again
together with it: largest pods first (best-fit decreasing), and if that fails, the groups that
may use the fewest nodes first. If every one of them fits, the new nodes replace the old;
otherwise nothing changes and the group goes on as before (preemption, reservation, waiting).

Which groups may move, and why that keeps the policy's rules:

- only groups placed since the last group that waited: a group that waits did so because it did
  not fit the nodes as they were at its turn, and they stay that way (a later group never gets
  room that an earlier one could have had by the same rearrangement);
- never groups placed by preemption or into a reservation's slack, never pods on reserved
  nodes, never onto reserved nodes (the reserved group's guarantee is untouched);
- placed groups stay placed, with all their pods: only their nodes change. Order, priority and
  fair share decide *who* is placed exactly as without repacking; repacking only changes *where*.

Work is bounded: a shape whose repack failed is not tried again in the pass (capacity only
shrinks), and the pods moved in one pass are capped at a few times the pass's own size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..cluster.model import GPU
from .capacity import Demand
from .fit import Fitter, Shape, Signature, Taken
from .model import PodGroup

BUDGET_PER_POD = 8  # pods a pass may move, per queued pod and node (bounds the work of repacking)


@dataclass
class _Placed:
    group: PodGroup
    shapes: tuple[Shape, ...]
    taken: Taken
    position: int  # decision order, for a deterministic packing order

    @property
    def pods(self) -> int:
        return sum(shape.pods for shape in self.shapes)


class Repacker:
    """The groups of this pass that may still move, and the attempt to make room by moving them."""

    def __init__(self, fitter: Fitter, budget: int) -> None:
        self.fitter = fitter
        self.budget = budget
        self.movable: list[_Placed] = []
        self._failed: dict[tuple[Signature, Demand], int] = {}
        self._position = 0

    def placed(self, group: PodGroup, shapes: Sequence[Shape], taken: Taken) -> None:
        """A group placed on free capacity (not by preemption, not into a reservation's slack)."""
        self._position += 1
        self.movable.append(_Placed(group, tuple(shapes), taken, self._position))

    def settle(self) -> None:
        """A group had to wait: everything placed so far keeps its nodes."""
        self.movable.clear()

    def attempt(self, group: PodGroup, shapes: Sequence[Shape]) -> dict[str, Taken] | None:
        """Pack the movable groups and `group` again; the new placements (committed), or None (nothing changed)."""
        if not self.movable:
            return None
        key = (shapes[0].klass, shapes[0].demand) if len(shapes) == 1 else None
        if key is not None and self._failed.get(key, 1 << 30) <= shapes[0].pods:
            return None
        blocked = self.fitter.capacity.blocked
        candidates = [item for item in self.movable  # all of them: moving one elsewhere may make room for another
                      if not any(node in blocked for _, found in item.taken for node, _ in found)]
        if not candidates or not self._room(shapes, candidates):
            return None
        pods = sum(item.pods for item in candidates) + sum(shape.pods for shape in shapes)
        if pods > self.budget:
            return None
        self.budget -= pods
        for item in candidates:
            self._release(item.taken)
        items = [*candidates, _Placed(group, tuple(shapes), [], self._position + 1)]
        for order in (self._largest_first, self._fewest_nodes_first):
            done = self._pack(sorted(items, key=order))
            if done is not None:
                moved = {}
                for item, taken in done:
                    item.taken = taken
                    moved[item.group.id] = taken
                return moved
        for original in candidates:
            self.fitter.commit(original.taken)
        if key is not None:
            self._failed[key] = min(self._failed.get(key, 1 << 30), shapes[0].pods)
        return None

    def _pack(self, items: Sequence[_Placed]) -> list[tuple[_Placed, Taken]] | None:
        """Place every item in this order (committed), or none (nothing committed)."""
        done: list[tuple[_Placed, Taken]] = []
        for item in items:
            taken = self.fitter.try_place(item.shapes)
            if taken is None:
                for _, placed in done:
                    self._release(placed)
                return None
            self.fitter.commit(taken)
            done.append((item, taken))
        return done

    @staticmethod
    def _largest_first(item: _Placed) -> tuple[int, int, int, int]:
        """Best-fit decreasing: largest pods first (GPU groups before others), larger groups, decision order."""
        first = item.shapes[0]
        return (0 if first.key == GPU else 1, -first.amount, -item.pods, item.position)

    def _fewest_nodes_first(self, item: _Placed) -> tuple[int, int, int, int, int]:
        """Groups that may use the fewest nodes first, then as `_largest_first`."""
        return (len(self.fitter.index(item.shapes[0]).members), *self._largest_first(item))

    def _room(self, shapes: Sequence[Shape], candidates: Sequence[_Placed]) -> bool:
        """Necessary: the key resource free or held by the candidates on the group's nodes covers its need."""
        for shape in shapes:
            index = self.fitter.index(shape)
            held = sum(candidate_shape.amount * pods
                       for item in candidates for candidate_shape, found in item.taken
                       if candidate_shape.key == shape.key for node, pods in found if node in index.members)
            if index.key_sum + held < shape.amount * shape.pods:
                return False
        return True

    def _release(self, taken: Taken) -> None:
        for shape, found in taken:
            for node, pods in found:
                self.fitter.capacity.consume(node, shape.demand, -pods)
