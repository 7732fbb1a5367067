"""Working free capacity for one pass, indexed so a pass never scans every node for every group.

Free capacity per node is allocatable minus the effective requests of its active pods, kept
*unclamped* (a node that lost a GPU has negative free) so that adding back a victim's requests is
exact. For each (node set, key resource) a `FreeIndex` buckets nodes by the free amount of that
resource and keeps, per pod shape, the total number of such pods the nodes can take. With it,
"does a gang of k pods fit?" is one dictionary lookup, and placing it visits only the nodes it
uses, tightest first (best fit: large free blocks stay whole for large gangs).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..cluster.model import Node

Demand = tuple[tuple[str, int], ...]  # per-pod request, sorted, zero amounts dropped, `pods` included
MAX_TRACKED_DEMANDS = 256  # beyond this many pod shapes per index, fits are checked by scanning
_LOTS = 1 << 40


def count(free: Mapping[str, int], demand: Demand) -> int:
    """How many pods of `demand` fit into `free` (0 when any resource is short or negative)."""
    best = _LOTS
    for name, amount in demand:
        fit = free.get(name, 0) // amount
        if fit < best:
            if fit <= 0:
                return 0
            best = fit
    return best


class FreeIndex:
    """Nodes of one eligibility class, bucketed by free `key` resource, with per-shape pod totals."""

    def __init__(self, key: str, members: Iterable[str], capacity: Capacity) -> None:
        self.key = key
        self.members = frozenset(members)
        self._free = capacity.free  # (not the Capacity: it holds this index, and a cycle would leave every pass's
        # indexes to the cycle collector, whose pauses were the loop's latency tail at 2,000 nodes)
        self.buckets: dict[int, dict[str, None]] = {}
        self.values: list[int] = []  # sorted distinct free amounts present in `buckets`
        self.totals: dict[Demand, int] = {}
        self.key_sum = 0
        free = capacity.free
        for node in capacity.in_order(self.members):
            if node not in capacity.blocked:
                self.add(node, free[node])

    def add(self, node: str, free: Mapping[str, int]) -> None:
        value = free.get(self.key, 0)
        bucket = self.buckets.get(value)
        if bucket is None:
            bucket = self.buckets[value] = {}
            insort(self.values, value)
        bucket[node] = None
        self.key_sum += max(value, 0)
        for demand in self.totals:
            self.totals[demand] += count(free, demand)

    def remove(self, node: str, free: Mapping[str, int]) -> None:
        value = free.get(self.key, 0)
        bucket = self.buckets[value]
        del bucket[node]
        if not bucket:
            del self.buckets[value]
            del self.values[bisect_left(self.values, value)]
        self.key_sum -= max(value, 0)
        for demand in self.totals:
            self.totals[demand] -= count(free, demand)

    def total(self, demand: Demand) -> int | None:
        """How many pods of `demand` the (unblocked) nodes can take now; None when not tracked."""
        known = self.totals.get(demand)
        if known is not None:
            return known
        if len(self.totals) >= MAX_TRACKED_DEMANDS:
            return None
        free = self._free
        known = sum(count(free[node], demand) for value in self.values for node in self.buckets[value])
        self.totals[demand] = known
        return known

    def key_bound(self, amount: int) -> int:
        """Pods of `amount` key resource the nodes could take if nothing else were short."""
        return sum((value // amount) * len(self.buckets[value])
                   for value in self.values[bisect_left(self.values, amount):])

    def ascending(self, minimum: int) -> Iterator[tuple[int, str]]:
        """(free key amount, node) for nodes with at least `minimum`, tightest first."""
        for value in self.values[bisect_left(self.values, minimum):]:
            for node in self.buckets[value]:
                yield value, node

    def descending(self) -> Iterator[tuple[int, str]]:
        for value in reversed(self.values):
            for node in self.buckets[value]:
                yield value, node


class Capacity:
    """Free capacity of every node during one pass, and the indexes over it (mutable scratch)."""

    def __init__(self, nodes: Sequence[Node], used: Mapping[str, Mapping[str, int]]) -> None:
        self.position = {node.name: i for i, node in enumerate(nodes)}
        self.allocatable = {node.name: node.allocatable for node in nodes}
        self.free: dict[str, dict[str, int]] = {}
        for node in nodes:
            free = dict(node.allocatable)
            for name, amount in used.get(node.name, {}).items():
                free[name] = free.get(name, 0) - amount
            self.free[node.name] = free
        self.blocked: set[str] = set()
        self.version = 0  # changes whenever free capacity or the blocked nodes change
        self._indexes: dict[tuple[object, str], FreeIndex] = {}
        self._member_of: dict[str, list[FreeIndex]] = {}

    def in_order(self, names: Iterable[str]) -> list[str]:
        return sorted(names, key=self.position.__getitem__)

    def index(self, klass: object, members: Sequence[str], key: str) -> FreeIndex:
        """The index of eligibility class `klass` (whose nodes are `members`) by `key` resource."""
        index = self._indexes.get((klass, key))
        if index is None:
            index = self._indexes[(klass, key)] = FreeIndex(key, members, self)
            for node in index.members:
                self._member_of.setdefault(node, []).append(index)
        return index

    def consume(self, node: str, demand: Demand, pods: int) -> None:
        """Take `pods` pods of `demand` from the node (a negative count gives capacity back)."""
        self.version += 1
        free = self.free[node]
        indexes = () if node in self.blocked else self._member_of.get(node, ())
        for index in indexes:
            index.remove(node, free)
        for name, amount in demand:
            free[name] = free.get(name, 0) - amount * pods
        for index in indexes:
            index.add(node, free)

    def block(self, nodes: Iterable[str]) -> None:
        """Take nodes out of every index: later groups of this pass may not use them."""
        self.version += 1
        for node in nodes:
            if node in self.blocked:
                continue
            for index in self._member_of.get(node, ()):
                index.remove(node, self.free[node])
            self.blocked.add(node)


def take(index: FreeIndex, capacity: Capacity, demand: Demand, amount: int, pods: int,
         overlay: Mapping[str, Mapping[str, int]] | None = None) -> list[tuple[str, int]] | None:
    """Best-fit placement of `pods` identical pods: [(node, pods there)], or None if they do not fit.

    Nodes are visited from the least free `key` resource up, each filled as far as it goes, which
    for identical pods is exactly best-fit decreasing. `overlay` replaces the free capacity of
    some nodes (victims' resources added back, earlier shapes of the same group taken out, or
    reserved nodes opened for backfill); its nodes are used even if blocked: callers decide.
    """
    stream: Iterable[tuple[int, str]]
    if overlay:
        members, key, position = index.members, index.key, capacity.position
        extra = sorted(((free.get(key, 0), node) for node, free in overlay.items()
                        if node in members and free.get(key, 0) >= amount),
                       key=lambda item: (item[0], position[item[1]]))
        base = ((value, node) for value, node in index.ascending(amount) if node not in overlay)
        stream = heapq.merge(base, extra, key=lambda item: item[0])
    else:
        stream = index.ascending(amount)
    placed: list[tuple[str, int]] = []
    need = pods
    free_of = capacity.free
    for _value, node in stream:
        free = overlay.get(node, free_of[node]) if overlay else free_of[node]
        fit = count(free, demand)
        if fit <= 0:
            continue
        here = fit if fit < need else need
        placed.append((node, here))
        need -= here
        if need == 0:
            return placed
    return None
