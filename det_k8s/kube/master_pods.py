"""The master's pods in a live pass: the source adapter's groups in, the binder's actions out.

`LiveScheduler` calls `collect` before planning (the ready groups join its queue, the bound ones its
running groups) and `act` after (bind, mark victims, say why the rest wait). Between the two is the
one `schedule()` of the pass, over det-k8s's own queue and these groups together.

A pass that does not serve the master's pods itself (`experiment create`) still plans them, read-only,
while a `scheduler run` loop says in the Lease that it serves them: its own groups then keep the one
priority order and never take capacity a higher-priority trial of the master is about to get.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .. import stopping
from ..errors import DetK8sError, NotFound
from ..scheduling.explain import describe, reclaiming
from ..scheduling.master import (
    ALLOCATION,
    GANG_NAME,
    MasterGroup,
    State,
    as_pod_group,
    as_running_group,
    master_groups,
    master_pod,
)
from ..scheduling.model import Plan, PodGroup, Reason, ReasonCode, RunningGroup
from . import binder as B
from .api import KubeApi
from .fence import Fence
from .kinds import NODES, PODS

if TYPE_CHECKING:
    from .scheduler import PassReport
    from .watch import ClusterState, ClusterView

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


@dataclass
class MasterPods:
    """One pass's view of the master's pods (create one per pass)."""

    api: KubeApi
    binder: B.Binder
    scheduler_name: str
    view: ClusterView | None = None
    still_ours: Callable[[], None] = lambda: None
    read_only: bool = False  # a pass of `experiment create` while a loop serves them: planned, never touched
    fence: bool = True  # taint the planned nodes against kube-scheduler while binding (kube/fence.py)
    quick: bool = False  # the loop's fast pass: ready groups bound, nothing else written (scheduler.py)
    fences: Fence | None = None  # with fence: the loop's own, whose taints may linger after a binding (kube/fence.py)
    groups: dict[str, MasterGroup] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # quick: groups left for a full pass (partly bound, lost node)

    def collect(self, state: ClusterState, report: PassReport) -> tuple[list[PodGroup], list[RunningGroup]]:
        """The ready groups for the queue, the bound ones as running groups; partly bound ones are torn down."""
        queue: list[PodGroup] = []
        running: list[RunningGroup] = []
        known = {node.name for node in state.snapshot.nodes}
        if not self.read_only and self.fence and not self.quick:  # a fence a process that died left behind
            for name in Fence(self.api).sweep(state.snapshot.nodes):
                report.problems.append(f"removed a binding taint left on node {name} by a det-k8s that stopped")
        for group in master_groups(state.served, self.scheduler_name):
            self.groups[group.id] = group
            lost = self._lost_nodes(group, known) if not self.read_only and group.state is not State.LEAVING else []
            if self.quick and (lost or group.state is State.PARTIAL):
                self.skipped.append(group.id)  # repaired by the next full pass, never by a fast one
                continue
            if lost:
                self._orphaned(group, report, lost)  # bound to a node that is gone: it will never run whole
                continue
            if group.state is State.PARTIAL and self.read_only:
                continue  # the loop that serves them repairs it
            if group.state is State.PARTIAL:
                group = self._confirm(group)
                self.groups[group.id] = group
                if group.state is State.PARTIAL:
                    self._repair(group, report)
                    continue
            if group.state is State.READY:
                queue.append(as_pod_group(group))
            elif group.bound:
                found = as_running_group(group)
                running.append(replace(found, preemptible=False) if self.read_only else found)
                more = group.extra
                if more is not None:
                    self.groups[more.id] = more
                    queue.append(as_pod_group(more))
        return queue, running

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

    def _lost_nodes(self, group: MasterGroup, known: set[str]) -> list[str]:
        """The nodes the group's bound pods are on that do not exist, confirmed by reading each: the API server
        accepts a binding to any node name, so a node removed between plan and binding leaves its pod bound to
        nothing (the pod GC deletes it only after its quarantine), and a lagging view must not cause a deletion."""
        lost = []
        for node in sorted({p.pod.node_name for p in group.bound if p.pod.node_name} - known):
            try:
                self.api.get(NODES, node)
            except NotFound:
                lost.append(node)
            except DetK8sError:
                continue  # unreadable: not proof that it is gone
        return lost

    def _orphaned(self, group: MasterGroup, report: PassReport, lost: Sequence[str]) -> None:
        result = self.binder.repair(group, self.still_ours, lost=lost)
        self._assume_deleted(group, result.removed)
        report.repaired[group.id] = (f"bound to a node that no longer exists; deleted {_pods(len(result.removed))} "
                                     "so Determined restarts it whole")
        if result.leftovers:
            report.problems.append(f"{group.id}: could not delete {', '.join(result.leftovers)}")

    def _repair(self, group: MasterGroup, report: PassReport) -> None:
        result = self.binder.repair(group, self.still_ours)
        self._assume_deleted(group, result.removed)
        report.repaired[group.id] = (f"found partly bound ({len(group.bound)} of {len(group.pods)} pods); deleted "
                                     f"{_pods(len(result.removed))} so Determined restarts it whole")
        if result.leftovers:
            report.problems.append(f"{group.id}: could not delete {', '.join(result.leftovers)}")

    def act(self, plan: Plan, report: PassReport, priorities: Mapping[str, int]) -> None:
        """Carry out the plan for the master's groups; `priorities` are the queued groups' (for messages)."""
        preemptor_of = {victim: g for g, victims in plan.preempting.items() for victim in victims}
        for victim in () if self.quick else plan.victims:
            group = self.groups.get(victim)
            if group is None:
                continue
            by = preemptor_of.get(victim, "")
            failed = self.binder.preempt(group, by, priorities.get(by, group.priority + 1), self.still_ours)
            report.marked[victim] = by
            if failed:
                report.problems.append(f"{victim}: could not mark {', '.join(failed)} for preemption")
        to_bind: list[tuple[MasterGroup, Sequence[tuple[str, str]]]] = []
        for group_id, placement in plan.placements.items():
            group = self.groups.get(group_id)
            if group is None:
                continue
            waits_for = plan.preempting.get(group_id, ())
            if waits_for and self.quick:
                continue  # a full pass says why it waits
            if waits_for:
                what = f"gang {group.name}" if group.size > 1 else f"pod {group.name}"
                text = (f"det-k8s: {what} {reclaiming(plan.reclaims[group_id], waits_for)}; Determined checkpoints "
                        "them first" if plan.reclaims.get(group_id) else
                        f"det-k8s: gang {group.name} waits for preempted group(s) to stop: {', '.join(waits_for)}; "
                        "Determined checkpoints them first")
                report.waiting[group_id] = text
                self.binder.report_waiting(group, B.PREEMPTING, text, before=self.still_ours)
                continue
            to_bind.append((group, placement))
        if to_bind:
            to_bind = self._fenced_bind(to_bind, report)
        if self.quick:  # reasons and events of waiting groups: the full pass's (never ahead of a binding)
            for problems in (self.binder.problems, self.binder.recorder.problems):
                report.problems.extend(problems)
                problems.clear()
            return
        for group_id, reason in {**plan.waiting, **plan.rejected}.items():
            group = self.groups.get(group_id)
            if group is None:
                continue
            text = reason_text(group, reason)
            report.waiting[group_id] = text
            event = B.UNSCHEDULABLE_EVENT if reason.code.rejected else _EVENT_OF.get(reason.code, B.WAITING)
            self.binder.report_waiting(group, event, text, warning=reason.code.rejected or reason.code is ReasonCode.DRA,
                                       before=self.still_ours)
        for group in self.groups.values():
            if group.state is State.GATED:  # the pods' own status says SchedulingGated: left as it is
                gates = sorted({gate for p in group.pending for gate in p.gates})
                report.waiting[group.id] = (f"det-k8s: {'gang' if group.size > 1 else 'pod'} {group.name} waits for "
                                            f"its scheduling gates to be removed: {', '.join(gates)}")
                continue
            if group.state is State.INCOMPLETE and group.pending:
                text = (f"det-k8s: gang {group.name} waits for its pods: {len(group.pending)} of {group.size} exist; "
                        "it is placed once Determined has created them all")
                report.waiting[group.id] = text
                self.binder.report_waiting(group, B.INCOMPLETE, text, before=self.still_ours)
        for problems in (self.binder.problems, self.binder.recorder.problems):
            report.problems.extend(problems)
            problems.clear()

    def _fenced_bind(self, to_bind: list[tuple[MasterGroup, Sequence[tuple[str, str]]]], report: PassReport
                     ) -> list[tuple[MasterGroup, Sequence[tuple[str, str]]]]:
        """Bind inside a fence (kube/fence.py): the planned nodes tainted against kube-scheduler for the moment,
        read afresh, and a group whose nodes were taken meanwhile left waiting, none of it bound."""
        fence = (self.fences or Fence(self.api, workers=self.binder.workers)) if self.fence else None
        taken: list[MasterGroup] = []
        try:  # raised inside: a signal while it goes up still lowers what it raised (det_k8s/stopping.py)
            if fence is not None:
                self.still_ours()
                fence.raise_on([node for _, placement in to_bind for _, node in placement])  # inside: lowered below
                dropped = fence.still_fits([(group.id, placement, {p.name: dict(p.pod.requests) for p in group.pending})
                                            for group, placement in to_bind])
                taken = [group for group, _ in to_bind if group.id in dropped]
                to_bind = [(group, placement) for group, placement in to_bind if group.id not in dropped]
            results = self.binder.bind_all(to_bind, self.still_ours) if to_bind else {}
        finally:
            if fence is not None:
                with stopping.shielded():  # never torn by a signal: the nodes must not stay fenced
                    fence.finish()
                report.problems.extend(fence.problems)
                fence.problems.clear()
        for group, planned in to_bind:
            self._bound(group, planned, results[group.id], report)
        for group in taken:  # said after the bindings, never ahead of one
            if self.quick:
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
