"""What acting on an intent may do: the few writes and facts every actor of a pass needs (`Effects`).

The actors (settle, leftovers, evict, create, wait, creation recovery) take an `Effects`, never the driver: a
queue entry written (after the Lease is renewed), a reason noted, a group's pods deleted, the time, the Lease
renewed before any other write. `LiveScheduler` hands each pass one `PassEffects`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from ..errors import Conflict, DetK8sError
from .queue import QueueEntry, QueueStore
from .submit import delete_group

if TYPE_CHECKING:
    from ..kube.api import KubeApi
    from ..kube.watch import ClusterView
    from .scheduler import PassReport


class Effects(Protocol):
    """The writes and facts an actor uses (see the module docstring)."""

    @property
    def api(self) -> KubeApi: ...

    @property
    def namespace(self) -> str: ...

    @property
    def view(self) -> ClusterView | None: ...

    @property
    def workers(self) -> int: ...

    @property
    def max_attempts(self) -> int: ...

    def now(self) -> datetime.datetime:
        """The pass's clock."""
        ...

    def stamp(self) -> str:
        """The time as an entry's event begins with it."""
        ...

    def still_ours(self) -> None:
        """Before any write: renew the Lease when due; raises LeaseLost."""
        ...

    def record(self, entry: QueueEntry) -> QueueEntry:
        """Write the entry as it is (a creation's intent record); raises what the API raises."""
        ...

    def write(self, entry: QueueEntry, report: PassReport) -> QueueEntry:
        """Write the entry; a failure is a problem of the report (the entry is returned as it was)."""
        ...

    def note(self, entry: QueueEntry, reason: str, report: PassReport) -> QueueEntry:
        """Record why a group waits, writing only when the reason changed."""
        ...

    def delete(self, entry: QueueEntry, pods: Sequence[str]) -> list[str]:
        """Delete the pods, the Service and the PodGroup of the entry's group; the pods that could not be."""
        ...

    def quota_hint(self) -> str:
        """What a quota's refusal adds when the pass could not read ResourceQuotas."""
        ...

    def placement_of(self, entry: QueueEntry) -> tuple[str, str | None]:
        """(the entry's placement mode, the PodGroup API version to use, None: det-k8s pins the pods)."""
        ...


def service_name(entry: QueueEntry | None) -> str | None:
    if entry is not None and entry.service:
        return str((entry.service.get("metadata") or {}).get("name") or "") or None
    return None


@dataclass(frozen=True)
class PassEffects:
    """`Effects` over the API, for one pass (`LiveScheduler.effects`)."""

    api: KubeApi
    namespace: str
    view: ClusterView | None
    workers: int
    max_attempts: int
    clock: Callable[[], datetime.datetime]
    renew: Callable[[], None]  # the driver's renewal of the Lease before a write
    placement: Callable[[QueueEntry], tuple[str, str | None]]
    quotas_listed: bool = True

    def now(self) -> datetime.datetime:
        return self.clock()

    def stamp(self) -> str:
        return self.clock().strftime("%Y-%m-%dT%H:%M:%SZ")

    def still_ours(self) -> None:
        self.renew()

    def record(self, entry: QueueEntry) -> QueueEntry:
        return QueueStore(self.api, self.namespace).update(entry)

    def write(self, entry: QueueEntry, report: PassReport) -> QueueEntry:
        self.still_ours()
        try:
            return QueueStore(self.api, self.namespace).update(entry)
        except Conflict:
            report.problems.append(f"{entry.id}: changed by someone else during the pass; left for the next one")
            return entry
        except DetK8sError as exc:
            report.problems.append(f"{entry.id}: could not record its state: {exc.message}")
            return entry

    def note(self, entry: QueueEntry, reason: str, report: PassReport) -> QueueEntry:
        if entry.reason == reason:
            return entry
        return self.write(replace(entry, reason=reason), report)

    def delete(self, entry: QueueEntry, pods: Sequence[str]) -> list[str]:
        return delete_group(self.api, self.namespace, pods, service_name(entry), pod_group=entry.pod_group or None)

    def quota_hint(self) -> str:
        if self.quotas_listed:
            return ""
        return ("; det-k8s may not list resourcequotas here, so it cannot hold the group until the quota has room "
                "(grant list and watch on resourcequotas)")

    def placement_of(self, entry: QueueEntry) -> tuple[str, str | None]:
        return self.placement(entry)
