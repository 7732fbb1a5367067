"""Team queues: the policy document checked like settings, membership, and admission by queue limits in schedule()."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
from det_k8s.errors import PolicyError
from det_k8s.live.policy import checked_queues, policy_data, policy_from_data
from det_k8s.scheduling.explain import describe, reclaiming, to_dict
from det_k8s.scheduling.model import Plan, PodGroup, PodRequest, Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from det_k8s.scheduling.queues import DEFAULT_QUEUE, parse_queues, queues_data
from tests.support.kube_objects import node, running, spec

DOC: dict[str, Any] = {
    "version": 1,
    "queues": [
        {"name": "research", "guarantee": {"nvidia.com/gpu": 12}, "limit": {"nvidia.com/gpu": 16},
         "children": [
             {"name": "nlp", "guarantee": {"nvidia.com/gpu": 8}, "limit": {"nvidia.com/gpu": 12}, "weight": 2,
              "members": {"workspaces": ["nlp"], "namespaces": ["team-nlp"]}},
             {"name": "vision", "guarantee": {"nvidia.com/gpu": 4},
              "members": {"users": ["vera"], "labels": {"team": "vision"}}},
         ]},
        {"name": "shared", "limit": {"nvidia.com/gpu": "4"}, "members": {"namespaces": ["shared"]}},
    ],
}


def tree(doc: Mapping[str, Any] = DOC):
    found, problems = parse_queues(doc)
    assert problems == [] and found is not None
    return found


def problems(doc: Mapping[str, Any]) -> list[str]:
    found, lines = parse_queues(doc)
    assert found is None
    return lines


def test_a_tree_reads_back_with_a_default_queue_added():
    queues = tree()
    assert [q.name for q in queues.queues] == ["research", "nlp", "vision", "shared", DEFAULT_QUEUE]
    assert queues.path("nlp") == ("nlp", "research") and queues.default == DEFAULT_QUEUE
    assert queues.get("nlp").limit == {"nvidia.com/gpu": 12000} and queues.get("nlp").weight == 2
    assert tree(queues_data(queues)) == queues  # the ConfigMap's form reads back the same
    limited = tree({"queues": [{"name": "a", "guarantee": {"nvidia.com/gpu": 8}, "limit": {"nvidia.com/gpu": 20},
                                "borrowingLimit": {"nvidia.com/gpu": 4}, "lendingLimit": {"nvidia.com/gpu": 2}}]})
    assert tree(queues_data(limited)) == limited
    assert limited.get("a").cap == {"nvidia.com/gpu": (12000, "borrowingLimit")}  # the lower of 20 and 8 + 4
    assert limited.get("a").kept == {"nvidia.com/gpu": 6000}


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["queues"][0]["children"][0].update(name="vision"),
     "queues[0].children[1].name: vision is also the name of queues[0].children[0]; "
     "queue names are unique"),
    (lambda d: d["queues"][0]["children"][1]["guarantee"].update({"nvidia.com/gpu": 8}),
     "queues[0].children: their guarantees of nvidia.com/gpu add up to 16, more than research's 12"),
    (lambda d: d["queues"][1]["members"].update(namespaces=["team-nlp"]),
     "queues[1].members: namespace team-nlp is already a member of queue nlp; a member belongs to one queue"),
    (lambda d: d["queues"][0]["children"][0]["limit"].update({"nvidia.com/gpu": 4}),
     "queues[0].children[0].limit.nvidia.com/gpu: 4 is below the queue's guarantee of 8"),
    (lambda d: d["queues"][0].update(members={"users": ["x"]}),
     "queues[0].members: only a queue without children has members (groups run in leaves)"),
    (lambda d: d["queues"][1].update(weight=0), "queues[1].weight: 0 is not a positive number"),
    (lambda d: d["queues"][1].update(limits={}),
     "queues[1].limits: not a key here (did you mean limit?); expected one of name, guarantee, limit, "
     "borrowingLimit, lendingLimit, weight, members, children"),
    (lambda d: d["queues"][0]["children"][1].update(lendingLimit={"nvidia.com/gpu": 6}),
     "queues[0].children[1].lendingLimit.nvidia.com/gpu: 6 is more than the queue's guarantee of 4 (a queue lends "
     "only what it is guaranteed)"),
    (lambda d: d["queues"][1].update(borrowingLimit={"nvidia.com/gpu": "-2"}),
     "queues[1].borrowingLimit.nvidia.com/gpu: must not be negative"),
    (lambda d: d["queues"][1].update(limit={"nvidia.com/gpu": "lots"}),
     "queues[1].limit.nvidia.com/gpu: 'lots' is not a quantity (examples: 7910m, 7.5, 16Gi)"),
    (lambda d: d["queues"][1].update(name="Shared!"),
     "queues[1].name: 'Shared!' is not a queue name (lower-case letters, digits and '-', at most 63)"),
    (lambda d: d.update(defaultQueue="research"),
     "defaultQueue: research has children; groups run in queues without children"),
    (lambda d: d.update(defaultQueue="nowhere"), "defaultQueue: 'nowhere' is not one of the queues"),
    (lambda d: d.update(version=2), "version: 2 is not a queue document version this det-k8s reads "
                                    "(it reads 1); upgrade det-k8s"),
])
def test_each_problem_is_one_line_with_its_key_path(change, expected):
    import copy

    doc = copy.deepcopy(DOC)
    change(doc)
    assert expected in problems(doc)


def test_every_problem_is_reported_at_once_as_a_policy_error():
    doc = {"queues": [{"name": "a", "weight": -1, "limit": {"cpu": "-1"}}, {"name": "a"}]}
    with pytest.raises(PolicyError) as error:
        checked_queues(doc, "policy.yaml")
    assert [p.render() for p in error.value.problems] == [
        "error: queues[0].limit.cpu: must not be negative (policy.yaml)",
        "error: queues[0].weight: -1 is not a positive number (policy.yaml)",
        "error: queues[1].name: a is also the name of queues[0]; queue names are unique (policy.yaml)",
    ]
    assert error.value.message == "scheduling policy is invalid: 3 errors"


def test_a_group_is_matched_by_workspace_then_user_then_pool_then_label_then_namespace():
    queues = tree()
    assert queues.leaf_for(user="vera", namespace="team-nlp", labels={"determined.ai/workspace": "nlp"}) == "nlp"
    assert queues.leaf_for(user="vera", namespace="team-nlp", labels={}) == "vision"
    assert queues.leaf_for(user="bob", namespace="x", labels={"determined.ai/user": "vera"}) == "vision"
    assert queues.leaf_for(user="bob", namespace="team-nlp", labels={"team": "vision"}) == "vision"
    assert queues.leaf_for(user="bob", namespace="team-nlp", labels={}) == "nlp"
    assert queues.leaf_for(user="bob", namespace="elsewhere", labels={}) == DEFAULT_QUEUE


def test_the_policy_keeps_its_queues_in_the_configmap_form():
    policy = Policy(preemption=True, queues=tree())
    assert policy_from_data(policy_data(policy), "policy.json") == policy
    assert policy_from_data(policy_data(Policy()), "policy.json") == Policy()


# -- admission ------------------------------------------------------------------------------------------------

NODES = [node(f"gpu-{i}", 4) for i in range(8)]


def group(name: str, pods: int, gpus: int, *, namespace: str, user: str = "alice", sequence: int = 0,
          labels: Mapping[str, str] | None = None, priority: int = 50) -> PodGroup:
    body = spec(gpus)
    requests = effective_requests(body)
    members = tuple(PodRequest(f"{name}-{rank}", rank, requests, constraints_from_spec(body, namespace, {}),
                               dict(labels or {}), namespace) for rank in range(pods))
    return PodGroup(name, name, user, priority, "2024-01-01T00:00:00Z", sequence, members)


def plan(objects: Sequence[Mapping[str, Any]], *groups: PodGroup, queues: Any = None) -> Plan:
    snapshot = snapshot_from_objects([{"kind": "List", "items": [*NODES, *objects]}])
    return schedule(snapshot, list(groups), Policy(queues=queues if queues is not None else tree()))


def test_a_queue_at_its_limit_holds_its_groups_back_and_says_so():
    busy = running("old", ["gpu-0", "gpu-1", "gpu-2"], gpus=4, namespace="team-nlp")  # 12 GPUs: nlp's limit
    result = plan(busy, group("more", 1, 4, namespace="team-nlp"), group("other", 1, 4, namespace="elsewhere"))
    assert set(result.placements) == {"other"}
    reason = result.waiting["more"]
    assert reason.code is ReasonCode.QUEUE_LIMIT
    assert describe(reason).startswith("queue nlp: 12 of 12 GPUs (its limit), the group needs 4; needs 1 pod x 4")
    assert to_dict(reason)["queue"] == {"queue": "nlp", "leaf": "nlp", "resource": "nvidia.com/gpu", "used": "12",
                                        "limit": "12", "needs": "4", "bound": "limit"}
    assert set(plan(busy, group("more", 1, 4, namespace="team-nlp"), queues=tree({"queues": []})).placements) == {
        "more"}  # without the queues the cluster has room


def test_a_parents_limit_holds_its_childrens_groups():
    busy = running("v", ["gpu-0", "gpu-1", "gpu-2"], gpus=4, namespace="x") + running(
        "n", ["gpu-3"], gpus=4, namespace="team-nlp")
    busy = [{**p, "metadata": {**p["metadata"], "labels": {**p["metadata"]["labels"], "team": "vision"}}}
            if p["metadata"]["name"].startswith("v-") else p for p in busy]
    result = plan(busy, group("n2", 1, 4, namespace="team-nlp"))
    assert describe(result.waiting["n2"]).startswith(
        "queue research (above nlp): 16 of 16 GPUs (its limit), the group needs 4")


def test_the_pass_counts_its_own_placements_and_every_queue_stays_within_its_limit():
    groups = [group(f"s{i}", 1, 2, namespace="shared", sequence=i) for i in range(4)]
    result = plan([], *groups)
    assert set(result.placements) == {"s0", "s1"}
    assert describe(result.waiting["s2"]).startswith("queue shared: 4 of 4 GPUs (its limit), the group needs 2")


def test_the_masters_groups_join_queues_by_their_workspace_label():
    master = group("trial", 2, 4, namespace="determined", labels={"determined.ai/workspace": "nlp"})
    master = replace(master, pods=tuple(replace(p, admitted=True) for p in master.pods))
    busy = running("old", ["gpu-0", "gpu-1"], gpus=4, namespace="team-nlp")
    assert describe(plan(busy, master).waiting["trial"]).startswith("queue nlp: 8 of 12 GPUs (its limit)")


def test_groups_in_no_queue_go_to_the_default_queue_the_admin_controls():
    queues = tree({"defaultQueue": "rest", "queues": [{"name": "rest", "limit": {"nvidia.com/gpu": 4}}]})
    result = plan([], group("a", 1, 4, namespace="x"), group("b", 1, 4, namespace="y", sequence=1), queues=queues)
    assert set(result.placements) == {"a"} and result.waiting["b"].queue.queue == "rest"


# -- reclaim ---------------------------------------------------------------------------------------------------

TEAMS = {"queues": [{"name": "a", "guarantee": {"nvidia.com/gpu": 8}, "members": {"namespaces": ["team-a"]}},
                    {"name": "b", "guarantee": {"nvidia.com/gpu": 8}, "members": {"namespaces": ["team-b"]}}]}
FOUR = [node(f"gpu-{i}", 4) for i in range(4)]


def cluster(*groups: tuple[str, str, int, str]) -> list[dict[str, Any]]:
    """Running single-pod 4-GPU groups: (id, namespace, priority, start) each on its own node, in order."""
    out: list[dict[str, Any]] = []
    for i, (name, namespace, priority, start) in enumerate(groups):
        out += running(name, [f"gpu-{i}"], gpus=4, namespace=namespace, priority=priority, created=start)
    return out


def reclaim_plan(objects: Sequence[Mapping[str, Any]], *groups: PodGroup, preemption: bool = False) -> Plan:
    snapshot = snapshot_from_objects([{"kind": "List", "items": [*FOUR, *objects]}])
    return schedule(snapshot, list(groups), Policy(preemption=preemption, queues=tree(TEAMS)))


B_BORROWS = cluster(("b1", "team-b", 100, "2024-01-01T01:00:00Z"), ("b2", "team-b", 100, "2024-01-01T02:00:00Z"),
                    ("b3", "team-b", 100, "2024-01-01T03:00:00Z"), ("b4", "team-b", 100, "2024-01-01T04:00:00Z"))


def test_a_queue_below_its_guarantee_reclaims_what_another_borrowed_even_from_higher_priority():
    """Kueue's reclaimWithinCohort: Any. b holds all 16 GPUs (8 borrowed) at priority 100; a asks 4 within its 8."""
    result = reclaim_plan(B_BORROWS, group("a1", 1, 4, namespace="team-a", priority=10))
    assert result.victims == result.reclaimed == ("b4",)  # one group, the newest (least work lost)
    assert result.preempting["a1"] == ("b4",) and result.placements["a1"] == (("a1-0", "gpu-3"),)
    assert reclaiming(result.reclaims["a1"]) == "waiting to reclaim 4 GPUs lent to b"


