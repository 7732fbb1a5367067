"""Choosing whole running groups to evict so a higher-priority group fits, and keeping the books.

The victim rule (README, "Preemption"): candidates are the running det-k8s groups of the queue's
own namespace with strictly lower priority than the preemptor (never equal or higher, never pods
det-k8s does not schedule, never a group already leaving, never one that is not preemptible: the
master's commands and notebooks). Capacity that is coming back anyway is
counted first and costs no victim: groups already terminating (in any namespace), and what this
pass's earlier victims of lower priority free and nobody was promised. Among the sets of
candidates whose eviction lets the preemptor fit, the chosen set is the one with

1. the fewest groups, then
2. the lowest priorities (the highest priority in the set as low as possible, then the next), then
3. the most recently started groups (they lose the least work), then group ids.

The search is exact: every set of one victim, then of two, ... is tried, as long as the sets to
try number at most `EXACT_BUDGET` in all (always for one victim). Beyond that, greedy: whole
groups in the rule's order (lowest priority, newest first) until the preemptor fits, then every
victim that is not needed dropped again, highest priority first; the set is then minimal in that
no victim can be spared, and no smaller set exists among the sizes the exact search covered.

What victims will free is not free yet (their pods still run): only later preemptors of
*higher* priority than the victim may plan on it, since their pods are created once the
victims are gone. Groups already leaving when the pass starts (preempted by an earlier pass and
still checkpointing, or stopping) are booked the same way: a preemptor waits for them instead of
evicting a second victim for the same capacity. Within a pass, what a preemptor of priority p could reach only shrinks
(placements, reservations and promises take capacity, nothing gives it back), so a shape that
failed at priority p with k pods fails for any later group asking as much at no higher
priority: such attempts are answered from a memo instead of re-walking every candidate.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb

from ..cluster.model import PODS
from .capacity import Demand, count
from .fit import ONE_POD, Fitter, Shape, Signature, Taken
from .model import RunningGroup

EXACT_BUDGET = 4096  # candidate victim sets the exact search may try per preemptor
RETURNING = -(1 << 62)  # the "priority" of capacity coming back from terminating groups: any preemptor may use it


def eviction_order(running: Sequence[RunningGroup]) -> list[RunningGroup]:
    """Lowest priority first, then the most recently started, then by id (stable sorts)."""
    pool = sorted(running, key=lambda g: g.id)
    pool.sort(key=lambda g: g.started_at, reverse=True)
    pool.sort(key=lambda g: g.priority)
    return pool


def with_pod(requests: Mapping[str, int]) -> dict[str, int]:
    return {**requests, PODS: requests.get(PODS, 0) + ONE_POD}


def rule_key(victims: Sequence[RunningGroup], age: Mapping[str, int]) -> tuple[object, ...]:
    """The victim rule as a sort key (smaller wins): fewest, lowest priorities, newest, ids.

    `age` ranks the candidates by start, newest 0.
    """
    return (len(victims), tuple(sorted((g.priority for g in victims), reverse=True)),
            tuple(sorted((age[g.id] for g in victims), reverse=True)), tuple(sorted(g.id for g in victims)))


@dataclass(frozen=True)
class Preemption:
    victims: tuple[RunningGroup, ...]
    taken: Taken


class _Search:
    """Free capacity with some victims' resources added back, and whether the shapes fit it."""

    def __init__(self, fitter: Fitter, shapes: Sequence[Shape]) -> None:
        self.fitter = fitter
        self.shapes = shapes
        self.blocked = fitter.capacity.blocked
        indexes = [fitter.index(shape) for shape in shapes]
        self.members = (indexes[0].members if len(indexes) == 1
                        else frozenset().union(*(index.members for index in indexes)))
        self.overlay: dict[str, dict[str, int]] = {}
        simple = len(shapes) == 1 and not shapes[0].general and not fitter.topology_applies(shapes)
        total = indexes[0].total(shapes[0].demand) if simple else None
        self.single = total is not None
        self.base_total = total or 0
        self.gain: dict[str, int] = {}
        self.gained = 0

    def usable(self, node: str) -> bool:
        return node in self.members and node not in self.blocked

    def add(self, node: str, amounts: Mapping[str, int], sign: int) -> None:
        if not self.usable(node):
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
            self.add(pod.node, with_pod(pod.requests), sign)

    def could_gain(self, node: str, amounts: Mapping[str, int]) -> bool:
        """False when adding `amounts` to the node cannot help: no key resource added, none there."""
        if len(self.shapes) != 1 or not self.single:
            return True
        key, amount = self.shapes[0].key, self.shapes[0].amount
        if amounts.get(key, 0) > 0 or node in self.overlay:
            return True
        return self.fitter.capacity.free[node].get(key, 0) >= amount

    def touches(self, group: RunningGroup) -> bool:
        return any(self.usable(pod.node) for pod in group.pods)

    def fits(self) -> bool:
        if self.single:
            return self.base_total + self.gained >= self.shapes[0].pods
        return self.fitter.fits(self.shapes, self.overlay)

    def place(self) -> Taken | None:
        return self.fitter.try_place(self.shapes, self.overlay)


