"""Act: pods a pass finds that its queue does not account for (`ClearStale`, `Adopt`, `ClearLeftovers`).

They are what an interrupted earlier pass left: a kill or pause stopped before deleting (stale pods of a paused,
killed or failed group), a creation that could not record itself (a complete set: adopted, or cleared), a
teardown still in progress (cleared; the group waits for them to stop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Conflict, DetK8sError
from ..kube.kinds import SERVICES
from .decide import Adopt, ClearLeftovers, ClearStale
from .submit import delete_group

if TYPE_CHECKING:
    from .effects import Effects
    from .queue import QueueEntry
    from .scheduler import PassReport


def clear_stale(fx: Effects, intent: ClearStale, report: PassReport) -> None:
    fx.still_ours()
    report.problems.extend(f"{intent.group}: could not delete {name}" for name in
                           delete_group(fx.api, fx.namespace, intent.pods, intent.service, pod_group=intent.pod_group))


def adopt(fx: Effects, intent: Adopt, entry: QueueEntry, report: PassReport) -> QueueEntry:
    fx.still_ours()
    missing = ensure_service(fx, entry)
    if missing:  # its pods cannot find each other without it; try again next pass
        report.problems.append(f"{entry.id}: {missing}")
        return fx.note(entry, f"found all its pods running, but {missing}", report)
    report.placed[entry.id] = intent.placement
    return fx.write(entry.with_event(f"{fx.stamp()} found all its pods running; adopted them", state="running",
                                     reason="", placement=dict(intent.placement)), report)


def clear_leftovers(fx: Effects, intent: ClearLeftovers, entry: QueueEntry, report: PassReport) -> QueueEntry:
    if intent.pods:
        fx.still_ours()
        # Gracefully: they may be running, and their GPUs are only free once they have stopped.
        left = delete_group(fx.api, fx.namespace, intent.pods, None)
        if left:
            report.problems.append(f"{entry.id}: could not delete {', '.join(left)}")
    report.waiting[entry.id] = intent.why
    return fx.note(entry, intent.why, report)


def ensure_service(fx: Effects, entry: QueueEntry) -> str:
    """Create the group's headless Service if it is missing (an interrupted creation may have deleted it).

    Returns "" when it exists now, else what went wrong.
    """
    if not entry.service:
        return ""
    try:
        fx.api.create(SERVICES, entry.service, fx.namespace)
    except Conflict:
        return ""  # already there
    except DetK8sError as exc:
        return f"could not create its service: {exc}"
    return ""
