"""One scheduling pass against a live cluster, under the scheduling Lease: observe -> decide -> act -> result.

    observe   the queue and the pods interrupted creations left; then the cluster (one state), det-k8s's pods by
              group, the master's groups (a partly bound one read afresh, a lost node confirmed gone); nothing written
    decide    pure: `decide.recover`, then `master_actions.collect` (the master's repairs) and `decide.decide` (the
              ordered intents and the plan)
    act       the recovery first (before the cluster is read), then the master's repairs, det-k8s's own intents
              (complete, tear down, clear, adopt, evict, create all or none, say why it waits), the master's (mark,
              bind, report), each by its kind's actor (act.py, master_pods.py) through the pass's `Effects`
    result    the PassReport (`run_pass`); for the loop, a `PassResult` (`reconcile`)

`live/` holds the steps (its package docstring, and DEVELOPERS.md "A live pass is a
reconcile"): every entry point that runs a pass (`experiment create`, `scheduler run --once`, the
loop) runs these, so what an interrupted pass left is finished or undone the same way whoever comes next.

Pods are pinned at creation by a required node affinity on their node's name (`groups.pin`, the
DaemonSet controller's way), so pods this pass created count as used on that node in the next
pass's snapshot even before kube-scheduler binds them: two passes never hand out the same GPUs,
and the Lease makes sure two clients never plan at the same time.

With `serve` (the scheduler name the Determined master puts in its task pods), the master's pods
join the same pass (`master_pods.py`): its ready groups are queued with det-k8s's own, its bound
ones count as running groups, and the plan is carried out by binding them (`binder.py`). With a
`view` (`watch.py`), the pass reads the cluster from a watch instead of listing it. Every pass that
wrote pods leaves a fence in the Lease (the newest pod revision its writes are within) so that the
next holder's view first catches up with them: a loop's, once its watch confirmed them; a pass
without a view (`experiment create`, `--once`), the revision its own pod writes answered with, so the
loop's watch reaches it at once (the cluster's current revision only when a write's revision is not
known: a binding, a failed write).

The loop's fast path (`run_pass(fast=True)`): when only the master's pods changed since the last pass and
that pass left nothing waiting (no group of det-k8s's own queued, none of the master's waiting, rejected or
preempting), the master's gangs that became complete are bound at once: the same kernel, observing only the view and
the master's groups, deciding through the same `decide` (its fast form: the master's ready groups as the queue and
every running group as running, on a large cluster over the tightest nodes with room for them where that finds the
same placement: scheduling/narrow.py), under the Lease and inside the binding fence like any pass; only the work
that cannot change the outcome is left to the next full pass (queue entries, det-k8s's own groups, reasons and
events of waiting groups, repairs, stale fences). What the fast pass cannot place without evicting or waiting is not
touched: it marks the backlog, and the loop's next pass is a full one. So a gang is bound a pass after its last pod
appears, not after a whole-cluster pass that reports every waiting group. The full pass that only --interval asks
for lets a gang ready or on its way (`arriving`) go first, until it is twice --interval old (`loop.fast_next`).
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import NamedTuple

from ..cluster.model import Pod, Snapshot
from ..cluster.read import pod_from_object
from ..errors import DetK8sError
from ..kube.api import KubeApi
from ..kube.events import EventRecorder
from ..kube.kinds import PODS
from ..kube.snapshot import read_snapshot
from ..kube.watch import ClusterState, ClusterView, read_cluster
from ..scheduling import labels as L
from ..scheduling.lifecycle import DEFAULT_MAX_ATTEMPTS
from ..scheduling.master import State, master_groups, planned_forms
from ..scheduling.model import Plan, PodGroup, Policy, RunningGroup
from ..scheduling.plan import pass_plan
from ..scheduling.serialize import group_from_dict
from .act import act
from .binder import Binder
from .create import refused_by_quota
from .creation_records import attempt_pods
from .decide import (
    QUOTA_BACKOFF,
    QUOTA_REFUSED,
    Decision,
    Intent,
    Observed,
    decide,
    fast_plan,
    quota_backoff,
    recover,
    split,
)
from .effects import PassEffects
from .fence import BATCH as FENCE_BATCH
from .fence import Fence
from .lease import SchedulingLease, lease_namespace, served_now, utcnow
from .master_actions import Collected, MasterObserved
from .master_pods import MasterPods
from .native import served_version
from .queue import QUEUED, RUNNING, QueueEntry, QueueStore

__all__ = ["QUOTA_BACKOFF", "QUOTA_REFUSED", "DryCluster", "LiveScheduler", "PassReport", "PassResult", "dry_cluster",
           "dry_plan", "quota_backoff", "refused_by_quota"]

Log = Callable[[str], None]
WARM = 8  # gangs ahead whose likely nodes a fast pass fences early (`_warm`)
AHEAD_LEFT = 1  # nodes raised ahead and still unused above which a fast pass makes no new guess
FAST_HOLD = 2.0  # seconds a fast pass goes on binding gangs that complete meanwhile, under one hold of the Lease
HOLD_IDLE = 0.5  # seconds the Lease is kept after a fast pass for a next gang (within FAST_HOLD)
ARRIVING = 1.0  # seconds after a served pod appeared within which a gang still missing pods is on its way (`arriving`)
_POD_PATH = re.compile(r"^/api/v1/namespaces/[^/]+/pods(?:/|$)")
# How long a preempted trial of the master may take to checkpoint and stop before det-k8s deletes its pods (the
# master's own default preemption_timeout is an hour; a trial that checkpoints takes minutes).
PREEMPTION_GRACE = 30 * 60.0


@dataclass
class PassReport:
    """What one pass did, for the command that ran it to print."""

    placed: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)
    preempted: dict[str, str] = field(default_factory=dict)  # victim id -> preemptor id
    requeued: dict[str, str] = field(default_factory=dict)  # id -> why (lost pod, failed creation)
    completed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    plan: Plan | None = None
    uncleared: dict[str, str] = field(default_factory=dict)  # id -> a creation whose pods may remain (creation_records.py)
    marked: dict[str, str] = field(default_factory=dict)  # master victim id -> preemptor id (determined-preemption)
    repaired: dict[str, str] = field(default_factory=dict)  # master group id -> why its bound pods were deleted
    native: dict[str, str] = field(default_factory=dict)  # id -> "<version>/<name>" of the PodGroup kube-scheduler places
    intents: tuple[Intent, ...] = ()  # what the pass decided for det-k8s's own groups, in order (live/)


@dataclass(frozen=True)
class PassResult:
    """What one pass tells the loop that ran it (`LiveScheduler.reconcile`): its report, and whether it is done (left
    nothing waiting: the next pass may be a fast one). A fast pass that is not done asks for a full pass at once
    (`requeue`)."""

    report: PassReport
    fast: bool
    done: bool

    @property
    def requeue(self) -> bool:
        return self.fast and not self.done


class _Fast(NamedTuple):
    """A fast pass's observation and decision (`LiveScheduler._fast_decide`), carried out by `_fast_pass`."""

    report: PassReport
    state: ClusterState
    master: MasterPods
    found: Collected  # the master's groups as collected (the fast pass's leave repairs to a full pass: `skipped`)
    decision: Decision