class Evictions:
    """This pass's victims, what they and terminating groups will free, and who may still be evicted."""

    def __init__(self, fitter: Fitter, running: Sequence[RunningGroup],
                 returning: Sequence[RunningGroup] = ()) -> None:
        self.fitter = fitter
        self.order = eviction_order([g for g in running if not g.terminating and g.preemptible])
        self.age = {g.id: rank for rank, g in enumerate(
            sorted(self.order, key=lambda g: (g.started_at, g.id), reverse=True))}
        self._priorities = [g.priority for g in self.order]  # ascending
        self._first = 0  # order[:_first] are all victims already
        self.victims: list[str] = []
        self._taken: set[str] = set()
        self._taken_priorities: Counter[int] = Counter()
        self.priority_of: dict[str, int] = {}
        # what victims and terminating groups will free and nobody was promised yet: per group (who waits
        # for whom) and summed per priority level (what a preemptor may plan on)
        self.released: dict[str, dict[str, dict[str, int]]] = {}
        self._by_level: dict[int, dict[str, dict[str, int]]] = {}
        self._victims_on: dict[str, list[str]] = {}
        self._failed: dict[tuple[Signature, Demand], list[tuple[int, int]]] = {}
        self._freed: dict[tuple[object, ...], dict[str, dict[str, int]]] = {}
        for group in returning:
            self._release(group, RETURNING)

    def _release(self, group: RunningGroup, level: int) -> None:
        self.priority_of[group.id] = level
        freed = self.released[group.id] = {}
        by_level = self._by_level.setdefault(level, {})
        for pod in group.pods:
            for bucket in (freed.setdefault(pod.node, {}), by_level.setdefault(pod.node, {})):
                for name, amount in with_pod(pod.requests).items():
                    bucket[name] = bucket.get(name, 0) + amount
            if group.id not in self._victims_on.setdefault(pod.node, []):
                self._victims_on[pod.node].append(group.id)

    def evictable(self, priority: int) -> int:
        """How many running groups a group of `priority` could still evict."""
        below = bisect_left(self._priorities, priority)
        return below - sum(n for p, n in self._taken_priorities.items() if p < priority)

    def candidates(self, priority: int) -> Iterator[RunningGroup]:
        while self._first < len(self.order) and self.order[self._first].id in self._taken:
            self._first += 1
        for group in self.order[self._first:]:
            if group.priority >= priority:
                return
            if group.id not in self._taken:
                yield group

    def released_for(self, priority: int) -> Iterator[tuple[str, Mapping[str, int]]]:
        """(node, amounts) victims of strictly lower priority and terminating groups will free, not yet promised."""
        for level, nodes in self._by_level.items():
            if level < priority:
                yield from nodes.items()

    def attempt(self, shapes: Sequence[Shape], priority: int) -> Preemption | None:
        """Victims (possibly none, when capacity coming back suffices) and the placement, or None."""
        key = (shapes[0].klass, shapes[0].demand) if len(shapes) == 1 else None
        pods = shapes[0].pods
        if key is not None and any(p >= priority and k <= pods for p, k in self._failed.get(key, ())):
            return None
        search = _Search(self.fitter, shapes)
        for node, amounts in self.released_for(priority):
            if search.could_gain(node, amounts):
                search.add(node, amounts, 1)
        if search.fits():
            taken = search.place()
            return None if taken is None else Preemption((), taken)
        pool = [group for group in self.candidates(priority) if search.touches(group)]
        chosen = self._exact(search, pool)
        if chosen is None:
            chosen = self._greedy(search, pool)
            if chosen is None:
                if key is not None:
                    self._failed.setdefault(key, []).append((priority, pods))
                return None
        for group in chosen:
            search.add_group(group, 1)
        taken = search.place()
        return None if taken is None else Preemption(tuple(chosen), taken)

    def know(self, groups: Sequence[RunningGroup]) -> None:
        """Rank `groups` by start too (groups outside this pass's victim scope, for a what-if `reclaim`): the ranks
        of the others keep their order, so the rule's choices among them do not change."""
        if all(g.id in self.age for g in groups):
            return
        every = {g.id: g for g in self.order}
        every.update((g.id, g) for g in groups)
        self.age = {g.id: rank for rank, g in enumerate(
            sorted(every.values(), key=lambda g: (g.started_at, g.id), reverse=True))}

    def reclaim(self, shapes: Sequence[Shape], pool: Sequence[RunningGroup], level: int) -> Preemption | None:
        """Victims among `pool` (whole groups running on capacity their queue borrowed, whatever their priority) by the
        same rule and search, or None. `level` is above every candidate's priority: the capacity they free, and
        what lower levels free, is the preemptor's to count on. Nothing changes until `commit`."""
        search = _Search(self.fitter, shapes)
        for node, amounts in self.released_for(level):
            if search.could_gain(node, amounts):
                search.add(node, amounts, 1)
        if search.fits():
            return None  # capacity coming back suffices: that is preemption's or waiting's business, not reclaim's
        candidates = eviction_order([g for g in pool if g.id not in self._taken and not g.terminating
                                     and g.preemptible and search.touches(g)])
        chosen = self._exact(search, candidates)
        if chosen is None:
            chosen = self._greedy(search, candidates)
            if chosen is None:
                return None
        for group in chosen:
            search.add_group(group, 1)
        taken = search.place()
        return None if taken is None else Preemption(tuple(chosen), taken)

    def would_start(self, shapes: Sequence[Shape], priority: int) -> bool:
        """Whether evicting every candidate (and what is coming back) would let the shapes fit. Changes nothing.

        What that frees is summed per node once per (class, priority) while no victim is taken (the
        question is asked when the policy does not preempt, so none is): each answer then costs a
        pass over the nodes it frees, not over every candidate's pods.
        """
        search = _Search(self.fitter, shapes)
        memo = (shapes[0].klass, priority, len(self.victims))
        freed = self._freed.get(memo) if len(shapes) == 1 else None
        if freed is None:
            freed = {}
            for node, amounts in self.released_for(priority):
                bucket = freed.setdefault(node, {})
                for name, amount in amounts.items():
                    bucket[name] = bucket.get(name, 0) + amount
            for group in self.candidates(priority):
                if search.touches(group):
                    for pod in group.pods:
                        bucket = freed.setdefault(pod.node, {})
                        for name, amount in with_pod(pod.requests).items():
                            bucket[name] = bucket.get(name, 0) + amount
            if len(shapes) == 1:
                self._freed[memo] = freed
        for node, amounts in freed.items():
            search.add(node, amounts, 1)
        return search.fits()

    def _exact(self, search: _Search, pool: Sequence[RunningGroup]) -> list[RunningGroup] | None:
        """The best set by the rule, trying every set of 1, 2, ... victims; None when over budget or none fits."""
        spent = 0
        for size in range(1, len(pool) + 1):
            spent += comb(len(pool), size)
            if spent > EXACT_BUDGET:
                return None
            best: list[RunningGroup] | None = None
            best_key: tuple[object, ...] | None = None
            for combo in combinations(pool, size):
                for group in combo:
                    search.add_group(group, 1)
                if search.fits():
                    candidate = rule_key(combo, self.age)
                    if best_key is None or candidate < best_key:
                        best, best_key = list(combo), candidate
                for group in combo:
                    search.add_group(group, -1)
            if best is not None:
                return best
        return None

    def _greedy(self, search: _Search, pool: Sequence[RunningGroup]) -> list[RunningGroup] | None:
        """Whole groups in the rule's order until the shapes fit, then the unneeded ones dropped."""
        chosen: dict[str, RunningGroup] = {}
        for group in pool:
            search.add_group(group, 1)
            chosen[group.id] = group
            if search.fits():
                break
        else:
            for group in chosen.values():
                search.add_group(group, -1)
            return None
        for group in sorted(chosen.values(), key=lambda g: (-g.priority, -self.age[g.id], g.id)):
            search.add_group(group, -1)
            if search.fits():
                del chosen[group.id]
            else:
                search.add_group(group, 1)
        for group in chosen.values():
            search.add_group(group, -1)
        return sorted(chosen.values(), key=lambda g: (g.priority, self.age[g.id], g.id))

    def commit(self, found: Preemption, priority: int) -> tuple[str, ...]:
        """Record the victims and take the preemptor's capacity; returns the groups it waits for."""
        waits_for: dict[str, None] = {}
        for victim in found.victims:
            waits_for[victim.id] = None
            self.victims.append(victim.id)
            self._taken.add(victim.id)
            self._taken_priorities[victim.priority] += 1
            self._release(victim, victim.priority)
        for shape, nodes in found.taken:
            for node, pods in nodes:
                amounts = {name: amount * pods for name, amount in shape.demand}
                waits_for.update(dict.fromkeys(self._take(node, amounts, priority)))
        return tuple(waits_for)

    def _take(self, node: str, amounts: Mapping[str, int], priority: int) -> list[str]:
        """Pods start once victims leave, so they use released capacity before free capacity.

        On a node already over its allocatable (a GPU the device plugin stopped reporting under a running
        pod, pods pinned beyond its `pods`), what leaves first pays that debt back: only the rest is room, so
        the preemptor waits for as many leaving groups as the node needs to have room for it."""
        free = self.fitter.capacity.free[node]
        debt = {name: -free.get(name, 0) for name in amounts if free.get(name, 0) < 0}
        left = dict(amounts)
        used_from: list[str] = []
        repaid: dict[str, int] = {}
        victims = sorted((v for v in self._victims_on.get(node, ()) if self.priority_of[v] < priority),
                         key=lambda v: (self.priority_of[v], v))
        for victim in victims:
            available = self.released[victim][node]
            level = self._by_level[self.priority_of[victim]][node]
            took = False
            for wanted, into in ((debt, repaid), (left, None)):
                for name, want in wanted.items():
                    share = min(max(available.get(name, 0), 0), want)
                    if share:
                        available[name] -= share
                        level[name] -= share
                        wanted[name] = want - share
                        if into is not None:
                            into[name] = into.get(name, 0) + share
                        took = True
            if took:
                used_from.append(victim)
        change = {name: amount for name, amount in left.items() if amount}
        for name, amount in repaid.items():  # the debt paid back raises what is free on the node
            change[name] = change.get(name, 0) - amount
        if any(change.values()):
            self.fitter.capacity.consume(node, tuple(change.items()), 1)
        return used_from
