"""Decide: what one pass does to det-k8s's own groups, from what it observed (pure: no API call).

`decide(Observed) -> Decision`: the ordered intents of the pass and the plan they carry out. The order is the
order they are acted on (`act.py`): settle the running groups (completed, torn down, their reason), clear the stale
pods of paused, killed and failed ones, clear or adopt the leftovers of queued ones, then the one `schedule()` over
the queue (with the master's groups the pass serves or plans), evict its victims, create the placed groups, say why
the rest wait; then, when the pass serves the master's pods, their intents (`master.py`). Each intent is a
frozen dataclass; the health verdicts, `charge()`, the quota backoff and the reclaim/preempting wording are decided
here, and the act step only carries them out (and finishes or undoes what an interrupted earlier attempt left: see
the modules of this package).

Before all of it, under the Lease, `recover` decides what interrupted creations left (`Recover`: their pods deleted,
their records closed), from the queue and their pods as read; it is acted on before the cluster is read. The loop's
fast pass decides through `decide` too (`Observed.fast`): only the master's ready groups, planned over the running
ones, and their bindings.

An intent names its group by id; acting on it reads the entry as the pass has it then (an earlier intent of the
same pass may have written it). `decide` keeps the entries as it expects them after each intent (`after`), so a
later decision (a group torn down and requeued, then planned) sees what the earlier one leaves.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ..cluster.model import Pod, Snapshot
from ..scheduling.explain import describe, reclaiming
from ..scheduling.lifecycle import FREE_REJECTIONS, Health, Verdict, charge, group_health
from ..scheduling.master import MasterGroup
from ..scheduling.model import Plan, PodGroup, Policy, RunningGroup
from ..scheduling.narrow import clean, narrowed
from ..scheduling.plan import pass_plan, pass_running, schedule
from ..scheduling.serialize import group_from_dict
from . import master_actions as master
from .creation_records import Doomed, doomed_pods, interrupted, unfinished
from .master_actions import Bind, MarkPreempted, MasterIntent, Repair, ReportWaiting, StopOverdue
from .queue import COMPLETED, FAILED, KILLED, PAUSED, QUEUED, RUNNING, QueueEntry

QUOTA_BACKOFF = 30.0  # seconds before the one free retry of a creation a ResourceQuota refused
QUOTA_REFUSED = "a ResourceQuota refused it"


# -- the intents, one kind per way a pass changes a group ------------------------------------------------------


@dataclass(frozen=True)
class Complete:
    """All its pods finished: the entry completed, its Service and PodGroup deleted (the pods stay for their logs).
    `found`: a queued group found finished (it ran unrecorded)."""

    group: str
    why: str
    found: bool = False


@dataclass(frozen=True)
class TearDown:
    """A lost group: its pods deleted, then the loss charged (requeued, or failed once its attempts are used)."""

    group: str
    pods: tuple[str, ...]
    detail: str  # the health verdict's detail
    why: str  # the event and reason once torn down
    again: bool  # requeued (else failed)
    attempts: int
    rejections: int


@dataclass(frozen=True)
class ClearRejections:
    """Admitted and running: earlier admission rejections were races, not a node refusing it for good."""

    group: str


@dataclass(frozen=True)
class NoteUnplaced:
    """A running group kube-scheduler places (a PodGroup): why it has not yet is read and noted (act reads it)."""

    group: str
    unbound: tuple[Pod, ...]


@dataclass(frozen=True)
class ClearStale:
    """Pods of a paused, killed or failed group still there (a kill or pause interrupted before deleting)."""

    group: str
    pods: tuple[str, ...]
    service: str | None
    pod_group: str | None


@dataclass(frozen=True)
class Adopt:
    """A queued group found with all its pods running (a creation that could not record itself): adopted."""

    group: str
    placement: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ClearLeftovers:
    """Pods of a queued group that cannot be adopted: deleted (gracefully) before it runs again; it waits."""

    group: str
    pods: tuple[str, ...]  # the ones to delete (not already stopping)
    why: str


@dataclass(frozen=True)
class Evict:
    """A victim of the plan: its pods deleted, its entry (if it is of this queue) requeued."""

    group: str
    by: str
    pods: tuple[str, ...]
    service: str | None
    pod_group: str | None
    why: str | None  # the entry's event and reason (None: no entry of this queue)


@dataclass(frozen=True)
class Create:
    """A placed group: its creation recorded in its entry (the intent record), its pods created, all or none."""

    group: str
    placement: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Recover:
    """What interrupted or failed creations left (creation_records.py), first of all under the Lease: their pods
    deleted, then the unfinished records (`close`, in queue order) whose pods are all gone closed as failed ones."""

    pods: tuple[Doomed, ...]
    interrupted: frozenset[tuple[str, str]]  # (group, attempt) of the unfinished creations
    close: tuple[str, ...]


@dataclass(frozen=True)
class Wait:
    """Why a group waits: reported, and noted in its entry when `record` (only when the reason changed)."""

    group: str
    text: str
    record: bool = True


OwnIntent = (Complete | TearDown | ClearRejections | NoteUnplaced | ClearStale | Adopt | ClearLeftovers | Evict | Create
             | Wait)
Intent = OwnIntent | MasterIntent


def recover(entries: Sequence[QueueEntry], pods: Iterable[tuple[str, Mapping[str, str]]]) -> tuple[Recover, ...]:
    """What the pods of creation attempts (`creation_records.attempt_pods`) and the entries' records ask for."""
    doomed = tuple(doomed_pods(entries, pods, intents=True))
    close = tuple(e.id for e in entries if unfinished([e]))
    return (Recover(doomed, interrupted(entries), close),) if doomed or close else ()


