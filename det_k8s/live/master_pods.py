"""The master's pods in a live pass: observed here, decided in `master_actions.py` (pure), acted on here.

`LiveScheduler` calls `observe` before planning (it reads the master's groups, confirming partly bound ones and
lost nodes by reading them afresh, and the binding taints a det-k8s that stopped left; nothing is written), then
`collect` decides on that (`master_actions.collect`: the repairs, the ready groups for its queue, the bound ones
for its running groups), `decide.decide` plans them with det-k8s's own (the one `schedule()` of the pass) and
decides the master's intents, and `carry_out` acts on them, repairs first, each by the method its kind names in
`_ACTORS`. The loop's fast pass goes the same way (`fast`), leaving to a full pass what cannot change its outcome.

A pass that does not serve the master's pods itself (`experiment create`) still plans them, read-only,
while a `scheduler run` loop says in the Lease that it serves them: its own groups then keep the one
priority order and never take capacity a higher-priority trial of the master is about to get.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import stopping
from ..errors import DetK8sError, NotFound
from ..kube.api import KubeApi
from ..kube.kinds import NODES, PODS
from ..scheduling.master import (
    ALLOCATION,
    GANG_NAME,
    MasterGroup,
    State,
    master_groups,
    master_pod,
)
from . import binder as B
from .fence import BATCH as FENCE_BATCH
from .fence import Fence, batches
from .master_actions import (
    Bind,
    Collected,
    MarkPreempted,
    MasterIntent,
    MasterObserved,
    MasterRepair,
    Repair,
    ReportWaiting,
    Seen,
    StopOverdue,
    SweepFences,
    collect,
    reason_text,
)

if TYPE_CHECKING:
    from ..kube.watch import ClusterState, ClusterView
    from .scheduler import PassReport

__all__ = ["MasterPods", "reason_text"]


@dataclass
class MasterPods:
    """One pass's view of the master's pods (create one per pass)."""

    api: KubeApi
    binder: B.Binder
    scheduler_name: str
    view: ClusterView | None = None
    still_ours: Callable[[], None] = lambda: None
    read_only: bool = False  # a pass of `experiment create` while a loop serves them: planned, never touched
    fence: bool = True  # taint the planned nodes against kube-scheduler while binding (live/fence.py)
    fast: bool = False  # the loop's fast pass: ready groups bound, nothing else written (scheduler.py)
    fences: Fence | None = None  # with fence: the loop's own, whose taints may linger after a binding (live/fence.py)
    fence_batch: int = FENCE_BATCH  # nodes fenced at once (fence.batches)
    planned_at: str = ""  # the pods revision of the view `observe` was given (the plan's): fence.still_fits
    preemption_grace: float | None = None  # seconds a marked victim may take to stop before its pods are deleted
    skipped: list[str] = field(default_factory=list)  # fast: groups acting left for a full pass (nodes taken)

    def observe(self, state: ClusterState) -> MasterObserved:
        """What the pass reads of the master's groups (nothing written): the groups (`seen`), the binding taints a
        det-k8s that stopped left on nodes, the time a marked victim's grace is counted to."""
        stale = Fence(self.api).stale(state.snapshot.nodes) if not self.read_only and self.fence and not self.fast \
            else []
        self.planned_at = state.pods_version if self.view is not None else ""
        overdue_at = self.binder.clock() if self.binder is not None and self.preemption_grace is not None else None
        return MasterObserved(tuple(self.seen(state)), tuple(stale), overdue_at)

    def collect(self, observed: MasterObserved) -> Collected:
        """Decide (`master_actions.collect`, pure) on what was observed, as this pass may: the repairs, the ready
        groups for the queue, the bound ones as running groups."""
        return collect(observed.seen, read_only=self.read_only, fast=self.fast, now=observed.now,
                       grace=self.preemption_grace, stale_fences=observed.stale_fences)

    def seen(self, state: ClusterState) -> list[Seen]:
        """The master's groups, a partly bound one confirmed by reading its pods afresh and the nodes of bound pods
        that are missing from the view confirmed gone (never a deletion on a view that lags)."""
        known = state.snapshot.nodes_by_name
        seen = []
        for group in master_groups(state.served, self.scheduler_name):
            lost = self._lost_nodes(group, known) if not self.read_only and group.state is not State.LEAVING else []
            if group.state is State.PARTIAL and not lost and not self.read_only and not self.fast:
                group = self._confirm(group)
            seen.append(Seen(group, tuple(lost)))
        return seen

    def _confirm(self, group: MasterGroup) -> MasterGroup:
        """Read the group's pods afresh before tearing it down: a view that lags must not cause a deletion.

        A gang's pods are listed by its labels, finished ones included (the pass's view holds only running and
        pending pods), so a pod that ended is told from one that is missing: a trial whose first pod finished is
        ending, not partly bound."""
        fresh: list[Any] = []
        if group.size > 1 and group.name:
            selector = f"{GANG_NAME}={group.name}" + (f",{ALLOCATION}={group.allocation}" if group.allocation else "")
            try:
                fresh = self.api.list(PODS, group.namespace, label_selector=selector)
            except DetK8sError:
                fresh = []
        if not fresh:
            for pod in group.pods:
                try:
                    fresh.append(master_pod(self.api.get(PODS, pod.name, pod.namespace)))
                except DetK8sError:
                    continue  # gone (or unreadable): without it the group is not what the view showed
        found = [g for g in master_groups(fresh, self.scheduler_name) if g.id == group.id]
        return found[0] if found else replace(group, pods=())

    def _lost_nodes(self, group: MasterGroup, known: Container[str]) -> list[str]:
        """The nodes the group's bound pods are on that do not exist, confirmed by reading each: the API server
        accepts a binding to any node name, so a node removed between plan and binding leaves its pod bound to
        nothing (the pod GC deletes it only after its quarantine), and a lagging view must not cause a deletion."""
        lost = []
        for node in sorted(name for name in group.bound_nodes if name not in known):
            try:
                self.api.get(NODES, node)
            except NotFound:
                lost.append(node)
            except DetK8sError:
                continue  # unreadable: not proof that it is gone
        return lost

    def sweep_fences(self, intent: SweepFences, report: PassReport) -> None:
        """Act on a `SweepFences`: the stale binding taints removed."""
        Fence(self.api).remove_stale(intent.nodes)
        for name in intent.nodes:
            report.problems.append(f"removed a binding taint left on node {name} by a det-k8s that stopped")

    def repair(self, intent: Repair, report: PassReport) -> None:
        """Act on a `Repair`: the group's bound pods deleted (binder.repair) so that Determined restarts it whole."""
        group = intent.group
        result = self.binder.repair(group, self.still_ours, lost=intent.lost) if intent.lost else \
            self.binder.repair(group, self.still_ours)
        self._assume_deleted(group, result.removed)
        report.repaired[group.id] = (
            f"bound to a node that no longer exists; deleted {_pods(len(result.removed))} so Determined restarts it "
            "whole" if intent.lost else
            f"found partly bound ({len(group.bound)} of {len(group.pods)} pods); deleted "
            f"{_pods(len(result.removed))} so Determined restarts it whole")
        if result.leftovers:
            report.problems.append(f"{group.id}: could not delete {', '.join(result.leftovers)}")

    def stop_overdue(self, intent: StopOverdue, report: PassReport) -> None:
        """Act on a `StopOverdue`: the victim's pods deleted (binder.stop_overdue), said on its pods."""
        self.still_ours()
        minutes = intent.waited / 60
        leftovers = self.binder.stop_overdue(intent.group, f"did not stop within {minutes:.0f} min of being preempted "
                                             "(scheduler run --preemption-grace)")
        self._assume_deleted(intent.group, tuple(p.name for p in intent.group.pods if p.name not in leftovers))
        report.repaired[intent.group.id] = (f"preempted {minutes:.0f} min ago and still there; deleted its pods so "
                                            "Determined restarts it from its latest checkpoint")
        if leftovers:
            report.problems.append(f"{intent.group.id}: could not delete {', '.join(leftovers)}")

    def carry_out(self, decided: Sequence[MasterIntent | MasterRepair], report: PassReport) -> None:
        """Act on the master's intents in order, then report what the binder and its events could not do."""
        for intent in decided:
            self.act_on(intent, report)
        self.flush(report)

    def act_on(self, intent: MasterIntent | MasterRepair, report: PassReport) -> None:
        """Act on one of the master's intents, by the method its kind names in `_ACTORS`."""
        _ACTORS[type(intent)](self, intent, report)

    def flush(self, report: PassReport) -> None:
        """What the binder and its events could not do, into the report."""
        for problems in (self.binder.problems, self.binder.recorder.problems):
            report.problems.extend(problems)
            problems.clear()

    def mark(self, intent: MarkPreempted, report: PassReport) -> None:
        """Act on a `MarkPreempted`: the victim told to stop (binder.preempt)."""
        failed = self.binder.preempt(intent.group, intent.by, intent.priority, self.still_ours)
        report.marked[intent.group.id] = intent.by
        if failed:
            report.problems.append(f"{intent.group.id}: could not mark {', '.join(failed)} for preemption")

    def bind(self, intent: Bind, report: PassReport) -> None:
        """Act on a `Bind`: the placed groups bound inside one fence (`_fenced_bind`)."""
        self._fenced_bind([(group, placement) for group, placement in intent.groups], report)

    def report_waiting(self, intent: ReportWaiting, report: PassReport) -> None:
        """Act on a `ReportWaiting`: in the report, and with its event on the group's pods."""
        report.waiting[intent.group.id] = intent.text
        if intent.event:
            self.binder.report_waiting(intent.group, intent.event, intent.text, warning=intent.warning,
                                       before=self.still_ours)

    def _fenced_bind(self, to_bind: list[tuple[MasterGroup, Sequence[tuple[str, str]]]], report: PassReport
                     ) -> list[tuple[MasterGroup, Sequence[tuple[str, str]]]]:
        """Bind inside a fence, at most `fence_batch` nodes at a time (`fence.batches`); returns what was bound.
        A signal stops it between or inside batches: the batch in flight is lowered, later ones are not started."""
        done: list[tuple[MasterGroup, Sequence[tuple[str, str]]]] = []
        runs = batches(to_bind, self.fence_batch) if self.fence else [to_bind]
        for n, batch in enumerate(runs):
            # (the loop's fence lingers after a batch: only after the last, or every batch's nodes would stay up)
            done += self._fenced_batch(batch, report, linger=n == len(runs) - 1)
        return done

    def _fenced_batch(self, to_bind: list[tuple[MasterGroup, Sequence[tuple[str, str]]]], report: PassReport,
                      linger: bool = True) -> list[tuple[MasterGroup, Sequence[tuple[str, str]]]]:
        """Bind inside a fence (live/fence.py): the planned nodes tainted against kube-scheduler for the moment,
        read afresh, and a group whose nodes were taken meanwhile left waiting, none of it bound."""
        fence = (self.fences or Fence(self.api, workers=self.binder.workers)) if self.fence else None
        taken: list[MasterGroup] = []
        try:  # raised inside: a signal while it goes up still lowers what it raised (det_k8s/stopping.py)
            if fence is not None:
                self.still_ours()
                fence.raise_on([node for _, placement in to_bind for _, node in placement])  # inside: lowered below
                dropped = fence.still_fits([(group.id, placement, {p.name: dict(p.pod.requests) for p in group.pending})
                                            for group, placement in to_bind], self.planned_at)
                taken = [group for group, _ in to_bind if group.id in dropped]
                to_bind = [(group, placement) for group, placement in to_bind if group.id not in dropped]
            results = self.binder.bind_all(to_bind, self.still_ours) if to_bind else {}
        finally:
            if fence is not None:
                with stopping.shielded():  # never torn by a signal: the nodes must not stay fenced
                    fence.finish() if linger else fence.lower()
                report.problems.extend(fence.problems)
                fence.problems.clear()
        for group, planned in to_bind:
            self._bound(group, planned, results[group.id], report)
        for group in taken:  # said after the bindings, never ahead of one
            if self.fast:
                self.skipped.append(group.id)  # placed again by the next full pass, which says why it waits
                continue
            text = (f"det-k8s: gang {group.name} waits: its planned node(s) were taken meanwhile (a pod another "
                    "scheduler placed); it is placed again on the next pass")
            report.waiting[group.id] = text
            self.binder.report_waiting(group, B.WAITING, text, before=self.still_ours)
        return to_bind

    def _bound(self, group: MasterGroup, placement: Sequence[tuple[str, str]], result: B.BindResult,
               report: PassReport) -> None:
        if self.view is not None:
            nodes = dict(placement)
            for name in result.bound:
                self.view.assume_bound(group.namespace, name, nodes[name])
        if not result.failure:
            report.placed[group.id] = tuple(placement)
            return
        self._assume_deleted(group, result.removed)
        bound = [name for name in result.removed if name in result.bound]
        unsure = len(result.removed) - len(bound)  # its binding timed out: it may have landed
        report.repaired[group.id] = (f"binding failed part-way ({result.failure}); deleted {_pods(len(bound))}"
                                     + (f" and {unsure} whose binding may have landed" if unsure else "")
                                     + " so Determined restarts it whole")
        if result.leftovers:
            report.problems.append(f"{group.id}: could not delete {', '.join(result.leftovers)}")

    def _assume_deleted(self, group: MasterGroup, removed: Sequence[str]) -> None:
        if self.view is not None:
            for pod in group.pods:
                if pod.name in removed:
                    self.view.assume_deleting(pod.namespace, pod.name)


def _pods(count: int) -> str:
    """`1 bound pod`, `2 bound pods`."""
    return f"{count} bound pod{'' if count == 1 else 's'}"


K = TypeVar("K")
_Actor = Callable[[MasterPods, K, "PassReport"], None]


def _kind(kind: type[K], actor: _Actor[K]) -> tuple[type, _Actor[MasterIntent | MasterRepair]]:
    """A row of `_ACTORS`: the method is checked against its kind here, the table holds it by kind."""
    return kind, cast("_Actor[MasterIntent | MasterRepair]", actor)


_ACTORS: Mapping[type, _Actor[MasterIntent | MasterRepair]] = dict([
    _kind(SweepFences, MasterPods.sweep_fences),
    _kind(Repair, MasterPods.repair),
    _kind(StopOverdue, MasterPods.stop_overdue),
    _kind(MarkPreempted, MasterPods.mark),
    _kind(Bind, MasterPods.bind),
    _kind(ReportWaiting, MasterPods.report_waiting),
])
