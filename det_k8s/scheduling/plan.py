"""One scheduling pass: `schedule(snapshot, queue, policy)` -> `Plan`. Pure: no I/O, inputs untouched.

Groups are decided one at a time in policy order (`order.FairOrder`). Each is

1. rejected if it can never fit the eligible nodes' allocatable (unless autoscaling adds nodes);
2. placed if all of its pods fit the free capacity at once (best fit, `fit.Fitter`), or into a
   reservation's slack, or once the groups this pass placed since the last waiting group are
   packed again around it (`repack.Repacker`: they move, never leave);
3. with preemption, placed on the capacity whole lower-priority groups would free (`preempt`);
4. otherwise it waits. The first waiting group that would fit once running det-k8s groups
   finish, and has waited `policy.reserve_after` seconds, *reserves* the nodes that will free
   up soonest (`reserve.Reservations`); later groups of the pass backfill elsewhere or into the
   reservation's slack only, so small groups cannot starve a large one (backfill only where it
   cannot delay the head). The time is an argument (`now`), so the pass stays deterministic.

Capacity freed by this pass's victims is not free yet (their pods still run): only later
preemptors may plan on it, since their pods are created once the victims are gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from ..cluster.model import Snapshot
from .capacity import Capacity
from .fit import Fitter, Nodes, Shape, Taken, assign, shapes_of
from .labels import running_groups
from .model import Placement, Plan, PodGroup, Policy, Reason, ReasonCode, RunningGroup
from .order import FairOrder
from .preempt import Evictions
from .reasons import rejection, waiting
from .repack import BUDGET_PER_POD, Repacker
from .reserve import Reservations, waited


def schedule(snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy,
             running: Sequence[RunningGroup] | None = None, *, now: datetime | None = None) -> Plan:
    """Decide every queued group: placed (with its pods' nodes), waiting (why) or rejected (why).

    `running` defaults to the det-k8s groups read from the snapshot's pod labels. `now` is the
    time of the pass: a group has waited `now - submitted_at`. Without it no group has waited
    long enough to reserve nodes (unless `policy.reserve_after` is 0). Same input, same plan.
    """
    ids = [group.id for group in queue]
    if len(set(ids)) != len(ids):
        raise ValueError("queued group ids must be unique")
    return _Pass(snapshot, queue, policy, running_groups(snapshot.pods) if running is None else running, now).run()


class _Pass:
    def __init__(self, snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy,
                 running: Sequence[RunningGroup], now: datetime | None = None) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.now = now
        self.running = tuple(sorted(running, key=lambda g: g.id))
        self.nodes = Nodes(snapshot.nodes)
        self.capacity = Capacity(snapshot.nodes, snapshot.used)
        self.fitter = Fitter(self.nodes, self.capacity)
        totals: dict[str, int] = {}
        for node in snapshot.nodes:
            if node.ready and not node.unschedulable:
                for name, amount in node.allocatable.items():
                    totals[name] = totals.get(name, 0) + amount
        self.order = FairOrder(queue, ((g.user, g.total_request) for g in self.running), totals, policy)
        self.placements: dict[str, Placement] = {}
        self.waiting: dict[str, Reason] = {}
        self.rejected: dict[str, Reason] = {}
        self.preempting: dict[str, tuple[str, ...]] = {}
        self.evictions = Evictions(self.fitter, self.running)
        self.decided: list[str] = []
        self.queued: list[PodGroup] = []  # waiting groups, in order: "who is ahead of me"
        self.reservation = Reservations(snapshot, self.running, self.fitter)
        self.blocker: PodGroup | None = None  # without backfill, the first waiting group stops the rest
        self.by_id = {group.id: group for group in queue}
        pods = sum(len(group.pods) for group in queue)
        self.repacker = Repacker(self.fitter, BUDGET_PER_POD * (pods + len(snapshot.nodes)))

    def run(self) -> Plan:
        for group in self.order:
            self.decided.append(group.id)
            self.decide(group)
        held = self.reservation.group
        reservations = {held.id: self.reservation.nodes} if held else {}
        return Plan(self.placements, self.waiting, self.rejected, tuple(self.evictions.victims),
                    self.preempting, tuple(self.decided), reservations)

    def decide(self, group: PodGroup) -> None:
        shapes = shapes_of(group)
        if not shapes:
            self.rejected[group.id] = Reason(ReasonCode.INVALID, detail="the group has no pods")
            return
        never = self.never_fits(group, shapes)
        if never is not None:
            if self.policy.autoscaling and never.code is ReasonCode.EXCEEDS_CLUSTER:
                self.wait(group, replace(never, code=ReasonCode.WAITING_FOR_NODES))
            else:
                self.rejected[group.id] = never
            return
        if self.blocker is not None:
            self.wait(group, self.reason(group, shapes, ReasonCode.STRICT_ORDER,
                                         detail=self.blocker.experiment))
            return
        taken = self.fitter.try_place(shapes)
        if taken is not None:
            self.fitter.commit(taken)
            self.place(group, taken)
            self.repacker.placed(group, shapes, taken)
            return
        if self.policy.backfill:
            taken = self.reservation.backfill(shapes)
            if taken is not None:
                self.reservation.use(taken)
                self.fitter.commit(taken)
                self.place(group, taken)
                return
        moved = self.repacker.attempt(group, shapes)
        if moved is not None:
            for other, other_taken in moved.items():
                if other != group.id:
                    self.placements[other] = assign(self.by_id[other], other_taken)
            self.place(group, moved[group.id])
            self.repacker.placed(group, shapes, moved[group.id])
            return
        if self.policy.preemption and self.try_preempt(group, shapes):
            return
        if self.policy.reservations and self.reservation.group is None and self.starving(group):
            nodes = self.reservation.choose(shapes)
            if nodes:
                self.wait(group, self.reason(group, shapes, ReasonCode.RESERVING, reserved_nodes=nodes))
                self.reservation.hold(group, shapes, nodes)
                self.blocker = None if self.policy.backfill else group
                return
        code = ReasonCode.BEHIND_RESERVATION if self.reservation.behind(shapes) else ReasonCode.INSUFFICIENT
        self.wait(group, self.reason(group, shapes, code))
        if not self.policy.backfill:
            self.blocker = group

    def starving(self, group: PodGroup) -> bool:
        """Has the group waited long enough for the starvation guard to hold nodes for it?"""
        if self.policy.reserve_after <= 0:
            return True
        age = waited(group, self.now)
        return age is not None and age >= self.policy.reserve_after

    def never_fits(self, group: PodGroup, shapes: Sequence[Shape]) -> Reason | None:
        for shape in shapes:
            eligibility = self.nodes.eligible(shape.klass, shape.constraints)
            limits = self.nodes.limits(shape.klass, eligibility, shape.demand, shape.key)
            if not eligibility.nodes:
                return rejection(group, shape, limits, self.fitter, ReasonCode.NO_ELIGIBLE_NODES)
            if limits.max_pods < shape.pods:
                return rejection(group, shape, limits, self.fitter, ReasonCode.EXCEEDS_CLUSTER)
        return None

    def place(self, group: PodGroup, taken: Taken) -> None:
        self.placements[group.id] = assign(group, taken)
        self.order.charge(group.user, group.total_request)

    def wait(self, group: PodGroup, reason: Reason) -> None:
        self.waiting[group.id] = reason
        self.queued.append(group)
        self.repacker.settle()

    def reason(self, group: PodGroup, shapes: Sequence[Shape], code: ReasonCode, *,
               reserved_nodes: tuple[str, ...] = (), detail: str = "") -> Reason:
        holder, held = self.reservation.group, self.reservation.nodes
        if code is ReasonCode.RESERVING:
            holder, held = group, reserved_nodes
        elif code is not ReasonCode.BEHIND_RESERVATION:
            holder, held = None, ()
        preemptible = None
        if self.policy.preemption:
            preemptible = self.evictions.evictable(group.priority)
        return waiting(group, shapes, self.fitter, code, ahead=self.queued, reserved_for=holder,
                       reserved_nodes=held, preemptible=preemptible, detail=detail)

    def try_preempt(self, group: PodGroup, shapes: Sequence[Shape]) -> bool:
        found = self.evictions.attempt(shapes, group.priority)
        if found is None:
            return False
        for victim in found.victims:  # back in the queue, they no longer count against their user
            self.order.charge(victim.user, victim.total_request, -1)
        self.preempting[group.id] = self.evictions.commit(found, group.priority)
        self.place(group, found.taken)
        return True
