"""Kueue's and Volcano's documented queue scenarios, run through det-k8s's `schedule()`: each documented outcome
beside det-k8s's (benchmarks/RESULTS.md, section 9). tests/unit/scheduling/test_queue_scenarios.py asserts the same
outcomes (and the lines users read).

Kueue's examples count CPUs of a cohort's quota; here they are GPUs of 1-GPU nodes and each workload a single-pod
group of 1 GPU (det-k8s's nodes decide what is idle). Sources: Kueue, concepts/cluster_queue.md ("Borrowing
example", "BorrowingLimit", "LendingLimit", "Preemption": reclaimWithinCohort Any) and concepts/cohort.md
("Hierarchical Cohorts"); Volcano, the capacity plugin (a queue's `deserved` lent while idle and reclaimed;
`capability` a hard limit) and hierarchical queues (a parent's capability bounds its children).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GPU = "nvidia.com/gpu"


def _pod(name: str, namespace: str, node: str, priority: int, created: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/managed-by": "det-k8s", "det-k8s.io/group": name, "det-k8s.io/experiment": name,
              "det-k8s.io/user": "u", "det-k8s.io/priority": str(priority), "det-k8s.io/size": "1",
              "det-k8s.io/rank": "0"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-0", "namespace": namespace, "labels": labels, "creationTimestamp": created},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}],
                     "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]},
            "status": {"phase": "Running"}}


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {GPU: "1", "cpu": "16", "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def _queue(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "members": {"namespaces": [f"team-{name}"]}, **fields}


class _Run:
    """One scenario's cluster: `nodes` 1-GPU nodes, running 1-GPU groups, and a queue document."""

    def __init__(self, doc: dict[str, Any], nodes: int, busy: list[tuple[str, int, int]] | None = None) -> None:
        from det_k8s.cluster.read import snapshot_from_objects
        from det_k8s.scheduling.queues import parse_queues

        tree, problems = parse_queues(doc)
        assert tree is not None, problems
        self.tree = tree
        items = [_node(f"n{i}") for i in range(nodes)]
        slot = 0
        for team, count, priority in busy or []:
            for i in range(count):
                items.append(_pod(f"{team}-run-{i}", f"team-{team}", f"n{slot}", priority, f"2024-01-01T{i:02d}:00:00Z"))
                slot += 1
        self.snapshot = snapshot_from_objects([{"kind": "List", "items": items}])

    def plan(self, *teams: tuple[str, int, int]) -> Any:
        """(team, groups, priority) submitted in this order."""
        from det_k8s.scheduling.model import PodGroup, PodRequest, Policy
        from det_k8s.scheduling.plan import schedule

        queue: list[PodGroup] = []
        for team, count, priority in teams:
            for i in range(count):
                pod = PodRequest(f"{team}-{i}-0", 0, {GPU: 1000}, namespace=f"team-{team}")
                queue.append(PodGroup(f"{team}-{i}", f"{team}-{i}", "u", priority, "2024-01-02T00:00:00Z",
                                      len(queue), (pod,)))
        return schedule(self.snapshot, queue, Policy(queues=self.tree))


def _placed(plan: Any, team: str) -> int:
    return sum(1 for gid in plan.placements if gid.startswith(f"{team}-"))


def _borrowing() -> tuple[str, str, bool]:
    doc = {"queues": [_queue("a", guarantee={GPU: 9}), _queue("b", guarantee={GPU: 12})]}
    idle = _placed(_Run(doc, 21).plan(("a", 25, 50)), "a")
    busy = _Run(doc, 21, [("a", 9, 50)]).plan(("a", 12, 50), ("b", 12, 50))
    return ("a can use 12+9 = 21 while b is idle; with a at its nominal 9 and both waiting, b's workloads are "
            "admitted before any new one of a",
            f"a: {idle} of 21; then b: {_placed(busy, 'b')} placed, a: {_placed(busy, 'a')} "
            "(groups their guarantee holds go first)", idle == 21 and _placed(busy, "b") == 12 == 12 + _placed(busy, "a"))


def _borrowing_limit() -> tuple[str, str, bool]:
    doc = {"queues": [_queue("a", guarantee={GPU: 9}, borrowingLimit={GPU: 1}), _queue("b", guarantee={GPU: 12})]}
    a, b = _placed(_Run(doc, 21).plan(("a", 21, 50)), "a"), _placed(_Run(doc, 21).plan(("b", 25, 50)), "b")
    return ("a (nominal 9, borrowingLimit 1) admits up to 10 while b is idle; b (no borrowingLimit) up to 21",
            f"a: {a}; b: {b}", (a, b) == (10, 21))


def _lending_limit() -> tuple[str, str, bool]:
    doc = {"queues": [_queue("a", guarantee={GPU: 9}), _queue("b", guarantee={GPU: 12}, lendingLimit={GPU: 1})]}
    kept = _placed(_Run(doc, 21).plan(("a", 21, 50)), "a")
    del doc["queues"][1]["lendingLimit"]
    lent = _placed(_Run(doc, 21).plan(("a", 21, 50)), "a")
    return ("b (nominal 12, lendingLimit 1) idle: a (nominal 9) admits up to 9+1 = 10; without the lendingLimit 21",
            f"a: {kept}; without it: {lent}", (kept, lent) == (10, 21))


