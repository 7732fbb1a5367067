"""Act: `Wait`, why a group waits: reported, and written to its entry only when the reason changed (no churn)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .decide import Wait

if TYPE_CHECKING:
    from .queue import QueueEntry
    from .scheduler import LiveScheduler, PassReport


def wait(s: LiveScheduler, intent: Wait, entry: QueueEntry, report: PassReport) -> QueueEntry:
    report.waiting[intent.group] = intent.text
    return s._note(entry, intent.text, report) if intent.record else entry
