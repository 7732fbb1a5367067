"""Act: `Wait`, why a group waits: reported, and written to its entry only when the reason changed (no churn)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .decide import Wait

if TYPE_CHECKING:
    from .effects import Effects
    from .queue import QueueEntry
    from .scheduler import PassReport


def wait(fx: Effects, intent: Wait, entry: QueueEntry, report: PassReport) -> QueueEntry:
    report.waiting[intent.group] = intent.text
    return fx.note(entry, intent.text, report) if intent.record else entry