def test_what_is_reclaimed_is_named_per_lending_queue_and_never_more_than_the_group_asks():
    three = {"queues": [{"name": "a", "guarantee": {"nvidia.com/gpu": 12}, "members": {"namespaces": ["team-a"]}},
                        {"name": "b", "members": {"namespaces": ["team-b"]}},
                        {"name": "c", "members": {"namespaces": ["team-c"]}}]}
    busy = cluster(("b1", "team-b", 100, "2024-01-01T01:00:00Z"), ("c1", "team-c", 100, "2024-01-01T02:00:00Z"),
                   ("b2", "team-b", 100, "2024-01-01T03:00:00Z"), ("c2", "team-c", 100, "2024-01-01T04:00:00Z"))
    snapshot = snapshot_from_objects([{"kind": "List", "items": [*FOUR, *busy]}])
    result = schedule(snapshot, [group("a1", 2, 4, namespace="team-a")], Policy(queues=tree(three)))
    assert sorted(result.victims) == ["b2", "c2"]
    assert reclaiming(result.reclaims["a1"], result.preempting["a1"]) in (
        "waiting to reclaim 4 GPUs lent to b and 4 GPUs lent to c (groups now stopping: b2, c2)",
        "waiting to reclaim 4 GPUs lent to c and 4 GPUs lent to b (groups now stopping: c2, b2)")


