"""Properties of one scheduling pass on random clusters, running groups, queues and policies.

No node is over-committed, every group is placed whole or not at all on nodes it may use, higher
priorities never lose capacity to lower ones, preemption only ever evicts whole groups of strictly
lower priority, a group only waits if it really did not fit at its turn, and the plan depends only
on the input.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from det_k8s.cluster.model import NO_CONSTRAINTS, PODS, Constraints, Snapshot
from det_k8s.scheduling.capacity import count
from det_k8s.scheduling.labels import running_groups
from det_k8s.scheduling.model import Plan, PodGroup, PodRequest, Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import GPU_TAINT, TOLERATE_GPU, gang, node, other_pod, requests, snapshot, task_pods

USERS = ("ann", "ben", "cat")
NOW = datetime(2024, 1, 1, 0, 10, tzinfo=UTC)  # every pass runs at this time
SUBMISSION_TIMES = ("2024-01-01T00:00:00Z", "2024-01-01T00:08:00.000000Z", "")  # waited 10 min, 2 min, unknown
PRIORITIES = (10, 50, 90)
CONSTRAINTS = (
    NO_CONSTRAINTS,
    TOLERATE_GPU,
    Constraints(node_selector={"pool": "a"}),
    Constraints(node_selector={"pool": "b"}, tolerations=TOLERATE_GPU.tolerations),
)


@st.composite
def clusters(draw) -> Snapshot:
    nodes = []
    for i in range(draw(st.integers(1, 7))):
        nodes.append(
            node(
                f"n{i}",
                draw(st.sampled_from([0, 2, 4, 8])),
                cpu=draw(st.sampled_from([4, 16, 64])),
                pods=draw(st.sampled_from([3, 110])),
                labels={"pool": draw(st.sampled_from("ab"))},
                taints=[GPU_TAINT] if draw(st.booleans()) else [],
                ready=draw(st.integers(0, 9)) > 0,
                cordoned=draw(st.integers(0, 9)) == 0,
            )
        )
    names = st.sampled_from([n.name for n in nodes])
    pods = []
    for g in range(draw(st.integers(0, 5))):
        size = draw(st.integers(1, 3))
        pods += task_pods(
            f"r{g}",
            draw(st.lists(names, min_size=size, max_size=size)),
            gpus=draw(st.sampled_from([0, 1, 2, 4])),
            cpu=draw(st.sampled_from([0.5, 1, 8])),
            priority=draw(st.sampled_from(PRIORITIES)),
            user=draw(st.sampled_from(USERS)),
            created=f"2024-01-0{g + 1}T00:00:00Z",
            deleting=draw(st.integers(0, 9)) == 0,
        )
    for k in range(draw(st.integers(0, 3))):
        pods.append(
            other_pod(
                f"o{k}",
                draw(names),
                gpus=draw(st.sampled_from([0, 1, 2, 4])),
                cpu=draw(st.sampled_from([0, 2])),
                phase=draw(st.sampled_from(["Running", "Pending", "Succeeded"])),
            )
        )
    return snapshot(nodes, pods)


@st.composite
def queues(draw) -> list[PodGroup]:
    groups = []
    for i in range(draw(st.integers(1, 8))):
        constraints = draw(st.sampled_from(CONSTRAINTS))
        priority, user = draw(st.sampled_from(PRIORITIES)), draw(st.sampled_from(USERS))
        gpus = draw(st.sampled_from([0, 1, 2, 4, 8]))
        cpu = draw(st.sampled_from([0, 1, 8] if gpus else [1, 8]))
        group = gang(
            f"q{i}",
            draw(st.integers(1, 4)),
            gpus,
            cpu=cpu,
            priority=priority,
            user=user,
            sequence=i,
            constraints=constraints,
        )
        group = replace(group, submitted_at=draw(st.sampled_from(SUBMISSION_TIMES)))
        if draw(st.integers(0, 5)) == 0:  # a launcher pod beside the workers: two shapes
            launcher = PodRequest(f"q{i}-launcher", len(group.pods), requests(cpu=1), constraints)
            group = replace(group, pods=(*group.pods, launcher))
        groups.append(group)
    return groups


policies = st.builds(
    Policy,
    preemption=st.booleans(),
    autoscaling=st.booleans(),
    backfill=st.booleans(),
    reservations=st.booleans(),
    reserve_after=st.sampled_from([0.0, 300.0]),
    weights=st.dictionaries(st.sampled_from(USERS), st.sampled_from([0.5, 1.0, 3.0]), max_size=2),
)
CASES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def demand(pod: PodRequest) -> dict[str, int]:
    return {**pod.requests, PODS: pod.requests.get(PODS, 0) + 1000}


def add_into(total: dict[str, dict[str, int]], node_name: str, amounts, sign: int = 1) -> None:
    bucket = total.setdefault(node_name, {})
    for name, amount in amounts.items():
        bucket[name] = bucket.get(name, 0) + sign * amount


def placed_load(plan: Plan, queue: list[PodGroup], only=None) -> dict[str, dict[str, int]]:
    load: dict[str, dict[str, int]] = {}
    for group in queue:
        if group.id in plan.placements and (only is None or only(group)):
            for pod, (name, node_name) in zip(group.pods, plan.placements[group.id], strict=True):
                assert name == pod.name
                add_into(load, node_name, demand(pod))
    return load


@CASES
@given(clusters(), queues(), policies)
def test_no_node_is_over_committed_and_groups_are_whole_on_eligible_nodes(cluster, queue, policy):
    plan = schedule(cluster, queue, policy, now=NOW)
    ids = [g.id for g in queue]
    assert sorted(plan.order) == sorted(ids)
    for group in queue:  # exactly one outcome each
        assert [group.id in plan.placements, group.id in plan.waiting, group.id in plan.rejected].count(
            True
        ) == 1
    nodes = cluster.nodes_by_name
    for group in queue:
        if group.id not in plan.placements:
            continue
        assert [name for name, _ in plan.placements[group.id]] == [pod.name for pod in group.pods]
        for pod, (_, node_name) in zip(group.pods, plan.placements[group.id], strict=True):
            where = nodes[node_name]
            assert where.ready and not where.unschedulable
            assert pod.constraints.untolerated(where.taints) is None and pod.constraints.selector_matches(
                where.labels
            )
    running = {g.id: g for g in running_groups(cluster.pods)}
    after = {name: dict(used) for name, used in cluster.used.items()}
    leaving = set(plan.victims) | {g for waits in plan.preempting.values() for g in waits}  # evicted or terminating
    for victim in leaving:
        for pod in running[victim].pods:
            add_into(after, pod.node, {**pod.requests, PODS: 1000}, -1)
    load = placed_load(plan, queue)
    for node_name, amounts in load.items():
        for name, amount in amounts.items():
            assert after[node_name].get(name, 0) + amount <= nodes[node_name].allocatable.get(name, 0)
    normal = placed_load(plan, queue, only=lambda g: g.id not in plan.preempting)
    for node_name, amounts in normal.items():  # without preempting, nothing relies on victims leaving
        for name, amount in amounts.items():
            assert cluster.used[node_name].get(name, 0) + amount <= nodes[node_name].allocatable.get(name, 0)


@CASES
@given(clusters(), queues(), policies)
def test_preemption_evicts_only_whole_strictly_lower_priority_det_k8s_groups(cluster, queue, policy):
    plan = schedule(cluster, queue, policy, now=NOW)
    running = {g.id: g for g in running_groups(cluster.pods)}
    if not policy.preemption:
        assert plan.victims == () and plan.preempting == {}
    assert len(set(plan.victims)) == len(plan.victims)
    assert set(plan.victims) <= {gid for gid, g in running.items() if not g.terminating}
    by_id = {g.id: g for g in queue}
    waited_for = set()
    for preemptor, waits in plan.preempting.items():
        assert preemptor in plan.placements
        for gid in waits:  # a victim of strictly lower priority, or a group already terminating
            assert running[gid].terminating or running[gid].priority < by_id[preemptor].priority
            assert (gid in plan.victims) != running[gid].terminating
        waited_for |= set(waits)
    assert set(plan.victims) <= waited_for


@CASES
@given(clusters(), queues(), policies, st.sampled_from(PRIORITIES[1:]))
def test_lower_priority_groups_never_change_what_higher_ones_get(cluster, queue, policy, cut):
    full = schedule(cluster, queue, policy, now=NOW)
    upper = [g for g in queue if g.priority >= cut]
    alone = schedule(cluster, upper, policy, now=NOW)
    for group in upper:
        assert alone.status(group.id) == full.status(group.id)
        assert alone.preempting.get(group.id) == full.preempting.get(group.id)
        # the same pods are placed; on which nodes may differ: a lower group may have the pass's own,
        # not yet created placements packed again to make room (repack.py), never unplacing any
        assert [pod for pod, _ in alone.placements.get(group.id, ())] == \
            [pod for pod, _ in full.placements.get(group.id, ())]
    assert full.victims[: len(alone.victims)] == alone.victims


def fits(group: PodGroup, free, cluster: Snapshot, blocked) -> bool:
    pod = group.pods[0]
    total = 0
    for candidate in cluster.nodes:
        eligible = (
            candidate.ready
            and not candidate.unschedulable
            and candidate.name not in blocked
            and pod.constraints.untolerated(candidate.taints) is None
            and pod.constraints.selector_matches(candidate.labels)
        )
        if eligible:
            total += count(free[candidate.name], tuple(sorted((n, a) for n, a in demand(pod).items() if a)))
    return total >= group.size


@CASES
@given(clusters(), queues(), policies)
def test_a_group_waits_only_if_it_did_not_fit_at_its_turn(cluster, queue, policy):
    policy = replace(policy, preemption=False)
    plan = schedule(cluster, queue, policy, now=NOW)
    by_id = {g.id: g for g in queue}
    free = {
        n.name: {k: v - cluster.used[n.name].get(k, 0) for k, v in n.allocatable.items()}
        for n in cluster.nodes
    }
    for name, used in cluster.used.items():
        for resource, amount in used.items():
            free[name].setdefault(resource, -amount)
    blocked: set[str] = set()
    backfilled: dict[str, dict[str, int]] = {}  # what later groups placed on reserved nodes
    for gid in plan.order:
        group = by_id[gid]
        homogeneous = len({tuple(sorted(p.requests.items())) for p in group.pods}) == 1
        if gid in plan.placements:
            for pod, (_, node_name) in zip(group.pods, plan.placements[gid], strict=True):
                for resource, amount in demand(pod).items():
                    free[node_name][resource] = free[node_name].get(resource, 0) - amount
                if node_name in blocked:
                    add_into(backfilled, node_name, demand(pod))
        elif gid in plan.waiting and homogeneous:
            code = plan.waiting[gid].code
            if code in (ReasonCode.INSUFFICIENT, ReasonCode.RESERVING, ReasonCode.BEHIND_RESERVATION):
                assert not fits(group, free, cluster, blocked)
            if code is ReasonCode.BEHIND_RESERVATION:
                assert fits(group, free, cluster, set())
        if gid in plan.reservations:
            blocked |= set(plan.reservations[gid])
    for gid, nodes in plan.reservations.items():  # backfill into a reservation never delays its group
        group = by_id[gid]
        if backfilled and len({tuple(sorted(p.requests.items())) for p in group.pods}) == 1:
            assert holds_once_det_k8s_leaves(cluster, nodes, demand(group.pods[0]), backfilled) >= group.size


def holds_once_det_k8s_leaves(cluster: Snapshot, nodes, pod_demand, backfilled) -> int:
    """Pods of `pod_demand` the nodes hold once running det-k8s groups leave, backfilled pods staying."""
    det_k8s = {}
    for group in running_groups(cluster.pods):
        for pod in group.pods:
            add_into(det_k8s, pod.node, {**pod.requests, PODS: 1000})
    total = 0
    for name in nodes:
        node_obj = cluster.nodes_by_name[name]
        left = {
            r: node_obj.allocatable.get(r, 0)
            - cluster.used[name].get(r, 0)
            + det_k8s.get(name, {}).get(r, 0)
            - backfilled.get(name, {}).get(r, 0)
            for r in pod_demand
        }
        total += count(left, tuple(sorted((r, a) for r, a in pod_demand.items() if a)))
    return total


@CASES
@given(clusters(), queues(), policies, st.randoms(use_true_random=False))
def test_the_plan_depends_only_on_the_input(cluster, queue, policy, rnd: random.Random):
    shuffled = list(queue)
    rnd.shuffle(shuffled)
    assert schedule(cluster, queue, policy, now=NOW) == schedule(cluster, shuffled, policy, now=NOW)


@CASES
@given(clusters(), queues(), policies)
def test_only_a_group_that_waited_reserve_after_seconds_holds_a_reservation(cluster, queue, policy):
    plan = schedule(cluster, queue, policy, now=NOW)
    for gid in plan.reservations:
        submitted = next(g.submitted_at for g in queue if g.id == gid)
        assert policy.reserve_after == 0 or (
            submitted and (NOW - datetime.fromisoformat(submitted)).total_seconds() >= policy.reserve_after)
