"""Choosing whole running groups to evict so a higher-priority group fits.

Candidates are det-k8s running groups of strictly lower priority (never equal or higher, never
pods det-k8s does not manage, never a group already leaving), lowest priority first, then the
most recently started (it loses the least work). Whole groups are added until the preemptor
fits; then every victim that is not needed is dropped again, highest priority first, so the
set is small and as low as possible. Fit checks are incremental: adding a victim only
re-counts the nodes its pods are on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cluster.model import PODS
from .capacity import count
from .fit import ONE_POD, Fitter, Shape, Taken
from .model import RunningGroup


def candidates_for(priority: int, running: Sequence[RunningGroup], taken: set[str]) -> list[RunningGroup]:
    """Groups that may be evicted for a group of `priority`, in the order they are tried."""
    pool = [g for g in running if g.priority < priority and g.id not in taken and not g.terminating]
    pool.sort(key=lambda g: g.id)
    pool.sort(key=lambda g: g.started_at, reverse=True)  # most recently started first ...
    pool.sort(key=lambda g: g.priority)  # ... within the lowest priority first (stable sorts)
    return pool


@dataclass(frozen=True)
class Preemption:
    victims: tuple[RunningGroup, ...]
    taken: Taken


class _Search:
    """Free capacity with some victims' resources added back, and whether the shapes fit it."""

    def __init__(self, fitter: Fitter, shapes: Sequence[Shape],
                 released: Mapping[str, Mapping[str, int]]) -> None:
        self.fitter = fitter
        self.shapes = shapes
        capacity = fitter.capacity
        members = frozenset().union(*(fitter.index(shape).members for shape in shapes))
        self.members = members - capacity.blocked
        self.overlay: dict[str, dict[str, int]] = {}
        self.single = len(shapes) == 1
        self.base_total = 0
        if self.single:
            total = fitter.index(shapes[0]).total(shapes[0].demand)
            self.single = total is not None
            self.base_total = total or 0
        self.gain: dict[str, int] = {}
        self.gained = 0
        for node, amounts in released.items():
            self.add(node, amounts, 1)

    def add(self, node: str, amounts: Mapping[str, int], sign: int) -> None:
        if node not in self.members:
            return
        free = self.overlay.get(node)
        if free is None:
            free = self.overlay[node] = dict(self.fitter.capacity.free[node])
        for name, amount in amounts.items():
            free[name] = free.get(name, 0) + sign * amount
        if self.single:
            demand = self.shapes[0].demand
            new = count(free, demand) - count(self.fitter.capacity.free[node], demand)
            self.gained += new - self.gain.get(node, 0)
            self.gain[node] = new

    def add_group(self, group: RunningGroup, sign: int) -> None:
        for pod in group.pods:
            self.add(pod.node, {**pod.requests, PODS: pod.requests.get(PODS, 0) + ONE_POD}, sign)

    def touches(self, group: RunningGroup) -> bool:
        return any(pod.node in self.members for pod in group.pods)

    def fits(self) -> bool:
        if self.single:
            return self.base_total + self.gained >= self.shapes[0].pods
        return self.fitter.fits(self.shapes, self.overlay)

    def place(self) -> Taken | None:
        return self.fitter.try_place(self.shapes, self.overlay)


def preempt(fitter: Fitter, shapes: Sequence[Shape], candidates: Sequence[RunningGroup],
            released: Mapping[str, Mapping[str, int]]) -> Preemption | None:
    """Victims (possibly none, when capacity already released this pass suffices) and the placement."""
    search = _Search(fitter, shapes, released)
    chosen: list[RunningGroup] = []
    if not search.fits():
        for group in candidates:
            if not search.touches(group):
                continue  # evicting it frees nothing this group could use
            search.add_group(group, 1)
            chosen.append(group)
            if search.fits():
                break
        else:
            return None
        for group in sorted(chosen, key=lambda g: (-g.priority, g.started_at, g.id)):
            search.add_group(group, -1)
            if search.fits():
                chosen.remove(group)
            else:
                search.add_group(group, 1)
    taken = search.place()
    if taken is None:  # pragma: no cover - the counts above are exact for one shape
        return None
    return Preemption(tuple(chosen), taken)
