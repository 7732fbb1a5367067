"""Scenarios from Kueue's and Volcano's documentation, with the outcome each documents, run through schedule().

Kueue's examples count CPUs of a cohort's quota; here they are GPUs of 1-GPU nodes (det-k8s's nodes decide what is
idle; Kueue's quota arithmetic does), and each workload is a single-pod group of 1 GPU. benchmarks/RESULTS.md puts
each documented outcome beside det-k8s's ("Team queues against Kueue's and Volcano's documented scenarios").

- Kueue, concepts/cluster_queue.md, "Borrowing example", "BorrowingLimit", "LendingLimit", "Preemption"
  (reclaimWithinCohort: Any); concepts/cohort.md, "Hierarchical Cohorts" (weights 0.75/0.25).
- Volcano, the capacity plugin (queue `deserved` lent while idle and reclaimed, `capability` a hard limit) and
  hierarchical queues (a parent's capability bounds its children).
"""

from __future__ import annotations

from typing import Any

from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.model import Plan, PodGroup, PodRequest, Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from det_k8s.scheduling.queues import parse_queues
from tests.support.kube_objects import node, running, spec

GPU = "nvidia.com/gpu"


def one(name: str, namespace: str, *, priority: int = 50, sequence: int = 0) -> PodGroup:
    body = spec(1)
    pod = PodRequest(f"{name}-0", 0, effective_requests(body), constraints_from_spec(body, namespace, {}), {},
                     namespace)
    return PodGroup(name, name, "u", priority, "2024-01-01T00:00:00Z", sequence, (pod,))


def run(doc: dict[str, Any], nodes: int, queued: list[PodGroup], busy: list[dict[str, Any]] | None = None,
        ) -> Plan:
    tree, problems = parse_queues(doc)
    assert not problems and tree is not None, problems
    items = [node(f"n{i}", 1) for i in range(nodes)] + list(busy or [])
    return schedule(snapshot_from_objects([{"kind": "List", "items": items}]), queued, Policy(queues=tree))


def team(name: str, count: int, start: int = 0, priority: int = 50) -> list[PodGroup]:
    return [one(f"{name}{i}", f"team-{name}", priority=priority, sequence=start + i) for i in range(count)]


def placed(plan: Plan, prefix: str) -> int:
    return sum(1 for g in plan.placements if g.startswith(prefix))


def queue(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "members": {"namespaces": [f"team-{name}"]}, **fields}


# -- Kueue ---------------------------------------------------------------------------------------------------------

def test_kueue_borrowing_example_a_borrows_all_that_b_leaves_idle():
    """a nominal 9, b nominal 12, b has no workloads: a admits up to 12+9 = 21."""
    doc = {"queues": [queue("a", guarantee={GPU: 9}), queue("b", guarantee={GPU: 12})]}
    assert placed(run(doc, 21, team("a", 25)), "a") == 21


def test_kueue_borrowing_example_b_within_its_nominal_goes_before_a_borrowing():
    """a uses all its nominal 9; b's pending workloads are admitted before any new workload of a."""
    doc = {"queues": [queue("a", guarantee={GPU: 9}), queue("b", guarantee={GPU: 12})]}
    busy = [p for i in range(9) for p in running(f"ra{i}", [f"n{i}"], gpus=1, namespace="team-a")]
    plan = run(doc, 21, team("a", 12) + team("b", 12, start=12), busy)
    assert placed(plan, "b") == 12 and placed(plan, "a") == 0


def test_kueue_borrowing_limit_caps_what_a_queue_borrows():
    """a nominal 9, borrowingLimit 1: 9+1 = 10 with b idle; b without one can use 12+9 = 21."""
    doc = {"queues": [queue("a", guarantee={GPU: 9}, borrowingLimit={GPU: 1}), queue("b", guarantee={GPU: 12})]}
    plan = run(doc, 21, team("a", 21))
    assert placed(plan, "a") == 10
    assert describe(plan.waiting["a10"]).startswith(
        "queue a: 10 of 10 GPUs (its guarantee and borrowingLimit), the group needs 1")
    assert placed(run(doc, 21, team("b", 25)), "b") == 21


def test_kueue_lending_limit_keeps_part_of_a_guarantee_from_borrowers():
    """b nominal 12, lendingLimit 1, b idle: a (nominal 9) admits up to 9+1 = 10; without the lendingLimit 21."""
    doc = {"queues": [queue("a", guarantee={GPU: 9}), queue("b", guarantee={GPU: 12}, lendingLimit={GPU: 1})]}
    plan = run(doc, 21, team("a", 21))
    assert placed(plan, "a") == 10
    reason = plan.waiting["a10"]
    assert reason.code is ReasonCode.QUEUE_LIMIT and reason.queue.bound == "lendingLimit"
    assert describe(reason).startswith("queue b keeps 11 GPUs it does not lend (its lendingLimit) of the 11 free, "
                                       "the group needs 1")
    assert placed(run(doc, 21, team("b", 21)), "b") == 12 + 9  # b's own guarantee is b's, whatever it lends
    del doc["queues"][1]["lendingLimit"]
    assert placed(run(doc, 21, team("a", 21)), "a") == 21