class _Seen(NamedTuple):
    """What a full pass observed of the cluster (`LiveScheduler._observe_cluster`); nothing was written."""

    state: ClusterState
    pods: Mapping[str, tuple[Pod, ...]]  # det-k8s's pods of the namespace by group
    master: MasterPods | None  # None: no served name, the master's pods are not planned
    master_seen: MasterObserved | None


@dataclass
class LiveScheduler:
    api: KubeApi
    namespace: str
    policy: Policy
    holder: str
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    workers: int = 8
    lease_wait: float = 10.0
    clock: Callable[[], datetime.datetime] = utcnow
    serve: str | None = None  # the scheduler name of the master's pods to bind (None: det-k8s's own queue only)
    view: ClusterView | None = None  # the loop's watch-fed cluster (None: list the cluster every pass)
    renew_every: float = 0.0  # seconds between Lease renewals before writes (0: before every write)
    fence: bool = True  # taint the nodes the master's pods are bound to against kube-scheduler meanwhile (fence.py)
    fence_batch: int = FENCE_BATCH  # nodes fenced at once; a pass binding more goes batch by batch (fence.batches)
    advertise_for: float = 0.0  # with serve: tell passes without it, for this long, that the master's pods are served
    linger: float = 0.0  # with a view: seconds a fast pass's binding fence stays up for the next gang (live/fence.py)
    hold: float = FAST_HOLD  # a fast pass keeps the Lease this long at most for gangs completing meanwhile (`_hold`)
    hold_idle: float = HOLD_IDLE  # ... and gives it back once none came for this long
    cool: float = FAST_HOLD  # after a hold that ran its whole time, this long without holds (`_hold`)
    preemption_grace: float = PREEMPTION_GRACE  # seconds a marked victim of the master's may take to stop

    _held: SchedulingLease | None = field(default=None, repr=False)
    _lease: SchedulingLease | None = field(default=None, repr=False)
    _binder: Binder | None = field(default=None, repr=False)
    _fences: Fence | None = field(default=None, repr=False)  # the loop's fence, whose taints linger (fast passes)
    _renewed: float = field(default=0.0, repr=False)
    _cooling_until: float = field(default=0.0, repr=False)  # (time.monotonic) fast passes hold the Lease no longer
    # than their bindings until then (`_hold`)
    _wrote_pods: bool = field(default=False, repr=False)
    _pod_writes: list[str] = field(default_factory=list, repr=False)  # without a view: revisions of pod writes
    _empty_queue_at: int = field(default=-1, repr=False)  # the view's queue_changes when the queue was last empty
    _quotas_listed: bool = field(default=True, repr=False)  # the pass read ResourceQuotas (it may list them)
    _pod_group_api: tuple[str | None] | None = field(default=None, repr=False)  # this pass's discovery (native.py)
    backlog: bool = field(default=True, repr=False)  # the last pass left something waiting: no fast path until a
    # full pass leaves nothing (True at first: the first pass is a full one)

    @property
    def store(self) -> QueueStore:
        return QueueStore(self.api, self.namespace)

    def lease(self) -> SchedulingLease:
        """The cluster-wide Lease (GPUs are shared by every namespace's queue), one object per scheduler:
        it remembers how long it has watched another holder, which is how a dead holder is recognised."""
        if self._lease is None:
            self._lease = SchedulingLease(self.api, lease_namespace(), self.holder, clock=self.clock)
        return self._lease

    def can_go_fast(self) -> bool:
        """May the next pass be a fast one (see the module docstring)? The loop also asks whether anything but the
        master's pods changed since the last full pass."""
        return self.view is not None and bool(self.serve) and not self.backlog

    def reconcile(self, fast: bool = False) -> PassResult:
        """One pass (`run_pass`) and what it tells the loop."""
        report = self.run_pass(fast=fast)
        return PassResult(report, fast, not self.backlog)

    def run_pass(self, fast: bool = False) -> PassReport:
        """Take the Lease, run one pass, give the Lease back (raises LeaseHeld when it stays taken).

        Before every write the pass renews the Lease; if another client took it over meanwhile
        (the pass was slower than the Lease's duration), LeaseLost stops the pass there.
        With `fast` (the loop, when `can_go_fast()`): only the master's gangs that are ready are placed, and only when
        one is (no Lease taken otherwise).
        """
        others = 0
        if fast:
            if not self.can_go_fast():
                raise ValueError("a fast pass needs a view, a served scheduler name and no backlog")
            assert self.view is not None and self.serve
            if not self._any_ready():
                return PassReport()  # nothing to bind: no Lease, no request
            others = self.view.other_changes
        lease = self.lease()
        lease.fence = ""
        lease.serving = ""
        if self.serve and self.advertise_for > 0:
            until = self.clock() + datetime.timedelta(seconds=self.advertise_for)
            lease.serving = f"{self.serve} until {until.astimezone(datetime.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
        # A fast pass plans while the Lease is taken back (`SchedulingLease.held`): the plan reads only the view, and
        # a take-back that succeeds proves no other pass ran since our own; otherwise it is made again below.
        with lease.held(wait=self.lease_wait, alongside=self._fast_decide if fast else None) as early:
            self._held = lease
            self._renewed = time.monotonic()
            self._wrote_pods = False
            self._pod_writes = []
            self._pod_group_api = None
            observed = self.view is None and self.api.observe_writes is None
            if observed:
                self.api.observe_writes = self._observe
            try:
                if self.view is not None and not self.view.catch_up(lease.previous_fence):
                    early = None  # (listed afresh: a plan made before is not of this view)
                if early is not None and self.view is not None and self.view.other_changes != others:
                    early = None  # a node (or a pod not the master's) changed while the Lease was taken: plan again
                if not fast:
                    lowered = self.lower_fences()  # (the due ones; the rest serve this pass's bindings too)
                    report = self._pass()
                    report.problems[:0] = lowered
                    return report
                report = self._fast_pass(early if early is not None else self._fast_decide())
                self._hold(report, others)
                return report
            finally:
                if observed:
                    self.api.observe_writes = None
                self._held = None
                lease.fence = self._fence()

    def _hold(self, report: PassReport, others: int) -> None:
        """Gangs that complete soon after a fast pass are bound in the same hold of the Lease (no release and
        take-back, two Lease writes, in between): while the master's gangs keep coming, the Lease is kept for up to
        `hold` seconds, and given back once none came for `hold_idle` seconds, a change other than the master's pods
        asks for a full pass, or a pass leaves something waiting; other clients wait at most that long for it. (Its
        writes renew the Lease as any pass's do, `_still_ours`; FAST_HOLD is far inside the Lease's duration.)

        `others`: the view's count of other changes when the pass began. A hold that ran its whole `hold` is followed by
        `cool` seconds of passes that give the Lease back as soon as no gang is ready (as before holds), so a client
        polling for the Lease (`SchedulingLease.held`, every 0.5 s) finds it free within a few tries."""
        assert self.view is not None
        now = time.monotonic()
        hold_until = now + self.hold
        idle = 0.0 if now < self._cooling_until else self.hold_idle
        while not self.backlog:
            if self.view.other_changes != others:
                self.backlog = True  # (the change this hold's wait consumed asks for a full pass: the loop runs it now)
                return
            if time.monotonic() >= hold_until:
                self._cooling_until = time.monotonic() + self.cool  # (others' turn: see above)
                return  # (the Lease is given back; a gang ready now the loop sees before it waits: `ready`)
            if self._any_ready():
                self._fast_pass(self._fast_decide(report))
                continue
            left = min(idle, hold_until - time.monotonic())
            if left <= 0 or not self.view.wait_for_change(left, debounce=0.0):
                if time.monotonic() >= hold_until:
                    self._cooling_until = time.monotonic() + self.cool
                return
            # (lingering taints due meanwhile are lowered once the hold ends, at most `hold` seconds late: lowering
            # them here would keep a gang whose last pod comes meanwhile waiting for those writes)

    def _observe(self, method: str, path: str, answer: object) -> None:
        """A write of this pass (without a view): the revision a pod write left, or "?" when it is not known (a
        binding answers with a Status, a failed write may still land)."""
        if not _POD_PATH.match(path):
            return
        meta = answer.get("metadata") if isinstance(answer, Mapping) and answer.get("kind") == "Pod" else None
        version = str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""
        self._pod_writes.append(version if version.isdigit() else "?")  # (list.append: safe from the binder's threads)

    def _fence(self) -> str:
        """The newest pod revision this pass's writes are within, for the next holder (see the module docstring)."""
        if not self._wrote_pods:
            return ""
        try:
            if self.view is not None:
                return self.view.settled_version()
            writes = list(self._pod_writes)
            if not writes:
                return ""  # no pod written (queue entries only): nothing the next holder's view must wait for
            if "?" not in writes:  # the newest pod revision written: the next holder's watch delivers exactly it
                return str(max(int(version) for version in writes))
            # an empty list's resourceVersion: the current revision, newer than every write of this pass (only a
            # bookmark or a later pod event reaches it, or the next holder lists its pods again)
            return self.api.list_page(PODS, all_namespaces=True, field_selector="metadata.name=det-k8s-fence")[1]
        except DetK8sError:
            return ""

    def _still_ours(self) -> None:
        """Before any write: renew the Lease (at most every `renew_every` seconds); raises LeaseLost."""
        if self._held is not None:
            self._wrote_pods = True
            now = time.monotonic()
            if not self.renew_every or now - self._renewed >= self.renew_every:
                self._held.renew()
                self._renewed = now

    def loop_fence(self) -> Fence | None:
        """The fence of the loop's fast passes, kept from one to the next (None: a fence per binding, lowered at
        once). Its taints stay up `linger` seconds after a binding, and it raises them early on the nodes the next
        gang is likely to get (`_warm`): a gang bound to such nodes waits no settle (live/fence.py)."""
        if not (self.fence and self.linger > 0 and self.view is not None and self.serve):
            return None
        if self._fences is None:
            self._fences = Fence(self.api, workers=self.workers, linger=self.linger, confirms=self.view.confirms)
        return self._fences

    def lower_fences(self, everything: bool = False) -> list[str]:
        """Lower the loop's lingering taints that are due (all of them with `everything`); the problems met."""
        fence = self._fences
        if fence is None:
            return []
        fence.lower() if everything else fence.lower_due()
        problems, fence.problems = list(fence.problems), []
        return problems

    def fence_due(self) -> float | None:
        """When (time.monotonic) the loop must lower a lingering taint next; None: none lingers."""
        return self._fences.next_due() if self._fences is not None else None

    def binder(self) -> Binder:
        if self._binder is None:
            # the loop (a view) writes events in the background; a one-shot pass has written them when it ends
            recorder = EventRecorder(self.api, self.holder, clock=self.clock, asynchronous=self.view is not None)
            self._binder = Binder(self.api, recorder, workers=self.workers, clock=self.clock,
                                  own_namespace=self.namespace)
        return self._binder

    def _served_name(self) -> str | None:
        """The scheduler name whose pods this pass plans: its own, or (read-only) the one a loop serves."""
        if self.serve:
            return self.serve
        return (self._held.served_by_loop() if self._held is not None else "") or None

    def _cluster(self) -> ClusterState:
        return self.view.state() if self.view is not None else read_cluster(self.api, self._served_name())

    # -- the pass ----------------------------------------------------------------------------

    def ready(self) -> bool:
        """A fast pass has work now: a served gang of the view is ready (the loop asks before it waits for a change,
        which a hold of the Lease may have consumed)."""
        return self.can_go_fast() and self._any_ready()

    def arriving(self, within: float = ARRIVING) -> bool:
        """A served gang is on its way: some of its pods exist, not yet all, and a served pod appeared within `within`
        seconds (the master creates a gang's pods back to back; one whose pods stopped coming is not on its way). The
        loop lets a full pass that only --interval asks for wait for it (`loop.fast_next`)."""
        if not self.can_go_fast():
            return False
        assert self.view is not None and self.serve
        if self.view.served_quiet() > within:
            return False
        return any(g.state is State.INCOMPLETE for g in master_groups(self.view.served(), self.serve))

    def gang_coming(self, within: float = ARRIVING) -> bool:
        """A served gang is ready, or on its way (`arriving`): the loop puts off work of its own that its binding
        would wait for (lowering lingering taints, `loop.run`)."""
        return self.ready() or self.arriving(within)

    def _any_ready(self) -> bool:
        """A served gang of the view is ready (all its pods exist, none bound): no snapshot built, no request."""
        assert self.view is not None and self.serve
        return any(g.state is State.READY for g in master_groups(self.view.served(), self.serve))

    def _fast_decide(self, report: PassReport | None = None) -> _Fast:
        """A fast pass's observation and decision: the master's ready gangs of the view, planned by `decide` (its fast
        form). It reads only the view (a node the view lacks is read to confirm it gone) and writes nothing, so it may
        run before the Lease is held (`run_pass`)."""
        assert self.view is not None and self.serve
        report = report if report is not None else PassReport()
        state = self.view.state()
        master = MasterPods(self.api, self.binder(), self.serve, self.view, self._still_ours, fence=self.fence,
                            fast=True, fences=self.loop_fence(), fence_batch=self.fence_batch)
        found = master.collect(master.observe(state))
        observed = Observed(self.namespace, (), MappingProxyType({}), state.snapshot, self.policy, self.clock(),
                            self.max_attempts, found.queue, found.running, frozenset(found.groups), found.groups,
                            fast=True)
        return _Fast(report, state, master, found, decide(observed))

    def _fast_pass(self, fast: _Fast) -> PassReport:
        """The master's ready gangs placed and bound at once (see the module docstring), as `_fast_decide` decided."""
        assert self.view is not None and self.serve
        report, state, master, found, decision = fast
        fences = master.fences
        if found.skipped:
            self.backlog = True  # a partly bound gang, a lost node: the next full pass repairs it
        plan = decision.plan
        if plan is None:
            return report
        report.plan = plan
        report.problems.extend(plan.warnings)
        if plan.waiting or plan.rejected or plan.victims or plan.preempting:
            self.backlog = True  # reasons, reservations, preemption: the next full pass's work
        placing = [group for group in decision.queue if group.id in plan.placements]
        if fences is not None and placing and not self.backlog and not fences.settled(
                [node for group in placing for _, node in plan.placements[group.id]]):
            # a miss: these gangs wait for the fence to settle on their nodes; the guess of the next gangs' nodes goes
            # up now, beside them, and settles in the same wait (not after, costing the next gang a wait of its own)
            self._warm(fences, placing, decision.running, state.snapshot, ahead_of=placing, force=True)
        before = set(report.placed)
        master.carry_out(split(decision.intents)[1], report)
        if master.skipped or report.repaired:
            self.backlog = True
        if fences is not None and not self.backlog:
            self._warm(fences, [group for group in decision.queue
                                if group.id in report.placed and group.id not in before], decision.running)
        return report

    def _warm(self, fences: Fence, bound: Sequence[PodGroup], running: Sequence[RunningGroup],
              snapshot: Snapshot | None = None, ahead_of: Sequence[PodGroup] = (), force: bool = False) -> None:
        """Raise the fence, without waiting, on the nodes the next WARM gangs like the last one bound would get:
        while the master's gangs keep coming (a burst), their nodes have settled by the time they are complete. Only
        a guess: a gang planned elsewhere is fenced and waits as without it. Lowered `linger` seconds after, unused.

        `ahead_of`: gangs about to be bound (not yet in `snapshot`), planned first so the guesses go elsewhere; with
        `force` a guess is made even while nodes raised ahead are still unused (they were not where gangs went)."""
        if not bound or self.view is None or (fences.ahead() > AHEAD_LEFT and not force):
            return  # (nodes raised ahead are left unused: no new guess, whose planning costs a pass's CPU)
        like = bound[-1]
        guesses = [replace(like, id=f"{like.id}/next-{n}", sequence=like.sequence + n,
                           pods=tuple(replace(pod, name=f"{pod.name}/next-{n}") for pod in like.pods))
                   for n in range(1, WARM + 1)]
        plan = fast_plan(snapshot if snapshot is not None else self.view.state().snapshot, [*ahead_of, *guesses],
                         self.policy, running, self.clock(), guesses=True)
        nodes = sorted({node for guess in guesses for _, node in plan.placements.get(guess.id, ())})
        if nodes and not plan.victims and not plan.preempting:
            self._still_ours()
            fences.raise_ahead(nodes)  # (in the background; a signal meanwhile: the loop lowers what it raised)

    def _pass(self) -> PassReport:
        """observe -> decide -> act (live/): first what interrupted creations left (the queue and their pods read, a
        `Recover` decided and acted on), then the pass itself."""
        report = PassReport()
        everything = self._read_queue(report)
        # First of all, under the Lease: what an interrupted creation (a process killed mid-way) left is deleted.
        recovery = recover(everything, attempt_pods(self.api, self.namespace, everything, intents=True))
        if recovery:
            by_id = {e.id: e for e in everything}
            fx = self.effects()
            for step in recovery:
                act(fx, step, by_id, report)
            everything = [by_id[e.id] for e in everything]
        seen = self._observe_cluster(everything)
        master = seen.master
        found = master.collect(seen.master_seen) if master is not None and seen.master_seen is not None else None
        if master is not None and found is not None:
            # (a stale fence, a partly bound gang, a victim overdue) before planning, so that a plan that fails or is
            # stopped leaves them repaired; the plan does not depend on them (collect left those groups out)
            for repair in found.first:
                master.act_on(repair, report)
        decision = decide(Observed(
            self.namespace, tuple(everything), seen.pods, seen.state.snapshot, self.policy, self.clock(),
            self.max_attempts, found.queue if found else (), found.running if found else (),
            frozenset(found.groups) if found else frozenset(),
            MappingProxyType(dict(found.groups)) if found is not None and self.serve else None))
        plan = decision.plan
        assert plan is not None  # (a full pass always plans)
        report.plan = plan
        report.problems.extend(plan.warnings)
        report.intents = decision.intents
        entries = {e.id: e for e in everything if e.state in (QUEUED, RUNNING)}
        own, theirs = split(decision.intents)
        fx = self.effects()
        for intent in own:
            act(fx, intent, entries, report)
        if master is not None and self.serve:
            master.carry_out(theirs, report)
        self.backlog = bool(plan.waiting or plan.rejected or plan.victims or plan.preempting or report.requeued
                            or report.repaired or any(e.state == QUEUED for e in entries.values()))
        return report

    def _read_queue(self, report: PassReport) -> list[QueueEntry]:
        """Every entry of the namespace's queue (not listed again while a view says none changed since it was empty)."""
        store = self.store
        if self.view is not None and self.view.queue_changes == self._empty_queue_at:
            everything = []  # the queue was empty and no entry has changed since: no need to list it again
        else:
            seen = self.view.queue_changes if self.view is not None else -1
            everything = store.entries()
            self._empty_queue_at = seen if not everything and not store.skipped else -1
        report.problems.extend(store.skipped)
        return everything

    def _observe_cluster(self, everything: list[QueueEntry]) -> _Seen:
        """One reading of the cluster for `decide`: the snapshot, det-k8s's pods by group, the master's groups (a
        partly bound one read afresh, a lost node confirmed gone: master_pods.py). Nothing is written."""
        state = self._cluster()
        snapshot = state.snapshot  # holds only pods that hold resources (not finished ones)
        # (without queue entries and without det-k8s pods here there is nothing of det-k8s's own to read)
        needed = bool(everything) or any(p.namespace == self.namespace and L.is_managed(p.labels) for p in snapshot.pods)
        ours = [pod_from_object(obj) for obj in self.api.iter_list(
            PODS, self.namespace, label_selector=f"{L.MANAGED_BY}={L.MANAGER},{L.GROUP}")] if needed else []
        by_group: dict[str, list[Pod]] = {}
        for pod in ours:
            by_group.setdefault(pod.labels[L.GROUP], []).append(pod)
        master = None
        master_seen = None
        served = self._served_name()
        if served:  # the master's pods: served by this pass, or planned read-only while a loop serves them
            master = MasterPods(self.api, self.binder(), served, self.view, self._still_ours,
                                read_only=not self.serve, fence=self.fence, fence_batch=self.fence_batch,
                                fences=self.loop_fence() if self.serve else None,
                                preemption_grace=self.preemption_grace)
            master_seen = master.observe(state)
        self._quotas_listed = "ResourceQuota" in snapshot.listed
        return _Seen(state, MappingProxyType({k: tuple(v) for k, v in by_group.items()}), master, master_seen)

    def native_version(self) -> str | None:
        """The PodGroup API version the cluster serves (discovered once per pass), or None."""
        if self._pod_group_api is None:
            self._pod_group_api = (served_version(self.api),)
        return self._pod_group_api[0]

    def placement_of(self, entry: QueueEntry) -> tuple[str, str | None]:
        """(the entry's placement mode, the PodGroup API version to use, None: det-k8s pins the pods)."""
        mode = entry.placement_mode or self.policy.placement
        if mode == "det-k8s":
            return mode, None
        return mode, self.native_version()

    def effects(self) -> PassEffects:
        """What this pass's actors may do (live/effects.py): its writes go through the Lease (`_still_ours`)."""
        return PassEffects(self.api, self.namespace, self.view, self.workers, self.max_attempts, self.clock,
                           self._still_ours, self.placement_of, self._quotas_listed)


