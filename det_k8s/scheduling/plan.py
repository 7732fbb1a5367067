"""One scheduling pass: `schedule(snapshot, queue, policy)` -> `Plan`. Pure: no I/O, inputs untouched.

Groups are decided one at a time in policy order (`order.FairOrder`). Each is

1. rejected if it can never fit the eligible nodes with only DaemonSet and static pods on them
   (unless autoscaling adds nodes), or made to wait while a volume it mounts is not there;
2. placed if all of its pods fit the free capacity at once (best fit, kept within one topology
   domain when it fits there, every inter-pod rule checked pod by pod: `fit.Fitter`), or into a
   reservation's slack, or once the groups this pass placed since the last waiting group are
   packed again around it (`repack.Repacker`: they move, never leave);
3. with preemption, placed on the capacity whole lower-priority groups would free (`preempt`),
   counting first what groups already terminating give back;
4. otherwise it waits. The first waiting group that would fit once running det-k8s groups
   finish, and has waited `policy.reserve_after` seconds, *reserves* the nodes that will free
   up soonest (`reserve.Reservations`); later groups of the pass backfill elsewhere or into the
   reservation's slack only, so small groups cannot starve a large one (backfill only where it
   cannot delay the head). The time is an argument (`now`), so the pass stays deterministic.

Capacity freed by this pass's victims is not free yet (their pods still run): only later
preemptors may plan on it, since their pods are created once the victims are gone.

A group that would take a queue on its path over its limit waits, naming the queue (`queues.py`, with
`policy.queues`). A group one of whose pods a namespace's ResourceQuota would refuse waits, naming the quota
(`resourcequota.py`): the API server admits pods one at a time, so such a group would start in part.

Before deciding, each queued pod is taken as the API server will admit it (`admission.py`: the
ExtendedResourceToleration plugin's tolerations), its claims become node tests (`volumes.py`),
and what det-k8s cannot check becomes a warning in `plan.warnings`, naming the pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from ..cluster.admission import Admission, detect
from ..cluster.model import Pod, Snapshot
from ..labels import GROUP
from .capacity import Capacity
from .fit import Fitter, Nodes, Shape, Shaper, Taken, assign, placed_pods
from .interpod import Space
from .labels import is_managed, running_groups
from .model import DraHold, Lent, Placement, Plan, PodGroup, Policy, Reason, ReasonCode, RunningGroup
from .order import FairOrder
from .preempt import Evictions
from .queues import QueueBook, lent_back
from .reasons import Explainer
from .repack import BUDGET_PER_POD, Repacker
from .reserve import Reservations, waited
from .resourcequota import QuotaBook
from .volumes import Storage


def schedule(snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy,
             running: Sequence[RunningGroup] | None = None, *, now: datetime | None = None) -> Plan:
    """Decide every queued group: placed (with its pods' nodes), waiting (why) or rejected (why).

    `running` are the groups that may be evicted and count for fair share: pass
    `running_in(snapshot, namespace)` for a queue in `namespace` (`plan` and the live scheduler
    both do); it defaults to every det-k8s group in the snapshot. `now` is the time of the pass: a
    group has waited `now - submitted_at`. Without it no group has waited long enough to reserve
    nodes (unless `policy.reserve_after` is 0). Same input, same plan.
    """
    ids = [group.id for group in queue]
    if len(set(ids)) != len(ids):
        raise ValueError("queued group ids must be unique")
    return _Pass(snapshot, queue, policy, running_groups(snapshot.pods) if running is None else running, now).run()


def pass_running(snapshot: Snapshot, namespace: str, master: Sequence[RunningGroup] = ()) -> tuple[RunningGroup, ...]:
    """The running groups one pass of `namespace`'s queue plans with, which alone it may evict: that queue's det-k8s
    groups and the master's bound groups (of every namespace: the pass that serves them marks its victims). The full
    pass, the loop's fast pass and `plan --snapshot` all plan with these."""
    return (*running_in(snapshot, namespace), *master)


def pass_plan(snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy, namespace: str, *,
              master_queue: Sequence[PodGroup] = (), master_running: Sequence[RunningGroup] = (),
              now: datetime | None = None) -> tuple[tuple[PodGroup, ...], Plan]:
    """One pass's decision: det-k8s's queued groups of `namespace` and the master's ready ones, planned together over
    `pass_running` (what was planned, the plan). The live pass (`live/decide.py`), a plan that writes
    nothing (`live/scheduler.dry_plan`) and `plan --snapshot` decide with this one function."""
    planned = (*queue, *master_queue)
    return planned, schedule(snapshot, planned, policy, pass_running(snapshot, namespace, master_running), now=now)


def running_in(snapshot: Snapshot, namespace: str) -> tuple[RunningGroup, ...]:
    """The running det-k8s groups of one namespace's queue: the only groups its passes may evict."""
    return running_groups(pod for pod in snapshot.pods if pod.namespace == namespace)


def lasting_usage(pods: Iterable[Pod]) -> dict[str, dict[str, int]]:
    """Per node, what DaemonSet and static pods hold: capacity no scheduling decision frees."""
    held: dict[str, dict[str, int]] = {}
    for pod in pods:
        if not (pod.mirror or pod.owner_kind == "DaemonSet") or not pod.active:
            continue
        node = pod.node
        if node is not None:
            bucket = held.setdefault(node, {})
            for name, amount in pod.requests.items():
                bucket[name] = bucket.get(name, 0) + amount
            bucket["pods"] = bucket.get("pods", 0) + 1000
    return held


def holding(snapshot: Snapshot, running: Sequence[RunningGroup]) -> list[RunningGroup]:
    """Every group that counts against the queues: det-k8s's in every namespace, and the caller's (the master's)."""
    found = {g.id: g for g in running}
    if not found:
        others = running_groups(snapshot.pods)
    else:  # the caller's already: only the other namespaces' det-k8s groups are read from the pods
        others = running_groups(p for p in snapshot.pods if is_managed(p.labels) and p.labels[GROUP] not in found)
    for group in others:
        found.setdefault(group.id, group)
    return [found[key] for key in sorted(found)]


class _Pass:
    def __init__(self, snapshot: Snapshot, queue: Sequence[PodGroup], policy: Policy,
                 running: Sequence[RunningGroup], now: datetime | None = None) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.now = now
        self.running = tuple(sorted(running, key=lambda g: g.id))
        permanent = lasting_usage(snapshot.pods)
        lasting = {node.name: node.allocatable for node in snapshot.nodes}
        for node in snapshot.nodes:
            held = permanent.get(node.name)
            if held:
                lasting[node.name] = {name: amount - held.get(name, 0) for name, amount in node.allocatable.items()}
        self.nodes = Nodes(snapshot.nodes, lasting)
        self.capacity = Capacity(snapshot.nodes, snapshot.used)
        self.storage = Storage(snapshot)
        self.quotas = QuotaBook(snapshot.quotas)
        self.queues = QueueBook(policy.queues, holding(snapshot, self.running), snapshot.pods) if policy.queues else None
        self.admission: Admission = detect(snapshot, policy.extended_resource_toleration)
        self.space = Space(snapshot, queue)
        self.fitter = Fitter(self.nodes, self.capacity, self.space, policy.topology_key, policy.topology_required)
        self._queue = queue
        self._lasting_fitter: Fitter | None = None
        totals: dict[str, int] = {}
        for node in snapshot.nodes:
            if node.ready and not node.unschedulable:
                for name, amount in node.allocatable.items():
                    totals[name] = totals.get(name, 0) + amount
        if self.queues is not None and self.queues.kept_resources:
            free: dict[str, int] = {}
            for node in snapshot.nodes:
                if node.ready and not node.unschedulable:
                    used = snapshot.used.get(node.name, {})
                    for name in self.queues.kept_resources:
                        free[name] = free.get(name, 0) + max(node.allocatable.get(name, 0) - used.get(name, 0), 0)
            self.queues.free_from(free, {})
        self.order = FairOrder(queue, ((g.user, g.total_request) for g in self.running), totals, policy, self.queues)
        self.placements: dict[str, Placement] = {}
        self.waiting: dict[str, Reason] = {}
        self.rejected: dict[str, Reason] = {}
        self.preempting: dict[str, tuple[str, ...]] = {}
        self.reclaimed: list[str] = []
        self.reclaims: dict[str, tuple[Lent, ...]] = {}
        self._unreachable: dict[str, tuple[tuple[Lent, ...], tuple[str, ...]]] = {}
        self._running_ids = frozenset(g.id for g in self.running)
        unready = {node.name for node in snapshot.nodes if not node.ready}
        leaving = {pod.labels.get(GROUP) for pod in snapshot.pods if pod.deleting and is_managed(pod.labels)}
        returning = [g for g in running_groups(p for p in snapshot.pods if p.labels.get(GROUP) in leaving)
                     if g.terminating and not any(pod.node in unready for pod in g.pods)] if leaving else []
        known = {g.id for g in returning}  # and the caller's running groups already leaving (the master's trials)
        returning += [g for g in self.running if g.terminating and g.id not in known
                      and not any(pod.node in unready for pod in g.pods)]
        self.evictions = Evictions(self.fitter, self.running, returning)
        self._leaving_or_lower = (*returning, *(g for g in self.running if g.id not in known))
        self._pods_named: dict[str, list[Pod]] | None = None
        self.decided: list[str] = []
        self.queued: list[PodGroup] = []  # waiting groups, in order: "who is ahead of me"
        self.reservation = Reservations(snapshot, self.running, self.fitter)
        self.blocker: PodGroup | None = None  # without backfill, the first waiting group stops the rest
        self.by_id = {group.id: group for group in queue}
        pods = sum(len(group.pods) for group in queue)
        self.repacker = Repacker(self.fitter, BUDGET_PER_POD * (pods + len(snapshot.nodes)))
        self.explainer = Explainer(snapshot, self.fitter, self.reservation)
        self.warnings: dict[str, None] = {}
        self._shapes: dict[str, tuple[Shape, ...]] = {}
        self.shaper = Shaper(self.storage, self.admission, self.space)
        self._would_start: dict[tuple[object, ...], bool] = {}
        self._dra_nodes: dict[str, dict[str, int]] = {}

    def run(self) -> Plan:
        for group in self.order:
            self.decided.append(group.id)
            self.decide(group)
        held = self.reservation.group
        reservations = {held.id: self.reservation.nodes} if held else {}
        return Plan(self.placements, self.waiting, self.rejected, tuple(self.evictions.victims),
                    self.preempting, tuple(self.decided), reservations, tuple(self.warnings), tuple(self.reclaimed),
                    self.reclaims)

    def shapes(self, group: PodGroup) -> tuple[Shape, ...]:
        found = self._shapes.get(group.id)
        if found is None:
            found = self._shapes[group.id] = self.shaper.shapes(group)
            self.warn_about(group, found)
            for warning in self.quotas.warnings(group):
                self.warnings[warning] = None
        return found

    def warn_about(self, group: PodGroup, shapes: Sequence[Shape]) -> None:
        """Name what det-k8s cannot check for this group's pods: its placement may be refused for it."""
        for shape in shapes:
            pod = shape.members[0].name if shape.members else group.id
            more = f" (and {shape.pods - 1} more pods)" if shape.pods > 1 else ""
            where = f"{group.experiment}: pod {pod}{more}"
            for what in shape.constraints.unmodelled:
                self.warnings[f"{where}: {what} not modelled; kube-scheduler may refuse or delay the placement"] = None
            for what in shape.volumes.unknown:
                self.warnings[f"{where}: {what}, so where its volume can be used is not checked"] = None
            for what in shape.volumes.unchecked:
                self.warnings[f"{where}: {what} not modelled; kube-scheduler may refuse or delay the placement"] = None
            for term in shape.constraints.affinity + shape.constraints.anti_affinity:
                chooser = term.namespace_selector
                if chooser is not None and not chooser.empty and not self.snapshot.namespaces:
                    self.warnings[f"{where}: a pod (anti-)affinity term selects namespaces by label and the snapshot "
                                  "lists no Namespaces, so only the namespaces it names are matched"] = None

    def decide(self, group: PodGroup) -> None:
        shapes = self.shapes(group)
        if not shapes:
            self.rejected[group.id] = Reason(ReasonCode.INVALID, detail="the group has no pods")
            return
        claims = tuple(dict.fromkeys(name or "(unnamed)" for shape in shapes
                                     for name in shape.constraints.resource_claims))
        if claims:  # kube-scheduler alone allocates them: det-k8s never binds nor pins such pods
            self.wait(group, replace(self.reason(group, shapes, ReasonCode.DRA), dra=DraHold(claims=claims)))
            return
        # A pass of one group (the loop's fast path, a gang at a time) with nothing that could make it wait before its
        # placement is tried (no queue limits, no quota, no volume): "never fits" is asked only if it cannot be placed
        # now. A group placed now fits the lasting capacity of the nodes eligible for good, so the answer is the same,
        # for less (issue 24). Only with one group: a failed placement builds the capacity indexes, whose order breaks
        # ties for the groups after it, so in a longer queue asking first keeps every plan as it was.
        direct = (len(self._queue) == 1 and self.queues is None and not self.quotas.quotas and self.blocker is None
                  and not any(shape.volumes.waiting for shape in shapes))
        if not direct and self.refuse(group, self.never_fits(group, shapes), shapes):
            return
        limited = self.queues.hold(group) if self.queues is not None else None
        if limited is not None:
            self.wait(group, self.explainer.queue_limited(group, shapes, limited, self.queued))
            if not self.policy.backfill and self.blocker is None:
                self.blocker = group
            return
        hold = self.quotas.hold(group)
        if hold is not None:
            self.wait(group, replace(self.reason(group, shapes, ReasonCode.QUOTA), quota=hold))
            if not self.policy.backfill and self.blocker is None:
                self.blocker = group  # strict order: a group its quota holds back holds the queue like any other
            return
        volumes = next((shape.volumes.waiting for shape in shapes if shape.volumes.waiting), "")
        if volumes:
            self.wait(group, self.reason(group, shapes, ReasonCode.VOLUMES, detail=volumes))
            if not self.policy.backfill and self.blocker is None:
                self.blocker = group  # strict order: a group waiting for its volume holds the queue like any other
            return
        if self.blocker is not None:
            if not self.refuse(group, self.never_fits_lasting(group, shapes), shapes):
                self.wait(group, self.reason(group, shapes, ReasonCode.STRICT_ORDER, detail=self.blocker.experiment))
            return
        taken = self.fitter.try_place(shapes)
        if taken is not None:
            self.fitter.commit(taken)
            self.place(group, taken)
            return
        failure = self.fitter.failure
        if direct and self.refuse(group, self.never_fits(group, shapes), shapes):
            return
        if self.refuse(group, self.never_fits_lasting(group, shapes), shapes):  # only now: what fits now fits for good
            return
        if self.policy.backfill:
            taken = self.reservation.backfill(shapes)
            if taken is not None:
                self.reservation.use(taken)
                self.fitter.commit(taken)
                self.place(group, taken, movable=False)
                return
        moved = self.repacker.attempt(group, shapes)
        if moved is not None:
            for other, other_taken in moved.items():
                if other != group.id:
                    self.placements[other] = assign(self.by_id[other], other_taken)
            self.place(group, moved[group.id])
            return
        if self.policy.preemption and self.try_preempt(group, shapes):
            return
        if self.queues is not None and self.try_reclaim(group, shapes):
            return
        judged = any(shape.judged for shape in shapes)
        if (self.policy.reservations and self.reservation.group is None and not judged
                and self.starving(group)):
            nodes = self.reservation.choose(shapes)
            if nodes:
                self.wait(group, self.reason(group, shapes, ReasonCode.RESERVING, reserved_nodes=nodes))
                self.reservation.hold(group, shapes, nodes)
                self.blocker = None if self.policy.backfill else group
                return
        if self.reservation.behind(shapes):
            code = ReasonCode.BEHIND_RESERVATION
        elif self.fitter.topology_required and self.fits_across_domains(shapes):
            code = ReasonCode.TOPOLOGY
        else:
            code = ReasonCode.INSUFFICIENT
        reason = self.reason(group, shapes, code, failure=failure)
        dra = self.dra_hold(shapes)
        self.wait(group, reason if dra is None else replace(reason, dra=dra._replace(was=str(code))))
        if not self.policy.backfill:
            self.blocker = group

    def fits_across_domains(self, shapes: Sequence[Shape]) -> bool:
        self.fitter.topology_required, required = False, self.fitter.topology_required
        key, self.fitter.topology_key = self.fitter.topology_key, ""
        try:
            return self.fitter.fits(shapes)
        finally:
            self.fitter.topology_required, self.fitter.topology_key = required, key

    def starving(self, group: PodGroup) -> bool:
        """Has the group waited long enough for the starvation guard to hold nodes for it?"""
        if self.policy.reserve_after <= 0:
            return True
        age = waited(group, self.now)
        return age is not None and age >= self.policy.reserve_after

    @property
    def lasting_fitter(self) -> Fitter:
        """A fitter over the cluster with only DaemonSet and static pods on it: what can ever fit."""
        if self._lasting_fitter is None:
            pods = tuple(pod for pod in self.snapshot.pods if pod.permanent)
            lasting = Snapshot(self.snapshot.nodes, pods, namespaces=self.snapshot.namespaces)
            self._lasting_fitter = Fitter(self.nodes, Capacity(lasting.nodes, lasting.used), Space(lasting, self._queue),
                                          self.policy.topology_key, self.policy.topology_required)
        return self._lasting_fitter

    def dra_hold(self, shapes: Sequence[Shape]) -> DraHold | None:
        """A resource the group asks that DRA serves on some of its eligible nodes (their allocatable lacks it, a
        DeviceClass maps it, they hold devices of the class): det-k8s cannot use those nodes for it."""
        view = self.snapshot.devices
        if not view.classes or not view.devices:
            return None
        for shape in shapes:
            for resource, _ in shape.demand:
                dra = self._dra_nodes.get(resource)
                if dra is None:
                    dra = self._dra_nodes[resource] = view.dra_nodes(resource)
                if not dra:
                    continue
                eligible = self.nodes.eligible(shape.klass, shape.constraints, shape.volumes, lasting=True).nodes
                usable = [name for name in eligible if name in dra]
                if usable:
                    klass = view.serving(resource)
                    return DraHold(resource, klass.name if klass else "", len(usable), sum(dra[n] for n in usable))
        return None

    def refuse(self, group: PodGroup, never: Reason | None, shapes: Sequence[Shape] = ()) -> bool:
        """Reject a group that can never fit (with autoscaling: let it wait for nodes); False if it may fit."""
        if never is None:
            return False
        hold = self.dra_hold(shapes)
        if hold is not None:  # kube-scheduler could place it with a claim on DRA nodes: it waits, saying so
            self.wait(group, replace(never, code=ReasonCode.DRA, dra=hold._replace(was=str(never.code))))
            return True
        if self.policy.autoscaling and never.code in (ReasonCode.EXCEEDS_CLUSTER, ReasonCode.EXCEEDS_DOMAIN):
            self.wait(group, replace(never, code=ReasonCode.WAITING_FOR_NODES))
        else:
            self.rejected[group.id] = never
        return True

    def never_fits(self, group: PodGroup, shapes: Sequence[Shape]) -> Reason | None:
        """Per shape, against the lasting allocatable of its eligible nodes (counts alone: cheap)."""
        explain = self.explainer
        for shape in shapes:
            # Nodes that are only not ready now (one that just joined, or rebooting) count: they say "not now".
            eligibility = self.nodes.eligible(shape.klass, shape.constraints, shape.volumes, lasting=True)
            limits = self.nodes.limits(shape.klass, eligibility, shape.demand, shape.key)
            offers = any(self.nodes.by_name[name].allocatable.get(shape.key, 0) > 0 for name in eligibility.nodes)
            if not eligibility.nodes or not offers:  # none left, or none offers what it asks
                return explain.rejection(group, shape, limits, ReasonCode.NO_ELIGIBLE_NODES)
            if limits.max_pods < shape.pods:
                return explain.rejection(group, shape, limits, ReasonCode.EXCEEDS_CLUSTER)
        return None

    def never_fits_lasting(self, group: PodGroup, shapes: Sequence[Shape]) -> Reason | None:
        """The whole group placed on the cluster with only DaemonSet and static pods on it: pod rules, several
        shapes and the topology policy included. Counts cannot tell that; a placement can."""
        general = any(shape.general for shape in shapes)
        if not (general or len(shapes) > 1 or self.policy.topology_required):
            return None
        lasting = self.lasting_fitter
        if lasting.fits(shapes):
            return None
        if self.policy.topology_required and lasting.topology_applies(shapes):
            lasting.topology_required, lasting.topology_key = False, ""
            try:
                across = lasting.fits(shapes)
            finally:
                lasting.topology_required, lasting.topology_key = True, self.policy.topology_key
            if across:
                return self.explainer.domain_rejection(group, shapes, self.policy.topology_key, self.nodes)
        return self.explainer.pod_rules_rejection(group, shapes, lasting.failure)

    def place(self, group: PodGroup, taken: Taken, *, movable: bool = True, counting: bool = True) -> None:
        self.placements[group.id] = assign(group, taken)
        self.quotas.charge(group)
        if self.queues is not None:
            self.queues.charge(group)
            self.order.requeue(self.queues.leaf(group))
        self.order.charge(group.user, group.total_request)
        interacts = False
        if self.space.used or any(shape.judged for shape, _ in taken):
            for pod, node in placed_pods(group, taken):
                interacts = self.space.interacts(pod) or interacts
                self.space.add_pod(pod, node, counting=counting)
        if movable and not interacts:
            self.repacker.placed(group, [shape for shape, _ in taken], taken)

    def wait(self, group: PodGroup, reason: Reason) -> None:
        unreachable = self._unreachable.get(group.id)
        if unreachable is not None:
            reason = replace(reason, unreachable=unreachable[0], unreachable_in=unreachable[1])
        self.waiting[group.id] = reason
        self.queued.append(group)
        self.repacker.settle()

    def reason(self, group: PodGroup, shapes: Sequence[Shape], code: ReasonCode, *,
               reserved_nodes: tuple[str, ...] = (), detail: str = "", failure: object = None) -> Reason:
        holder, held = self.reservation.group, self.reservation.nodes
        if code is ReasonCode.RESERVING:
            holder, held = group, reserved_nodes
        elif code is not ReasonCode.BEHIND_RESERVATION:
            holder, held = None, ()
        preemptible = self.evictions.evictable(group.priority)
        would_start: bool | None = None
        outcome = ""
        if code in (ReasonCode.INSUFFICIENT, ReasonCode.TOPOLOGY, ReasonCode.RESERVING,
                    ReasonCode.BEHIND_RESERVATION):
            if self.policy.preemption and self.enabling(shapes, group.priority):
                outcome = "not-for-pod-rules"
            elif self.policy.preemption:
                outcome = "not-enough" if preemptible else "none-lower"
            elif preemptible and not self.enabling(shapes, group.priority):
                # capacity and candidates only shrink in a pass: a "no" stays a no, a "yes" holds while nothing changed
                memo = (shapes[0].klass, tuple((s.demand, s.pods) for s in shapes), group.priority)
                would_start = self._would_start.get(memo + (self.capacity.version,), self._would_start.get(memo))
                if would_start is None:
                    would_start = self.evictions.would_start(shapes, group.priority)
                    self._would_start[memo + (self.capacity.version,) if would_start else memo] = would_start
                outcome = "would-start" if would_start else ""
        return self.explainer.waiting(
            group, shapes, code, ahead=self.queued, reserved_for=holder, reserved_nodes=held,
            preemptible=preemptible, would_start=would_start, detail=detail, failure=failure,
            preemption=outcome, topology_key=self.policy.topology_key if self.fitter.topology_applies(shapes) else "")

    def enabling(self, shapes: Sequence[Shape], priority: int) -> bool:
        """Pod affinity or spread whose judgement victims' departure would change: a term or spread selector
        matching a pod of a group that could be evicted for it (lower priority) or is leaving anyway. Rules that
        select only the group's own pods, or pods that stay, are judged the same before and after."""
        members = [m for shape in shapes for m in shape.members]
        affinity = [term for m in members for term in m.constraints.affinity]
        spread = [(c, m.namespace or "default") for m in members for c in m.constraints.spread]
        if not affinity and not spread:
            return False
        if self._pods_named is None:
            self._pods_named = {}
            for pod in self.snapshot.pods:
                self._pods_named.setdefault(pod.name, []).append(pod)
        namespaces = self.snapshot.namespaces
        for running in self._leaving_or_lower:
            if running.priority >= priority and not running.terminating:
                continue
            for member in running.pods:
                for pod in self._pods_named.get(member.name, ()):
                    if any(term.matches(pod.labels, pod.namespace, namespaces) for term in affinity):
                        return True
                    if any(pod.namespace == ns and c.selector.matches(pod.labels) for c, ns in spread):
                        return True
        return False

    def try_reclaim(self, group: PodGroup, shapes: Sequence[Shape]) -> bool:
        """A queue below its guarantee takes back capacity others borrowed of it: whole groups of queues that use
        more than their guarantee of a resource it asks for and its queue guarantees, by the victim rule, whatever
        their priority."""
        queues = self.queues
        if queues is None or not queues.within_guarantee(group):
            return False
        leaf = queues.leaf(group)
        guaranteed = queues.tree.get(leaf).guarantee
        asked = [name for name, amount in group.total_request.items() if amount and name in guaranteed]
        pool = [g for g in self.running if queues.home.get(g.id, leaf) != leaf and queues.borrowing(g.id, asked)]
        found = None
        if pool:
            level = max(group.priority, *(g.priority + 1 for g in pool))
            if self.enabling(shapes, level):
                return False  # its rules would be judged without the victims: not modelled, it waits instead
            found = self.evictions.reclaim(shapes, pool, level)
        if found is None or not found.victims:
            self.out_of_reach(group, shapes, pool, asked)
            return False
        for victim in found.victims:
            self.order.charge(victim.user, victim.total_request, -1)
            queues.leaving(victim)
            self.order.requeue(queues.home.get(victim.id, ""))
            self.reclaimed.append(victim.id)
        self.reclaims[group.id] = lent_back(group.total_request, asked, found.victims, queues.home)
        self.preempting[group.id] = self.evictions.commit(found, level)
        self.place(group, found.taken, movable=False, counting=False)
        if any(pod.constraints.spread for pod in group.pods):
            self._shapes.clear()
        return True

    def out_of_reach(self, group: PodGroup, shapes: Sequence[Shape], pool: Sequence[RunningGroup],
                     asked: Sequence[str]) -> None:
        """Whether reclaim would have started the group had it been allowed to evict det-k8s groups of other
        namespaces that borrow (it is not: a pass deletes only its own namespace's det-k8s groups, whose queue
        entries it keeps, and the master's pods): noted for its waiting reason (`Reason.unreachable`)."""
        queues = self.queues
        assert queues is not None
        mine = self._running_ids
        leaf = queues.leaf(group)
        outside = [g for g in queues.running if g.id not in mine and queues.home.get(g.id, leaf) != leaf
                   and queues.borrowing(g.id, asked)]
        if not outside:
            return
        every = [*pool, *outside]
        level = max(group.priority, *(g.priority + 1 for g in every))
        self.evictions.know(outside)
        found = self.evictions.reclaim(shapes, every, level)
        if found is None or not any(victim.id not in mine for victim in found.victims):
            return
        away = [victim for victim in found.victims if victim.id not in mine]
        self._unreachable[group.id] = (lent_back(group.total_request, asked, away, queues.home),
                                       tuple(sorted({queues.namespace.get(v.id, "") for v in away})))

    def try_preempt(self, group: PodGroup, shapes: Sequence[Shape]) -> bool:
        if self.enabling(shapes, group.priority):
            return False  # its rules would be judged without the victims: not modelled, it waits instead
        found = self.evictions.attempt(shapes, group.priority)
        if found is None:
            return False
        for victim in found.victims:  # back in the queue, they no longer count against their user
            self.order.charge(victim.user, victim.total_request, -1)
        self.preempting[group.id] = self.evictions.commit(found, group.priority)
        self.place(group, found.taken, movable=False, counting=False)
        if any(pod.constraints.spread for pod in group.pods):
            self._shapes.clear()  # pods its spread counts are judged from now on (Space.judged)
        return True
