"""Reclaim against the independent model (`tests/support/queue_model.py`): random teams with guarantees on a full or
partly full cluster of 4-GPU nodes, running single-pod groups of any priority, one queued 4-GPU group.

- A queue below its guarantee whose waiting group fits that guarantee gets it in this pass: placed now, or once
  its victims are gone (`plan.preempting`).
- Victims only come from other queues that borrow, and none could be spared (one node is all it needs, and a
  victim is taken only when no node is free).
- A group beyond its queue's guarantee reclaims nothing; plans are deterministic.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
from det_k8s.live.policy import checked_queues
from det_k8s.scheduling.model import PodGroup, PodRequest, Policy
from det_k8s.scheduling.plan import schedule
from tests.support import queue_model
from tests.support.kube_objects import node, running, spec

NAMESPACES = ("t0", "t1", "t2", "other")
GPU = "nvidia.com/gpu"


@st.composite
def teams(draw: Any) -> tuple[dict[str, Any], int]:
    nodes = draw(st.integers(2, 6))
    budget = 4 * nodes
    queues = []
    for i in range(draw(st.integers(2, 3))):
        guarantee = draw(st.integers(0, budget))
        budget -= guarantee
        queue = {"name": f"q{i}", "guarantee": {GPU: guarantee}, "members": {"namespaces": [f"t{i}"]}}
        if draw(st.booleans()):  # lending limits keep part of a guarantee from borrowers: reclaim is unchanged
            queue["lendingLimit"] = {GPU: draw(st.integers(0, guarantee))}
        queues.append(queue)
    return {"version": 1, "queues": queues}, nodes


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(teams(), st.data())
def test_a_queue_below_its_guarantee_gets_it_in_one_pass(team, data):
    doc, nodes = team
    objects: list[dict[str, Any]] = [node(f"n{i}", 4) for i in range(nodes)]
    held = data.draw(st.integers(0, nodes))
    owners = []
    for i in range(held):
        namespace = data.draw(st.sampled_from(NAMESPACES))
        priority = data.draw(st.integers(0, 100))
        owners.append(namespace)
        objects += running(f"r{i}", [f"n{i}"], gpus=4, namespace=namespace, priority=priority,
                           created=f"2024-01-01T{i:02d}:00:00Z")
    namespace = data.draw(st.sampled_from(NAMESPACES))
    body = spec(4)
    requests = effective_requests(body)
    pod = PodRequest("w-0", 0, requests, constraints_from_spec(body, namespace, {}), {}, namespace)
    waiting = PodGroup("w", "w", "nobody", data.draw(st.integers(0, 100)), "2024-01-02T00:00:00Z", 0, (pod,))
    snapshot = snapshot_from_objects([{"kind": "List", "items": objects}])
    policy = Policy(queues=checked_queues(doc, "random"))
    plan = schedule(snapshot, [waiting], policy)
    assert plan == schedule(snapshot_from_objects([{"kind": "List", "items": objects}]), [waiting], policy)

    used: dict[str, dict[str, Fraction]] = {}
    for owner in owners:
        queue_model.add(doc, used, queue_model.leaf_of(doc, "bob", owner, {}), {GPU: Fraction(4)})
    leaf = queue_model.leaf_of(doc, "nobody", namespace, {})
    asks = {GPU: Fraction(4)}
    if queue_model.within_guarantee(doc, used, leaf, asks):
        assert "w" in plan.placements, (leaf, used)
    else:
        assert plan.victims == ()
    if plan.victims:
        assert held == nodes  # no node was free: one victim is the least that makes room
        assert len(plan.victims) == 1 and plan.preempting["w"] == plan.victims
        (victim,) = plan.victims
        victim_leaf = queue_model.leaf_of(doc, "bob", owners[int(victim[1:])], {})
        assert victim_leaf != leaf and queue_model.borrowing(doc, used, victim_leaf, [GPU])
