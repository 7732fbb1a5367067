"""The order groups are considered in: priority, then fair share, then submission.

Higher `resources.priority` first (Determined on Kubernetes: higher is more important). Within a
priority, the user with the lowest weighted dominant resource share goes next (DRF: a user's
share is the largest fraction of any cluster resource their running and just-placed groups
hold, divided by their weight), and each user's own groups go in submission order. Shares change
as the pass places groups, so the order is produced one group at a time.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..cluster.model import PODS
from .model import PodGroup, Policy


class FairOrder:
    def __init__(self, queue: Sequence[PodGroup], usage: Iterable[tuple[str, Mapping[str, int]]],
                 totals: Mapping[str, int], policy: Policy) -> None:
        self._totals = {name: amount for name, amount in totals.items() if amount > 0 and name != PODS}
        self._policy = policy
        self._usage: dict[str, dict[str, int]] = {}
        self._heap: list[tuple[float, int, str, int, str]] = []
        self._pending: dict[str, deque[PodGroup]] = {}
        self._version: dict[str, int] = {}
        for user, resources in usage:
            self.charge(user, resources)
        levels: dict[int, dict[str, list[PodGroup]]] = {}
        for group in queue:
            levels.setdefault(group.priority, {}).setdefault(group.user, []).append(group)
        self._levels = [(priority, levels[priority]) for priority in sorted(levels, reverse=True)]

    def share(self, user: str) -> float:
        """The user's weighted dominant share (0 for a user holding nothing)."""
        weight = self._policy.weight(user)
        usage = self._usage.get(user)
        if not usage:
            return 0.0
        dominant = max((usage.get(name, 0) / total for name, total in self._totals.items()), default=0.0)
        if weight <= 0:
            return math.inf if dominant > 0 else 0.0
        return dominant / weight

    def charge(self, user: str, resources: Mapping[str, int], sign: int = 1) -> None:
        """Add (or with sign=-1 remove) resources held by the user, and re-rank their next group."""
        usage = self._usage.setdefault(user, {})
        for name, amount in resources.items():
            usage[name] = usage.get(name, 0) + sign * amount
        if user in self._version and self._pending.get(user):
            self._push(user)

    def _push(self, user: str) -> None:
        self._version[user] = self._version.get(user, 0) + 1
        head = self._pending[user][0]
        heapq.heappush(self._heap, (self.share(user), head.sequence, head.id, self._version[user], user))

    def __iter__(self) -> Iterator[PodGroup]:
        for _priority, users in self._levels:
            self._heap = []
            self._pending = {}
            self._version = {}
            for user in sorted(users):
                self._pending[user] = deque(sorted(users[user], key=lambda g: (g.sequence, g.id)))
                self._push(user)
            while self._heap:
                _share, _sequence, _id, version, user = heapq.heappop(self._heap)
                if version != self._version[user]:
                    continue  # re-ranked since this entry was pushed
                group = self._pending[user].popleft()
                self._version[user] += 1  # the user has no live entry while its group is decided
                yield group
                if self._pending[user]:
                    self._push(user)
