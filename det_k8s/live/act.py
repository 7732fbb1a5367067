"""Act: each intent of a pass carried out in order, by the module that knows its kind.

An intent names its group; it is acted on with the entry as the pass has it now (an earlier intent of the same
pass may have written it). A `Create` whose group is no longer queued (the intent before it could not be recorded:
the entry changed meanwhile) is left for the next pass, which decides afresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import create, evict, leftovers, settle, wait
from .decide import (
    Adopt,
    ClearLeftovers,
    ClearRejections,
    ClearStale,
    Complete,
    Create,
    Evict,
    NoteUnplaced,
    OwnIntent,
    TearDown,
    Wait,
)
from .queue import QUEUED

if TYPE_CHECKING:
    from .queue import QueueEntry
    from .scheduler import LiveScheduler, PassReport


def act(s: LiveScheduler, intent: OwnIntent, entries: dict[str, QueueEntry], report: PassReport) -> None:
    """Carry out one intent; `entries` (the queued and running ones by id) is kept current."""
    if isinstance(intent, ClearStale):
        leftovers.clear_stale(s, intent, report)
        return
    if isinstance(intent, Evict):
        changed = evict.evict(s, intent, entries.get(intent.group), report)
        if changed is not None:
            entries[intent.group] = changed
        return
    entry = entries[intent.group]
    if isinstance(intent, Complete):
        entries[intent.group] = settle.complete(s, intent, entry, report)
    elif isinstance(intent, TearDown):
        entries[intent.group] = settle.tear_down(s, intent, entry, report)
    elif isinstance(intent, ClearRejections):
        entries[intent.group] = settle.clear_rejections(s, intent, entry, report)
    elif isinstance(intent, NoteUnplaced):
        entries[intent.group] = settle.note_unplaced(s, intent, entry, report)
    elif isinstance(intent, Adopt):
        entries[intent.group] = leftovers.adopt(s, intent, entry, report)
    elif isinstance(intent, ClearLeftovers):
        entries[intent.group] = leftovers.clear_leftovers(s, intent, entry, report)
    elif isinstance(intent, Create):
        if entry.state == QUEUED:
            entries[intent.group] = create.create(s, intent, entry, report)
    elif isinstance(intent, Wait):
        entries[intent.group] = wait.wait(s, intent, entry, report)