def test_reclaim_goes_on_while_the_queue_is_below_its_guarantee_and_the_other_borrows():
    groups = [group(f"a{i}", 1, 4, namespace="team-a", sequence=i, priority=10) for i in range(3)]
    result = reclaim_plan(B_BORROWS, *groups)
    assert result.victims == ("b4", "b3") and set(result.placements) == {"a0", "a1"}
    assert result.waiting["a2"].code is ReasonCode.INSUFFICIENT  # a has its 8: the rest it may only borrow


def test_no_reclaim_beyond_the_guarantee_nor_from_a_queue_within_its_own():
    even = cluster(("a1", "team-a", 10, "2024-01-01T01:00:00Z"), ("a2", "team-a", 10, "2024-01-01T02:00:00Z"),
                   ("b1", "team-b", 100, "2024-01-01T03:00:00Z"), ("b2", "team-b", 100, "2024-01-01T04:00:00Z"))
    held = reclaim_plan(even, group("a3", 1, 4, namespace="team-a", priority=10))
    assert held.victims == () and held.waiting["a3"].code is ReasonCode.INSUFFICIENT
    too_big = reclaim_plan(B_BORROWS, group("big", 3, 4, namespace="team-a", priority=10))  # 12 > a's 8
    assert too_big.victims == () and "big" in too_big.waiting