def _reclaim() -> tuple[str, str, bool]:
    doc = {"queues": [_queue("a", guarantee={GPU: 9}), _queue("b", guarantee={GPU: 12})]}
    plan = _Run(doc, 21, [("b", 21, 1000)]).plan(("a", 1, 0))
    return ("reclaimWithinCohort Any: a workload of a within a's nominal quota preempts a workload of b (which "
            "borrows), whatever its priority; the most recently admitted first",
            f"victims {', '.join(plan.victims) or 'none'} (b's newest, priority 1000) for a's priority-0 group; "
            f"a-0 {'placed' if 'a-0' in plan.placements else 'waits'}",
            plan.victims == ("b-run-20",) and "a-0" in plan.placements)


def _hierarchy_weights() -> tuple[str, str, bool]:
    doc: dict[str, Any] = {"queues": [
        {"name": "important-org", "weight": 0.75, "children": [_queue("imp")]},
        {"name": "regular-org", "weight": 0.25, "children": [_queue("reg")]}]}
    parents = _Run(doc, 8).plan(("imp", 8, 50), ("reg", 8, 50))
    doc["queues"][0]["children"][0]["weight"], doc["queues"][1]["children"][0]["weight"] = 3, 1
    leaves = _Run(doc, 8).plan(("imp", 8, 50), ("reg", 8, 50))
    return ("hierarchical cohorts, fair sharing: important-org (weight 0.75) and regular-org (0.25) tend to 75% "
            "and 25% of what they share",
            f"weights on the orgs: {_placed(parents, 'imp')}/{_placed(parents, 'reg')} of 8 (a parent's weight is "
            f"not used yet); on their leaves: {_placed(leaves, 'imp')}/{_placed(leaves, 'reg')}",
            (_placed(parents, "imp"), _placed(parents, "reg")) == (6, 2))


def _cohort_lending() -> tuple[str, str, bool]:
    doc = {"queues": [{"name": "org-x", "guarantee": {GPU: 8}, "lendingLimit": {GPU: 2},
                       "children": [_queue("x", guarantee={GPU: 8})]},
                      {"name": "org-y", "children": [_queue("y")]}]}
    y, x = _placed(_Run(doc, 12).plan(("y", 12, 50)), "y"), _placed(_Run(doc, 12).plan(("x", 12, 50)), "x")
    return ("a Cohort's lendingLimit bounds what its subtree lends: org-x (8, lendingLimit 2) lends 2 to org-y, "
            "which also has the 4 nobody is guaranteed", f"y: {y} of 12; x alone: {x}", (y, x) == (6, 12))


def _volcano_reclaim() -> tuple[str, str, bool]:
    doc = {"queues": [_queue("q1", guarantee={GPU: 2}), _queue("q2", guarantee={GPU: 2})]}
    alone = _placed(_Run(doc, 4).plan(("q1", 4, 50)), "q1")
    plan = _Run(doc, 4, [("q1", 4, 50)]).plan(("q2", 3, 50))
    return ("capacity plugin: q1 and q2 deserve 2 of 4 each; q1 uses all 4 while q2 is idle; q2's jobs come: q1's "
            "excess is reclaimed up to q2's deserved",
            f"q1 alone: {alone} of 4; then victims {', '.join(sorted(plan.victims))}, q2: {_placed(plan, 'q2')} "
            "placed, its third waits", alone == 4 and len(plan.victims) == 2 == _placed(plan, "q2"))


def _volcano_capability() -> tuple[str, str, bool]:
    doc = {"queues": [{"name": "dept", "limit": {GPU: 4},
                       "children": [_queue("c1", limit={GPU: 3}), _queue("c2")]}]}
    alone = _placed(_Run(doc, 8).plan(("c1", 5, 50)), "c1")
    both = _Run(doc, 8).plan(("c1", 5, 50), ("c2", 5, 50))
    return ("capability is a hard limit however idle the cluster; a parent's capability bounds its children's use "
            "together",
            f"c1 (limit 3) alone on 8 GPUs: {alone}; c1 and c2 under dept (limit 4): "
            f"{_placed(both, 'c1')} + {_placed(both, 'c2')}",
            alone == 3 and _placed(both, "c1") + _placed(both, "c2") == 4)


SCENARIOS: tuple[tuple[str, str, Callable[[], tuple[str, str, bool]]], ...] = (
    ("Kueue", "borrowing example", _borrowing),
    ("Kueue", "borrowingLimit", _borrowing_limit),
    ("Kueue", "lendingLimit", _lending_limit),
    ("Kueue", "reclaim (reclaimWithinCohort: Any)", _reclaim),
    ("Kueue", "hierarchical cohorts, weights", _hierarchy_weights),
    ("Kueue", "a cohort's lendingLimit", _cohort_lending),
    ("Volcano", "capacity plugin: deserved lent and reclaimed", _volcano_reclaim),
    ("Volcano", "capability, hierarchical queues", _volcano_capability),
)


def run_scenarios() -> list[dict[str, Any]]:
    rows = []
    for source, name, scenario in SCENARIOS:
        documented, ours, same = scenario()
        rows.append({"source": source, "scenario": name, "documented": documented, "det_k8s": ours, "same": same})
    return rows
