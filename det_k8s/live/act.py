"""Act: each intent of a pass carried out in order, by the actor its kind names in `ACTORS`.

An intent names its group; it is acted on with the entry as the pass has it now (an earlier intent of the same
pass may have written it). A `Create` whose group is no longer queued (the intent before it could not be recorded:
the entry changed meanwhile) is left for the next pass, which decides afresh. A `Recover` (what interrupted
creations left) is acted on the same way, before the cluster is read. Actors take the pass's `Effects` (effects.py),
never the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

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
    Recover,
    TearDown,
    Wait,
)
from .queue import QUEUED

if TYPE_CHECKING:
    from .effects import Effects
    from .queue import QueueEntry
    from .scheduler import PassReport


class _Grouped(Protocol):
    @property
    def group(self) -> str: ...


K = TypeVar("K", bound=_Grouped)
T = TypeVar("T")
Entries = dict[str, "QueueEntry"]
Actor = Callable[["Effects", T, Entries, "PassReport"], None]


def _on_entry(actor: Callable[[Effects, K, QueueEntry, PassReport], QueueEntry]) -> Actor[K]:
    """An actor of one group's entry: given the entry as the pass has it, it returns the entry as it left it."""
    def run(fx: Effects, intent: K, entries: Entries, report: PassReport) -> None:
        entries[intent.group] = actor(fx, intent, entries[intent.group], report)
    return run


def _clear_stale(fx: Effects, intent: ClearStale, entries: Entries, report: PassReport) -> None:
    leftovers.clear_stale(fx, intent, report)


def _evict(fx: Effects, intent: Evict, entries: Entries, report: PassReport) -> None:
    changed = evict.evict(fx, intent, entries.get(intent.group), report)
    if changed is not None:
        entries[intent.group] = changed


def _create(fx: Effects, intent: Create, entries: Entries, report: PassReport) -> None:
    entry = entries[intent.group]
    if entry.state == QUEUED:
        entries[intent.group] = create.create(fx, intent, entry, report)


def _kind(kind: type[T], actor: Actor[T]) -> tuple[type, Actor[OwnIntent | Recover]]:
    """A row of `ACTORS`: the actor is checked against its kind here, the table holds it by kind."""
    return kind, cast("Actor[OwnIntent | Recover]", actor)


ACTORS: Mapping[type, Actor[OwnIntent | Recover]] = dict([
    _kind(Recover, create.recover),
    _kind(Complete, _on_entry(settle.complete)),
    _kind(TearDown, _on_entry(settle.tear_down)),
    _kind(ClearRejections, _on_entry(settle.clear_rejections)),
    _kind(NoteUnplaced, _on_entry(settle.note_unplaced)),
    _kind(ClearStale, _clear_stale),
    _kind(Adopt, _on_entry(leftovers.adopt)),
    _kind(ClearLeftovers, _on_entry(leftovers.clear_leftovers)),
    _kind(Evict, _evict),
    _kind(Create, _create),
    _kind(Wait, _on_entry(wait.wait)),
])


def act(fx: Effects, intent: OwnIntent | Recover, entries: Entries, report: PassReport) -> None:
    """Carry out one intent; `entries` (by id: the queued and running ones; every one for a `Recover`) is kept
    current."""
    ACTORS[type(intent)](fx, intent, entries, report)