def test_the_same_queues_groups_are_never_reclaimed_and_plans_are_deterministic():
    mixed = cluster(("a1", "team-a", 1, "2024-01-01T05:00:00Z"), ("b1", "team-b", 100, "2024-01-01T01:00:00Z"),
                    ("b2", "team-b", 100, "2024-01-01T02:00:00Z"), ("b3", "team-b", 100, "2024-01-01T03:00:00Z"))
    groups = [group("a2", 1, 4, namespace="team-a", priority=50)]
    result = reclaim_plan(mixed, *groups)
    assert result.victims == ("b3",)  # a1 is a's own (and of lower priority: preemption is off)
    assert result == reclaim_plan(list(reversed(mixed)), *groups)


def test_only_borrowed_capacity_is_reclaimed_not_a_queue_within_its_guarantee():
    three = {"queues": [{"name": "a", "guarantee": {"nvidia.com/gpu": 4}, "members": {"namespaces": ["team-a"]}},
                        {"name": "b", "guarantee": {"nvidia.com/gpu": 8}, "members": {"namespaces": ["team-b"]}},
                        {"name": "c", "guarantee": {"nvidia.com/gpu": 4}, "members": {"namespaces": ["team-c"]}}]}
    busy = cluster(("c1", "team-c", 100, "2024-01-01T01:00:00Z"), ("c2", "team-c", 100, "2024-01-01T02:00:00Z"),
                   ("b1", "team-b", 0, "2024-01-01T03:00:00Z"), ("b2", "team-b", 0, "2024-01-01T04:00:00Z"))
    snapshot = snapshot_from_objects([{"kind": "List", "items": [*FOUR, *busy]}])
    result = schedule(snapshot, [group("a1", 1, 4, namespace="team-a")], Policy(queues=tree(three)))
    assert result.victims == ("c2",)  # b holds only its guarantee, at priority 0: c borrows, at 100


