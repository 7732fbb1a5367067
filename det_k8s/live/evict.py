"""Act: `Evict`, a victim of the plan: its whole group deleted, its entry (if of this queue) requeued, not lost.

An eviction interrupted after its deletions and before its entry was written leaves a running entry whose pods
are stopping: the next pass settles it as lost (`settle.py`), so the victim is requeued either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .decide import Evict
from .submit import delete_group

if TYPE_CHECKING:
    from .effects import Effects
    from .queue import QueueEntry
    from .scheduler import PassReport


def evict(fx: Effects, intent: Evict, entry: QueueEntry | None, report: PassReport) -> QueueEntry | None:
    fx.still_ours()
    left = delete_group(fx.api, fx.namespace, intent.pods, intent.service, pod_group=intent.pod_group)
    report.preempted[intent.group] = intent.by
    if left:
        report.problems.append(f"{intent.group}: could not delete {', '.join(left)}")
    if entry is None or intent.why is None:
        return entry
    return fx.write(entry.with_event(f"{fx.stamp()} {intent.why}", state="queued", reason=intent.why, placement={}),
                    report)