def test_kueue_reclaim_within_cohort_any_evicts_a_borrower_whatever_its_priority():
    """b uses all 21 (12 nominal + 9 borrowed) at a high priority; a within its nominal preempts one of b's."""
    doc = {"queues": [queue("a", guarantee={GPU: 9}), queue("b", guarantee={GPU: 12})]}
    busy = [p for i in range(21) for p in running(f"rb{i}", [f"n{i}"], gpus=1, namespace="team-b", priority=1000,
                                                      created=f"2024-01-01T{i:02d}:00:00Z")]
    plan = run(doc, 21, team("a", 1, priority=0), busy)
    assert plan.victims == plan.reclaimed == ("rb20",) and "a0" in plan.placements  # the newest of b's


def test_kueue_hierarchical_cohorts_weights_of_the_orgs():
    """Kueue: important-org (weight 0.75) and regular-org (0.25) tend to 75% and 25% of what they share.
    det-k8s orders by the leaf's share only (a parent's weight is not used yet): they split 50/50."""
    doc = {"queues": [{"name": "important-org", "weight": 0.75, "children": [queue("imp")]},
                      {"name": "regular-org", "weight": 0.25, "children": [queue("reg")]}]}
    plan = run(doc, 8, team("imp", 8) + team("reg", 8, start=8))
    assert (placed(plan, "imp"), placed(plan, "reg")) == (4, 4)
    doc["queues"][0]["children"][0]["weight"], doc["queues"][1]["children"][0]["weight"] = 3, 1
    plan = run(doc, 8, team("imp", 8) + team("reg", 8, start=8))
    assert (placed(plan, "imp"), placed(plan, "reg")) == (6, 2)  # the weights on the leaves: 75/25


def test_kueue_lending_limit_of_a_cohort_keeps_its_share_from_other_cohorts():
    """A parent's lendingLimit (Kueue: on a Cohort of a CohortTree) keeps part of the subtree's guarantee for its
    own queues: org-x guaranteed 8 lending 2 leaves org-y (guaranteed 0) 2 of x's idle 8 plus the 4 nobody holds."""
    doc = {"queues": [{"name": "org-x", "guarantee": {GPU: 8}, "lendingLimit": {GPU: 2},
                       "children": [queue("x", guarantee={GPU: 8})]},
                      {"name": "org-y", "children": [queue("y")]}]}
    assert placed(run(doc, 12, team("y", 12)), "y") == 6
    assert placed(run(doc, 12, team("x", 12)), "x") == 12


# -- Volcano -------------------------------------------------------------------------------------------------------

def test_volcano_capacity_an_idle_queues_deserved_share_is_lent_then_reclaimed():
    """queue1 and queue2 deserve 2 each of 4; queue1's job takes all 4 while queue2 is idle; queue2's job comes:
    queue1's excess is reclaimed up to queue2's deserved (det-k8s: whole groups, the newest first)."""
    doc = {"queues": [queue("q1", guarantee={GPU: 2}), queue("q2", guarantee={GPU: 2})]}
    assert placed(run(doc, 4, team("q1", 4)), "q1") == 4
    busy = [p for i in range(4) for p in running(f"r1{i}", [f"n{i}"], gpus=1, namespace="team-q1",
                                                     created=f"2024-01-01T0{i}:00:00Z")]
    plan = run(doc, 4, team("q2", 3), busy)
    assert sorted(plan.victims) == ["r12", "r13"] and placed(plan, "q2") == 2
    assert plan.waiting["q22"].code is ReasonCode.INSUFFICIENT  # beyond its deserved: nothing more is reclaimed


def test_volcano_capability_is_a_hard_limit_and_a_parents_bounds_its_children():
    """A queue never uses more than its capability, however idle the cluster; in a hierarchy a parent's
    capability bounds what its children use together."""
    doc = {"queues": [{"name": "dept", "limit": {GPU: 4}, "children": [queue("c1", limit={GPU: 3}), queue("c2")]}]}
    assert placed(run(doc, 8, team("c1", 5)), "c1") == 3
    plan = run(doc, 8, team("c1", 5) + team("c2", 5, start=5))
    assert placed(plan, "c1") <= 3 and placed(plan, "c1") + placed(plan, "c2") == 4
    assert any(describe(r).startswith("queue dept (above c2): 4 of 4 GPUs (its limit)") for r in plan.waiting.values())