def test_idle_capacity_is_shared_by_weight_among_queues_of_one_priority():
    """No guarantees: a of weight 1 and b of weight 3 split 8 nodes 2 to 6 (dominant share / weight, as Kueue's
    fair sharing), though a submitted all of its groups first."""
    doc = {"queues": [{"name": "a", "members": {"namespaces": ["team-a"]}},
                      {"name": "b", "weight": 3, "members": {"namespaces": ["team-b"]}}]}
    groups = [group(f"a{i}", 1, 4, namespace="team-a", sequence=i) for i in range(8)]
    groups += [group(f"b{i}", 1, 4, namespace="team-b", sequence=8 + i) for i in range(8)]
    snapshot = snapshot_from_objects([{"kind": "List", "items": [node(f"gpu-{i}", 4) for i in range(8)]}])
    result = schedule(snapshot, groups, Policy(queues=tree(doc)))
    assert sorted(result.placements) == ["a0", "a1", "b0", "b1", "b2", "b3", "b4", "b5"]
    without = schedule(snapshot, groups, Policy())
    assert sorted(without.placements) == [f"a{i}" for i in range(8)]  # one user, submission order


def test_a_guarantee_is_not_counted_as_borrowing_when_sharing():
    """b submitted first, but a's guarantee is a's: only what it uses beyond it counts for sharing."""
    doc = {"queues": [{"name": "a", "guarantee": {"nvidia.com/gpu": 16}, "members": {"namespaces": ["team-a"]}},
                      {"name": "b", "members": {"namespaces": ["team-b"]}}]}
    groups = [group(f"b{i}", 1, 4, namespace="team-b", sequence=i) for i in range(8)]
    groups += [group(f"a{i}", 1, 4, namespace="team-a", sequence=8 + i) for i in range(8)]
    snapshot = snapshot_from_objects([{"kind": "List", "items": [node(f"gpu-{i}", 4) for i in range(8)]}])
    result = schedule(snapshot, groups, Policy(queues=tree(doc)))
    # a's 16 guaranteed GPUs first, then the other 16 split evenly: a borrows 8, b uses 8
    assert sorted(result.placements) == ["a0", "a1", "a2", "a3", "a4", "a5", "b0", "b1"]


def test_groups_their_guarantee_holds_go_before_groups_that_would_borrow_whatever_the_priority():
    """Kueue's entry order: otherwise a reclaimed group, back in the queue at a higher priority, would take back at
    once the capacity its queue lent and be reclaimed again, pass after pass."""
    doc = {"queues": [{"name": "a", "guarantee": {"nvidia.com/gpu": 4}, "members": {"namespaces": ["team-a"]}},
                      {"name": "b", "members": {"namespaces": ["team-b"]}}]}
    snapshot = snapshot_from_objects([{"kind": "List", "items": [node("gpu-0", 4)]}])
    groups = [group("b1", 1, 4, namespace="team-b", priority=90), group("a1", 1, 4, namespace="team-a", priority=10,
                                                                        sequence=1)]
    assert set(schedule(snapshot, groups, Policy(queues=tree(doc))).placements) == {"a1"}
    assert set(schedule(snapshot, groups, Policy()).placements) == {"b1"}  # without queues: priority first


def test_borrowed_capacity_held_in_another_namespace_is_named_when_the_pass_cannot_reclaim_it():
    """A pass evicts only its own namespace's det-k8s groups (and the master's): b's groups in team-b are out of reach
    of team-a's pass, and the waiting line says exactly that; with them in scope the same group reclaims."""
    from det_k8s.scheduling.plan import running_in

    snapshot = snapshot_from_objects([{"kind": "List", "items": [*FOUR, *B_BORROWS]}])
    policy = Policy(queues=tree(TEAMS))
    waiting = group("a1", 1, 4, namespace="team-a", priority=10)
    result = schedule(snapshot, [waiting], policy, running_in(snapshot, "team-a"))
    assert result.victims == () and "a1" in result.waiting
    reason = result.waiting["a1"]
    assert reason.unreachable_in == ("team-b",)
    assert ("its queue could reclaim 4 GPUs lent to b, but det-k8s experiments of namespace team-b hold them, and a "
            "pass evicts only its own namespace's experiments and the Determined master's trials") in describe(reason)
    assert to_dict(reason)["unreachable_reclaim"] == {"namespaces": ["team-b"], "lent": [
        {"to": "b", "resource": "nvidia.com/gpu", "amount": "4"}]}
    assert schedule(snapshot, [waiting], policy).victims == ("b4",)  # in scope: reclaimed
    beyond = schedule(snapshot, [group("a2", 3, 4, namespace="team-a")], policy, running_in(snapshot, "team-a"))
    assert beyond.waiting["a2"].unreachable == ()  # beyond a's guarantee: nothing to reclaim, nothing said
