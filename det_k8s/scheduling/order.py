"""The order groups are considered in: priority, then fair share, then submission.

Higher `resources.priority` first (Determined on Kubernetes: higher is more important). Within a
priority, the user with the lowest weighted dominant resource share goes next (DRF: a user's
share is the largest fraction of any cluster resource their running and just-placed groups
hold, divided by their weight), and each user's own groups go in submission order. Shares change
as the pass places groups, so the order is produced one group at a time.

With team queues (`queues.py`), groups that fit their queue's guarantee (`QueueBook.owed`: taken
in priority and submission order at the start of the pass) go before groups that would borrow,
whatever their priority (Kueue's entry ordering: a reclaimed group, back in the queue, cannot take
back at once what its queue lent); then priority; within a priority the queue that borrows least
goes first: its weighted dominant share of what it uses above its guarantee (`QueueBook.share`; 0
while within it), then the user's share within it. Idle capacity is so shared among the queues by
weight.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from ..cluster.model import PODS
from .model import PodGroup, Policy

if TYPE_CHECKING:
    from .queues import QueueBook

Bucket = tuple[str, str]  # (leaf queue, user); the queue is "" without team queues


class FairOrder:
    def __init__(self, queue: Sequence[PodGroup], usage: Iterable[tuple[str, Mapping[str, int]]],
                 totals: Mapping[str, int], policy: Policy, teams: QueueBook | None = None) -> None:
        self._totals = {name: amount for name, amount in totals.items() if amount > 0 and name != PODS}
        self._policy = policy
        self._teams = teams
        self._usage: dict[str, dict[str, int]] = {}
        self._user_share: dict[str, float] = {}  # until the user's usage changes
        self._heap: list[tuple[tuple[float, float], int, str, int, Bucket]] = []
        self._pending: dict[Bucket, deque[PodGroup]] = {}
        self._version: dict[Bucket, int] = {}
        self._of_user: dict[str, list[Bucket]] = {}
        self._of_leaf: dict[str, list[Bucket]] = {}
        self._leaf_share: dict[str, float] = {}  # each leaf's share when its groups were last ranked
        for user, resources in usage:
            self.charge(user, resources)
        levels: dict[tuple[int, int], dict[Bucket, list[PodGroup]]] = {}
        owed_ids = teams.owed(queue) if teams is not None else set()
        for group in queue:
            bucket = (teams.leaf(group) if teams is not None else "", group.user)
            owed = 1 if group.id in owed_ids else 0
            levels.setdefault((owed, group.priority), {}).setdefault(bucket, []).append(group)
        self._levels = [(level, levels[level]) for level in sorted(levels, reverse=True)]

    def share(self, user: str) -> float:
        """The user's weighted dominant share (0 for a user holding nothing)."""
        found = self._user_share.get(user)
        if found is None:
            found = self._user_share[user] = self._share(user)
        return found

    def _share(self, user: str) -> float:
        weight = self._policy.weight(user)
        usage = self._usage.get(user)
        if not usage:
            return 0.0
        dominant = max((usage.get(name, 0) / total for name, total in self._totals.items()), default=0.0)
        if weight <= 0:
            return math.inf if dominant > 0 else 0.0
        return dominant / weight

    def _key(self, bucket: Bucket) -> tuple[float, float]:
        leaf, user = bucket
        team = 0.0
        if self._teams is not None and leaf:
            team = self._leaf_share[leaf] = self._teams.share(leaf, self._totals)
        return team, self.share(user)

    def charge(self, user: str, resources: Mapping[str, int], sign: int = 1) -> None:
        """Add (or with sign=-1 remove) resources held by the user, and re-rank their next group."""
        usage = self._usage.setdefault(user, {})
        for name, amount in resources.items():
            usage[name] = usage.get(name, 0) + sign * amount
        self._user_share.pop(user, None)
        if sign < 0 or self._teams is None:
            self._rerank(self._of_user.get(user, ()))
        # else: a share only grew; its groups' heap entries are checked when popped (`__iter__`)

    def requeue(self, leaf: str) -> None:
        """The queue's use changed (a placement, a victim): re-rank its groups if its share moved."""
        if self._teams is None:
            return
        share = self._teams.share(leaf, self._totals)
        if share < self._leaf_share.get(leaf, 0.0):  # it fell (a victim leaves): re-rank now; a rise is seen on pop
            self._leaf_share[leaf] = share
            self._rerank(self._of_leaf.get(leaf, ()))

    def _rerank(self, buckets: Iterable[Bucket]) -> None:
        for bucket in buckets:
            if bucket in self._version and self._pending.get(bucket):
                self._push(bucket)

    def _push(self, bucket: Bucket) -> None:
        self._version[bucket] = self._version.get(bucket, 0) + 1
        head = self._pending[bucket][0]
        heapq.heappush(self._heap, (self._key(bucket), head.sequence, head.id, self._version[bucket], bucket))

    def __iter__(self) -> Iterator[PodGroup]:
        for _priority, buckets in self._levels:
            self._heap = []
            self._pending = {}
            self._version = {}
            self._of_user = {}
            self._of_leaf = {}
            for bucket in sorted(buckets):
                self._pending[bucket] = deque(sorted(buckets[bucket], key=lambda g: (g.sequence, g.id)))
                self._of_user.setdefault(bucket[1], []).append(bucket)
                self._of_leaf.setdefault(bucket[0], []).append(bucket)
                self._push(bucket)
            while self._heap:
                share, _sequence, _id, version, bucket = heapq.heappop(self._heap)
                if version != self._version[bucket]:
                    continue  # re-ranked since this entry was pushed
                if self._teams is not None and self._key(bucket) != share:
                    self._push(bucket)  # its shares grew since: back in line at its place
                    continue
                group = self._pending[bucket].popleft()
                self._version[bucket] += 1  # the bucket has no live entry while its group is decided
                yield group
                if self._pending[bucket]:
                    self._push(bucket)
