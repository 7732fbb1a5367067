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
    from .queue import QueueEntry
    from .scheduler import LiveScheduler, PassReport


def complete(s: LiveScheduler, intent: Complete, entry: QueueEntry, report: PassReport) -> QueueEntry:
    if intent.found:
        s._still_ours()
    s._delete(entry, [], report)  # the pods stay for their logs; the Service is no longer needed
    report.completed.append(entry.id)
    return s._write(entry.with_event(f"{s._now()} {intent.why}", state="completed", reason=""), report)


def tear_down(s: LiveScheduler, intent: TearDown, entry: QueueEntry, report: PassReport) -> QueueEntry:
    s._still_ours()
    left = s._delete(entry, intent.pods, report)
    if left:
        report.problems.append(f"{entry.id}: could not delete {', '.join(left)}")
        if len(left) == len(intent.pods):
            return s._note(entry, f"{intent.detail}; tearing the group down (could not delete {', '.join(left)} yet)",
                           report)
    (report.requeued if intent.again else report.failed)[entry.id] = intent.why
    return s._write(torn_down(entry, intent, s.clock()), report)


def clear_rejections(s: LiveScheduler, intent: ClearRejections, entry: QueueEntry, report: PassReport) -> QueueEntry:
    return s._write(replace(entry, rejections=0), report)


def note_unplaced(s: LiveScheduler, intent: NoteUnplaced, entry: QueueEntry, report: PassReport) -> QueueEntry:
    why = unplaced_reason(s.api, s.namespace, entry.pod_group, intent.unbound) if intent.unbound else ""
    return s._note(entry, why, report)