@dataclass(frozen=True)
class DryCluster:
    """The cluster as the next pass will see it: the snapshot and, while a `scheduler run` loop serves them (it
    says so in the Lease), the master's groups it will plan with the queue's (ready ones queued, bound ones
    running)."""

    snapshot: Snapshot
    master_queue: tuple[PodGroup, ...] = ()
    master_running: tuple[RunningGroup, ...] = ()


def dry_cluster(api: KubeApi) -> DryCluster:
    """Read the cluster for a plan that writes nothing (list, describe, --dry-run, the map's reservation)."""
    served = served_now(api)
    if not served:
        return DryCluster(read_snapshot(api))
    state = read_cluster(api, served)
    queue, running = planned_forms(master_groups(state.served, served))
    return DryCluster(state.snapshot, tuple(queue), tuple(running))


def dry_plan(snapshot: Snapshot | DryCluster, entries: Sequence[QueueEntry], policy: Policy,
             extra: Sequence[PodGroup] = (), *, now: datetime.datetime, namespace: str) -> Plan:
    """The plan a pass in `namespace` would make at `now`, without writing anything (list, describe, --dry-run);
    with a `DryCluster`, the master's groups a serving loop plans are in it, as in that loop's pass."""
    cluster = snapshot if isinstance(snapshot, DryCluster) else DryCluster(snapshot)
    queue = [group_from_dict(e.group) for e in entries if e.state == QUEUED] + list(extra)
    # Pods of a queued group (not yet stopping) are what an interrupted creation left: the next pass deletes them
    # before it plans (`_leftovers`, intent records), so they never hold the group's own place (never "held by"
    # itself). Pods already stopping still hold their resources until they are gone.
    queued = {e.id for e in entries if e.state == QUEUED}
    planned = cluster.snapshot

    def leftover(pod: Pod) -> bool:
        return (pod.namespace == namespace and not pod.deleting and L.is_managed(pod.labels)
                and pod.labels.get(L.GROUP) in queued)

    if queued and any(leftover(p) for p in planned.pods):
        planned = replace(planned, pods=tuple(p for p in planned.pods if not leftover(p)))
    return pass_plan(planned, queue, policy, namespace, master_queue=cluster.master_queue,
                     master_running=cluster.master_running, now=now)[1]
