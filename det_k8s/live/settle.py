"""Act: the running groups' intents (`Complete`, `TearDown`, `ClearRejections`, `NoteUnplaced`).

A teardown is charged once the set is broken up, so that no later pass can find it whole and charge the same
failure again. If not one pod could be deleted, the entry stays as it was and the next pass decides the same
teardown again (what an interrupted teardown leaves is finished that way); the pods a partial teardown leaves
behind are cleared as leftovers (`leftovers.py`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .decide import ClearRejections, Complete, NoteUnplaced, TearDown, torn_down
from .native import unplaced_reason

if TYPE_CHECKING:
    from .effects import Effects
    from .queue import QueueEntry
    from .scheduler import PassReport


def complete(fx: Effects, intent: Complete, entry: QueueEntry, report: PassReport) -> QueueEntry:
    if intent.found:
        fx.still_ours()
    fx.delete(entry, [])  # the pods stay for their logs; the Service is no longer needed
    report.completed.append(entry.id)
    return fx.write(entry.with_event(f"{fx.stamp()} {intent.why}", state="completed", reason=""), report)


def tear_down(fx: Effects, intent: TearDown, entry: QueueEntry, report: PassReport) -> QueueEntry:
    fx.still_ours()
    left = fx.delete(entry, intent.pods)
    if left:
        report.problems.append(f"{entry.id}: could not delete {', '.join(left)}")
        if len(left) == len(intent.pods):
            return fx.note(entry, f"{intent.detail}; tearing the group down (could not delete {', '.join(left)} yet)",
                           report)
    (report.requeued if intent.again else report.failed)[entry.id] = intent.why
    return fx.write(torn_down(entry, intent, fx.now()), report)


def clear_rejections(fx: Effects, intent: ClearRejections, entry: QueueEntry, report: PassReport) -> QueueEntry:
    return fx.write(replace(entry, rejections=0), report)


def note_unplaced(fx: Effects, intent: NoteUnplaced, entry: QueueEntry, report: PassReport) -> QueueEntry:
    why = unplaced_reason(fx.api, fx.namespace, entry.pod_group, intent.unbound) if intent.unbound else ""
    return fx.note(entry, why, report)


