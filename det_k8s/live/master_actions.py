"""Decide, for the Determined master's pods (pure: no API call): what a pass repairs, plans, binds and reports.

Two steps, as the pass needs them: `collect` before the plan (the master's groups as observed, their partly bound
ones confirmed by a fresh read and their lost nodes confirmed gone: `Repair` intents, the ready groups for the
queue, the bound ones as running groups), `intents` after it (`MarkPreempted` for the victims, `Bind` for the
placed groups, all of them inside one binding fence, `ReportWaiting` for the rest). `master_pods.MasterPods`
observes and acts; the loop's fast pass (`fast`) decides with the same functions, leaving to a full pass what
cannot change its outcome. `collect` also decides the removal of binding taints a det-k8s that stopped left
(`SweepFences`), first of the repairs.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType

from ..scheduling.explain import describe, reclaiming
from ..scheduling.master import MasterGroup, State, as_pod_group, as_running_group
from ..scheduling.model import Plan, PodGroup, Reason, ReasonCode, RunningGroup
from . import binder as B

_EVENT_OF = {ReasonCode.RESERVING: B.RESERVING, ReasonCode.WAITING_FOR_NODES: B.WAITING, ReasonCode.DRA: B.NEEDS_DRA}
_WORDS = {
    ReasonCode.INSUFFICIENT: "waiting for resources",
    ReasonCode.RESERVING: "waiting for resources, nodes reserved for it",
    ReasonCode.BEHIND_RESERVATION: "waiting behind a reservation",
    ReasonCode.STRICT_ORDER: "waiting in strict order",
    ReasonCode.WAITING_FOR_NODES: "waiting for nodes to be added",
    ReasonCode.DRA: "waits for a device claim det-k8s does not allocate",
}


def reason_text(group: MasterGroup, reason: Reason) -> str:
    """det-k8s's one line for a waiting or rejected group (`headline; details`)."""
    what = f"gang {group.name}" if group.size > 1 else f"pod {group.name}"
    text = describe(reason)
    if reason.code.rejected:  # describe() already says "never fits this cluster: ..." for most rejections
        return f"det-k8s: {what} {text}" if text.startswith("never fits") else (
            f"det-k8s: {what} can never be placed on this cluster: {text}")
    return f"det-k8s: {what} {_WORDS.get(reason.code, 'waiting')}: {text}"


@dataclass(frozen=True)
class Seen:
    """A master group as the pass observed it: a partly bound one read afresh (`confirmed`), the nodes its bound
    pods are on that are confirmed gone (`lost`)."""

    group: MasterGroup
    lost: tuple[str, ...] = ()


def seen_in_snapshot(groups: Sequence[MasterGroup], nodes: Container[str]) -> list[Seen]:
    """The groups as a pass that serves them observes them when a snapshot is the whole truth (`plan --snapshot`):
    the nodes a bound group is on that the snapshot lacks are gone (a live pass confirms each by reading it,
    `master_pods.MasterPods.observe`), a leaving group's nodes are not looked at, a partly bound group is as seen."""
    return [Seen(group, () if group.state is State.LEAVING else
                 tuple(sorted(node for node in group.bound_nodes if node not in nodes))) for group in groups]


@dataclass(frozen=True)
class SweepFences:
    """Binding taints older than STALE on these nodes (left by a det-k8s that stopped mid-binding): removed."""

    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Repair:
    """A group that can never run whole (partly bound, or bound to a node that is gone): its bound pods deleted so
    that Determined restarts it whole (what an interrupted binding leaves is repaired this way)."""

    group: MasterGroup
    lost: tuple[str, ...] = ()  # the nodes gone ((): partly bound)


@dataclass(frozen=True)
class MarkPreempted:
    group: MasterGroup
    by: str
    priority: int  # the preemptor's (for the message)


@dataclass(frozen=True)
class Bind:
    """The placed groups, bound all or none each, inside one fence over their planned nodes (live/fence.py)."""

    groups: tuple[tuple[MasterGroup, tuple[tuple[str, str], ...]], ...]


@dataclass(frozen=True)
class ReportWaiting:
    """Why a group waits: in the pass's report and, with an `event`, on its pods (events, conditions)."""

    group: MasterGroup
    text: str
    event: str = ""  # "": reported only (its pods' own status says it: scheduling gates)
    warning: bool = False


@dataclass(frozen=True)
class StopOverdue:
    """A victim still there `grace` after det-k8s marked it: its pods deleted, so Determined restarts the trial
    from its latest checkpoint (one of its max_restarts) instead of the preemptor waiting on it for ever."""

    group: MasterGroup
    waited: float  # seconds since it was marked


MasterIntent = Repair | StopOverdue | MarkPreempted | Bind | ReportWaiting
MasterRepair = SweepFences | Repair | StopOverdue  # decided by `collect`, acted on before the pass's other intents