def split(intents: Sequence[Intent]) -> tuple[list[OwnIntent], list[MasterIntent]]:
    """(det-k8s's own groups' intents, the master's), each in the decided order."""
    own: list[OwnIntent] = []
    theirs: list[MasterIntent] = []
    for intent in intents:
        if isinstance(intent, Repair | StopOverdue | MarkPreempted | Bind | ReportWaiting):
            theirs.append(intent)
        else:
            own.append(intent)
    return own, theirs


# -- what the pass observed -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """One pass's reading of the queue and the cluster (after the unfinished creations were swept)."""

    namespace: str
    entries: tuple[QueueEntry, ...]  # every entry of the namespace's queue
    pods: Mapping[str, tuple[Pod, ...]]  # det-k8s's pods of the namespace by group id, finished ones included
    snapshot: Snapshot  # the pods that hold resources, the nodes
    policy: Policy
    now: datetime.datetime
    max_attempts: int
    master_queue: tuple[PodGroup, ...] = ()  # the master's ready groups (collected: master_pods.py)
    master_running: tuple[RunningGroup, ...] = ()  # the master's bound groups
    master_groups: frozenset[str] = frozenset()  # every master group id the pass knows (never evicted here)
    serving: Mapping[str, MasterGroup] | None = None  # the master's groups when this pass serves them (binds)
    fast: bool = False  # the loop's fast pass: only the master's ready groups (see `decide`)


@dataclass(frozen=True)
class Decision:
    intents: tuple[Intent, ...]
    plan: Plan | None  # None: a fast pass with no gang ready (nothing planned)
    queue: tuple[PodGroup, ...]  # what was planned (for the master's messages: its groups' priorities)
    running: tuple[RunningGroup, ...] = ()  # a fast pass's: what it planned around
    after: Mapping[str, QueueEntry] = field(default_factory=lambda: MappingProxyType({}))  # entries as expected