def overdue(group: MasterGroup, now: datetime, grace: float) -> float | None:
    """Seconds since a victim was marked, if that is more than `grace` and none of its pods is going yet."""
    since = group.preempted_since
    if group.state is not State.LEAVING or not since or any(p.pod.deleting for p in group.pods):
        return None
    try:
        marked = datetime.strptime(since, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    waited = (now - marked).total_seconds()
    return waited if waited > grace else None


@dataclass(frozen=True)
class MasterObserved:
    """What a pass read of the master's groups (`master_pods.MasterPods.observe`)."""

    seen: tuple[Seen, ...]
    stale_fences: tuple[str, ...] = ()  # nodes whose binding taint a det-k8s that stopped left
    now: datetime | None = None  # for a marked victim's grace (None: not counted)


@dataclass(frozen=True)
class Collected:
    repairs: tuple[Repair | StopOverdue, ...]
    queue: tuple[PodGroup, ...]
    running: tuple[RunningGroup, ...]
    groups: Mapping[str, MasterGroup]  # every group by id (for the plan's ids)
    skipped: tuple[str, ...] = ()  # fast: left for a full pass (partly bound, lost node)
    sweep: tuple[SweepFences, ...] = ()  # acted on before the repairs

    @property
    def first(self) -> tuple[MasterRepair, ...]:
        """What is acted on before the pass's other intents, in order: the stale fences, then the repairs."""
        return (*self.sweep, *self.repairs)


def collect(seen: Sequence[Seen], *, read_only: bool = False, fast: bool = False, now: datetime | None = None,
            grace: float | None = None, stale_fences: Sequence[str] = ()) -> Collected:
    """The ready groups for the queue, the bound ones as running groups; partly bound or orphaned ones repaired,
    and victims still there `grace` seconds after they were marked stopped (with `now`); first of all, the stale
    binding taints on `stale_fences` removed (never by a read-only or fast pass)."""
    repairs: list[Repair | StopOverdue] = []
    sweep = (SweepFences(tuple(stale_fences)),) if stale_fences and not read_only and not fast else ()
    queue: list[PodGroup] = []
    running: list[RunningGroup] = []
    groups: dict[str, MasterGroup] = {}
    skipped: list[str] = []
    for found in seen:
        group = found.group
        groups[group.id] = group
        if fast and (found.lost or group.state is State.PARTIAL):
            skipped.append(group.id)  # repaired by the next full pass, never by a fast one
            continue
        if found.lost and not read_only:
            repairs.append(Repair(group, found.lost))  # bound to a node that is gone: it will never run whole
            continue
        if group.state is State.PARTIAL:
            if not read_only:  # (read-only: the loop that serves them repairs it)
                repairs.append(Repair(group))
            continue
        if now is not None and grace is not None and not read_only and not fast and group.trial:
            waited = overdue(group, now, grace)
            if waited is not None:
                repairs.append(StopOverdue(group, waited))
                continue
        if group.state is State.READY:
            queue.append(as_pod_group(group))
        elif group.bound:
            running_group = as_running_group(group)
            running.append(replace(running_group, preemptible=False) if read_only else running_group)
            more = group.extra
            if more is not None:
                groups[more.id] = more
                queue.append(as_pod_group(more))
    return Collected(tuple(repairs), tuple(queue), tuple(running), MappingProxyType(groups), tuple(skipped), sweep)


def told(victims: Sequence[str], groups: Mapping[str, MasterGroup]) -> str:
    """How the master's victims among `victims` were told to stop (the label, or the notice of a Job-based master)."""
    ways = sorted({f"notice pod {g.job}" if g.job else "the label determined-preemption"
                   for v in victims if (g := groups.get(v)) is not None})
    return f" (told by {' and '.join(ways)})" if ways else ""


def intents(plan: Plan, groups: Mapping[str, MasterGroup], priorities: Mapping[str, int], *,
            fast: bool = False) -> tuple[MasterIntent, ...]:
    """What the plan means for the master's groups, in the order it is acted on (marks, waits for victims, the
    bindings, then why the rest wait)."""
    out: list[MasterIntent] = []
    preemptor_of = {victim: g for g, victims in plan.preempting.items() for victim in victims}
    for victim in () if fast else plan.victims:
        group = groups.get(victim)
        if group is not None:
            by = preemptor_of.get(victim, "")
            out.append(MarkPreempted(group, by, priorities.get(by, group.priority + 1)))
    to_bind: list[tuple[MasterGroup, tuple[tuple[str, str], ...]]] = []
    for group_id, placement in plan.placements.items():
        group = groups.get(group_id)
        if group is None:
            continue
        waits_for = plan.preempting.get(group_id, ())
        if waits_for and fast:
            continue  # a full pass says why it waits
        if waits_for:
            what = f"gang {group.name}" if group.size > 1 else f"pod {group.name}"
            text = (f"det-k8s: {what} {reclaiming(plan.reclaims[group_id], waits_for)}; Determined checkpoints "
                    f"them first{told(waits_for, groups)}" if plan.reclaims.get(group_id) else
                    f"det-k8s: gang {group.name} waits for preempted group(s) to stop: {', '.join(waits_for)}; "
                    f"Determined checkpoints them first{told(waits_for, groups)}")
            out.append(ReportWaiting(group, text, B.PREEMPTING))
            continue
        to_bind.append((group, tuple(placement)))
    if to_bind:
        out.append(Bind(tuple(to_bind)))
    if fast:  # reasons and events of waiting groups: the full pass's (never ahead of a binding)
        return tuple(out)
    for group_id, reason in {**plan.waiting, **plan.rejected}.items():
        group = groups.get(group_id)
        if group is None:
            continue
        event = B.UNSCHEDULABLE_EVENT if reason.code.rejected else _EVENT_OF.get(reason.code, B.WAITING)
        out.append(ReportWaiting(group, reason_text(group, reason), event,
                                 warning=reason.code.rejected or reason.code is ReasonCode.DRA))
    for group in groups.values():
        if group.state is State.GATED:  # the pods' own status says SchedulingGated: left as it is
            gates = sorted({gate for p in group.pending for gate in p.gates})
            out.append(ReportWaiting(group, f"det-k8s: {'gang' if group.size > 1 else 'pod'} {group.name} waits for "
                                            f"its scheduling gates to be removed: {', '.join(gates)}"))
        elif group.state is State.INCOMPLETE and group.pending:
            out.append(ReportWaiting(group, f"det-k8s: gang {group.name} waits for its pods: {len(group.pending)} of "
                                            f"{group.size} exist; it is placed once Determined has created them all",
                                     B.INCOMPLETE))
    return tuple(out)