def stamp(now: datetime.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def expected_pods(entry: QueueEntry) -> list[str]:
    return [str((p.get("metadata") or {}).get("name")) for p in entry.pods]


def service_of(entry: QueueEntry | None) -> str | None:
    if entry is not None and entry.service:
        return str((entry.service.get("metadata") or {}).get("name") or "") or None
    return None


def attempts_text(count: int) -> str:
    return f"{count} attempt" if count == 1 else f"{count} attempts"


def quota_backoff(entry: QueueEntry, now: datetime.datetime) -> float:
    """Seconds left before the one retry of a group a ResourceQuota refused (0: none, or it is due)."""
    if QUOTA_REFUSED not in entry.reason or not entry.events:
        return 0.0
    when = entry.events[-1].partition(" ")[0]
    try:
        refused = datetime.datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return 0.0
    return max(0.0, QUOTA_BACKOFF - (now - refused).total_seconds())


def tear_down(entry: QueueEntry, health: Health, pods: Sequence[str], max_attempts: int) -> TearDown:
    """The loss charged once the set is broken up (`act` notes it instead when not one pod could be deleted)."""
    cost = charge(health, entry.attempts, entry.rejections, max_attempts)
    if cost.again and cost.attempts == entry.attempts:
        why = (f"{health.detail}; the group was torn down and requeued (admission rejection {cost.rejections} "
               f"of {FREE_REJECTIONS} not counted as an attempt)")
    elif cost.again:
        why = f"{health.detail}; the group was torn down and requeued (attempt {cost.attempts + 1} of {max_attempts})"
    else:
        why = f"{health.detail}; gave up after {attempts_text(cost.attempts)}"
    return TearDown(entry.id, tuple(pods), health.detail, why, cost.again, cost.attempts, cost.rejections)


def torn_down(entry: QueueEntry, intent: TearDown, now: datetime.datetime) -> QueueEntry:
    """The entry as a teardown that deleted at least one pod leaves it."""
    return entry.with_event(f"{stamp(now)} {intent.why}", state=QUEUED if intent.again else FAILED,
                            attempts=intent.attempts, rejections=intent.rejections, reason=intent.why, placement={})


def settle(entry: QueueEntry, pods: Sequence[Pod], now: datetime.datetime, max_attempts: int) -> Intent | None:
    """A running group: completed, lost (torn down), or running (its reason kept current)."""
    expected = expected_pods(entry)
    health = group_health(expected, pods, now)
    if health.verdict is Verdict.RUNNING:
        if entry.rejections and all(p.phase == "Running" for p in pods if p.name in expected):
            return ClearRejections(entry.id)
        if entry.pod_group:  # kube-scheduler places it: why it has not yet is one more source of the reason
            return NoteUnplaced(entry.id, tuple(p for p in pods if p.name in expected and not p.node_name))
        return None
    if health.verdict is Verdict.COMPLETED:
        return Complete(entry.id, "completed")
    return tear_down(entry, health, [p.name for p in pods], max_attempts)


def leftovers(entry: QueueEntry, pods: Sequence[Pod], unready: set[str], namespace: str,
              now: datetime.datetime, max_attempts: int) -> Intent:
    """Pods of a queued group: adopt a complete healthy set, else clear them away before it runs again.

    They come from a pass that created the pods but could not record it (an interrupted client, a lost Lease),
    or from a teardown still in progress.
    """
    expected = expected_pods(entry)
    present = [p for p in pods if not p.deleting]
    stale = [p.name for p in present]
    if sorted(stale) == sorted(expected):
        health = group_health(expected, present, now)
        if health.verdict is Verdict.COMPLETED:  # it ran to the end unrecorded: keep its work and its logs
            return Complete(entry.id, "found all its pods finished; completed", found=True)
        if health.verdict is Verdict.RUNNING and all(p.node for p in present):  # bound, or pinned to its node
            return Adopt(entry.id, tuple(sorted((p.name, p.node or "") for p in present)))
        if health.verdict is Verdict.LOST:  # it ran unrecorded and failed: that costs an attempt like any failure
            return tear_down(entry, health, stale, max_attempts)
    why = f"waiting for its previous pods to stop: {', '.join(sorted(p.name for p in pods))}"
    stuck = sorted(p.name for p in pods if p.deleting and p.node_name in unready)
    if stuck:
        # Not force-deleted here: the node may come back with the pod still running on it (and its name
        # taken by the group's next attempt). Whether the node is gone for good is a person's call.
        why += (f"; {', '.join(stuck)} cannot be confirmed stopped while their node is NotReady (if it is gone "
                f"for good: kubectl delete pod {stuck[0]} -n {namespace} --force --grace-period=0)")
    return ClearLeftovers(entry.id, tuple(stale), why)


def decide(seen: Observed) -> Decision:
    """The pass's intents, in the order they are acted on (see the module docstring).

    A fast pass (`seen.fast`: the loop's, scheduler.py) observes no queue of det-k8s's own: the master's ready groups
    are planned, with the running groups, over the tightest nodes with room for them where that places them as the
    whole cluster would (`fast_plan`), and only their bindings decided (and the marks and waits that cannot wait,
    none: what the plan cannot place without evicting or waiting is left to the next full pass)."""
    if seen.fast:
        return _decide_fast(seen)
    intents: list[Intent] = []
    now = seen.now
    entries = {e.id: e for e in seen.entries if e.state in (QUEUED, RUNNING)}
    after = dict(entries)
    torn: set[str] = set()  # requeued or ended by this pass: their pods are stopping, already asked to
    for entry in [e for e in entries.values() if e.state == RUNNING]:
        intent = settle(entry, seen.pods.get(entry.id, ()), now, seen.max_attempts)
        if intent is None:
            continue
        intents.append(intent)
        if isinstance(intent, TearDown):
            after[entry.id] = torn_down(entry, intent, now)
            torn.add(entry.id)
        elif isinstance(intent, Complete):
            after[entry.id] = entry.with_event(f"{stamp(now)} {intent.why}", state=COMPLETED, reason="")
            torn.add(entry.id)
    for entry in seen.entries:  # a kill or pause interrupted before deleting, a teardown that partly failed
        pods = seen.pods.get(entry.id, ())
        stale = [p.name for p in pods if not p.deleting and (entry.state in (PAUSED, KILLED) or p.active)]
        if entry.state in (PAUSED, KILLED, FAILED) and stale:
            intents.append(ClearStale(entry.id, tuple(stale), service_of(entry), entry.pod_group or None))
    unready = {node.name for node in seen.snapshot.nodes if not node.ready}
    queue: list[PodGroup] = []
    for entry in list(after.values()):
        if entry.state != QUEUED:
            continue
        pods = seen.pods.get(entry.id, ())
        if entry.id in torn and pods:
            continue  # its pods were just asked to stop; the next pass finds them gone or stopping
        if pods:
            intent = leftovers(entry, pods, unready, seen.namespace, now, seen.max_attempts)
            intents.append(intent)
            if isinstance(intent, TearDown):
                after[entry.id] = torn_down(entry, intent, now)
            elif isinstance(intent, Adopt):
                after[entry.id] = entry.with_event(f"{stamp(now)} found all its pods running; adopted them",
                                                   state=RUNNING, reason="", placement=dict(intent.placement))
            elif isinstance(intent, Complete):
                after[entry.id] = entry.with_event(f"{stamp(now)} {intent.why}", state=COMPLETED, reason="")
            continue
        queue.append(group_from_dict(entry.group))
    # Only groups of this queue may be evicted: their pods are the ones this pass can delete. Other namespaces'
    # det-k8s groups hold capacity like any other pods (`plan` uses the same scope). The master's groups join both.
    planned, plan = pass_plan(seen.snapshot, queue, seen.policy, seen.namespace, master_queue=seen.master_queue,
                              master_running=seen.master_running, now=now)
    queue = list(planned)
    preemptor_of = {victim: group for group, victims in plan.preempting.items() for victim in victims}
    for victim in plan.victims:
        if victim in seen.master_groups:
            continue  # the master's: marked for preemption (master_pods.py), not deleted
        by = preemptor_of.get(victim, "")
        victim_entry = after.get(victim)
        why = None
        if victim_entry is not None:
            why = (f"reclaimed by {by} (its queue's guarantee); back in the queue" if victim in plan.reclaimed
                   else f"preempted by {by} (higher priority); back in the queue")
            after[victim] = victim_entry.with_event(f"{stamp(now)} {why}", state=QUEUED, reason=why, placement={})
        intents.append(Evict(victim, by, tuple(p.name for p in seen.pods.get(victim, ())), service_of(victim_entry),
                             (victim_entry.pod_group or None) if victim_entry is not None else None, why))
    for group_id, placement in plan.placements.items():
        if group_id not in after:
            continue  # the master's: bound by master_pods.py
        entry = after[group_id]
        waits_for = plan.preempting.get(group_id, ())
        if waits_for and plan.reclaims.get(group_id):
            intents.append(Wait(group_id, reclaiming(plan.reclaims[group_id], waits_for)))
        elif waits_for:
            intents.append(Wait(group_id, f"waiting for preempted group(s) to stop: {', '.join(waits_for)}"))
        elif (pause := quota_backoff(entry, now)) > 0:  # a ResourceQuota refused it a moment ago: retried later
            intents.append(Wait(group_id, f"{entry.reason}; next try in {pause:.0f} s", record=False))
        else:
            intents.append(Create(group_id, tuple(placement)))
    for group_id, reason in {**plan.waiting, **plan.rejected}.items():
        if group_id in after:
            intents.append(Wait(group_id, describe(reason)))
    if seen.serving is not None:  # the master's: marked, bound, or told why they wait (master_pods.py acts)
        intents += master.intents(plan, seen.serving, {group.id: group.priority for group in queue})
    return Decision(tuple(intents), plan, tuple(queue), after=MappingProxyType(after))


def _decide_fast(seen: Observed) -> Decision:
    queue = seen.master_queue
    if not queue:
        return Decision((), None, ())
    running = pass_running(seen.snapshot, seen.namespace, seen.master_running)
    plan = fast_plan(seen.snapshot, queue, seen.policy, running, seen.now)
    decided = master.intents(plan, seen.serving or {}, {group.id: group.priority for group in queue}, fast=True)
    return Decision(decided, plan, queue, running=running)


def fast_plan(snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy, running: Sequence[RunningGroup],
              now: datetime.datetime, guesses: bool = False) -> Plan:
    """A fast pass's plan: made on the candidate nodes where that places the gang as the whole snapshot would
    (scheduling/narrow.py: the tightest nodes with room, as kube-scheduler scores a sample of a large cluster's
    nodes), else on the whole snapshot. Only one gang at a time (several: their order by fair share is the whole
    cluster's), or `guesses` (the fast pass's guesses of the next gangs' nodes, whose order decides nothing)."""
    narrow = narrowed(snapshot, queue, policy, running) if len(queue) == 1 or guesses else None
    if narrow is not None:
        plan = schedule(narrow.snapshot, queue, policy, narrow.running, now=now)
        if clean(plan, queue, narrow):
            return plan
    return schedule(snapshot, queue, policy, running, now=now)
