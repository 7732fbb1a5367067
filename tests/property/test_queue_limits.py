"""det-k8s's queue admission against the independent model (`tests/support/queue_model.py`): random trees (limits, borrowing
and lending limits), running groups and queues on a cluster with and without room. Replayed in plan order: every
placed group keeps every queue on its path within its limit and leaves what others keep free; every group waiting
for a queue limit would have taken one over; plans are deterministic."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
from det_k8s.live.policy import checked_queues
from det_k8s.scheduling.model import PodGroup, PodRequest, Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support import queue_model
from tests.support.kube_objects import node, running, spec

NAMESPACES = ("ns0", "ns1", "ns2", "ns3", "ns4")
USERS = ("ann", "bob")


@st.composite
def trees(draw: Any) -> dict[str, Any]:
    names = iter(f"q{i}" for i in range(20))
    free = list(NAMESPACES[:4])

    def queue(depth: int) -> dict[str, Any]:
        item: dict[str, Any] = {"name": next(names)}
        if draw(st.booleans()):
            item["limit"] = {"nvidia.com/gpu": draw(st.integers(0, 24))}
        if draw(st.booleans()):
            item["borrowingLimit"] = {"nvidia.com/gpu": draw(st.integers(0, 16))}
        if depth < 2 and draw(st.booleans()):
            item["children"] = [queue(depth + 1) for _ in range(draw(st.integers(1, 2)))]
        else:
            if draw(st.booleans()):  # guarantees on leaves only: they then always fit their parents'
                guarantee = draw(st.integers(0, 12))
                item["guarantee"] = {"nvidia.com/gpu": guarantee}
                if item.get("limit", {}).get("nvidia.com/gpu", guarantee) < guarantee:
                    item["limit"] = {"nvidia.com/gpu": guarantee}  # a limit is never below the guarantee
                if draw(st.booleans()):
                    item["lendingLimit"] = {"nvidia.com/gpu": draw(st.integers(0, guarantee))}
            members: dict[str, Any] = {}
            if free and draw(st.booleans()):
                members["namespaces"] = [free.pop(draw(st.integers(0, len(free) - 1)))]
            if draw(st.booleans()):
                members["users"] = [f"user-{item['name']}"]
            if members:
                item["members"] = members
        return item

    return {"version": 1, "queues": [queue(0) for _ in range(draw(st.integers(1, 3)))]}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.lists(st.tuples(st.sampled_from(NAMESPACES), st.integers(1, 3)), max_size=5),
       st.lists(st.tuples(st.sampled_from(NAMESPACES), st.integers(1, 3), st.integers(1, 4), st.booleans()),
                min_size=1, max_size=7),
       st.integers(2, 8))
def test_no_queue_goes_over_its_limit(doc, busy, asked, nodes):
    objects: list[dict[str, Any]] = [node(f"n{i}", 4) for i in range(nodes)]
    slots = [f"n{i}" for i in range(nodes)]
    for index, (namespace, pods) in enumerate(busy):
        if len(slots) < pods:
            break
        where, slots = slots[:pods], slots[pods:]
        objects += running(f"r{index}", where, gpus=4, namespace=namespace)
    snapshot = snapshot_from_objects([{"kind": "List", "items": objects}])
    tree = checked_queues(doc, "random")
    queue = []
    for index, (namespace, pods, gpus, own_user) in enumerate(asked):
        body = spec(gpus)
        requests = effective_requests(body)
        members = tuple(PodRequest(f"g{index}-{rank}", rank, requests, constraints_from_spec(body, namespace, {}), {},
                                   namespace) for rank in range(pods))
        user = f"user-q{index % 5}" if own_user else "nobody"
        queue.append(PodGroup(f"g{index}", f"g{index}", user, 50, "2024-01-01T00:00:00Z", index, members))
    policy = Policy(queues=tree)
    plan = schedule(snapshot, queue, policy)
    assert plan == schedule(snapshot, list(reversed(queue)), policy)

    used: dict[str, dict[str, Fraction]] = {}
    free = {"nvidia.com/gpu": Fraction(4 * len(slots))}  # the nodes no running group holds
    for pod in objects:
        if pod["kind"] == "Pod":
            labels = pod["metadata"]["labels"]
            leaf = queue_model.leaf_of(doc, labels["det-k8s.io/user"], pod["metadata"]["namespace"], labels)
            queue_model.add(doc, used, leaf, {"nvidia.com/gpu": Fraction(4)})
    by_id = {g.id: (g, asked[i]) for i, g in enumerate(queue)}
    for group_id in plan.order:
        group, (namespace, pods, gpus, _) = by_id[group_id]
        leaf = queue_model.leaf_of(doc, group.user, namespace, {})
        asks = {"nvidia.com/gpu": Fraction(gpus * pods)}
        blocked = queue_model.over(doc, used, leaf, asks)
        kept = blocked is None and queue_model.lending_blocks(doc, used, leaf, asks, free)
        if group_id in plan.placements:
            assert blocked is None and not kept, (group_id, leaf)
            queue_model.add(doc, used, leaf, asks)
            free["nvidia.com/gpu"] -= asks["nvidia.com/gpu"]
        elif group_id in plan.rejected:
            continue  # never fits the cluster: judged before any queue
        elif plan.waiting[group_id].code is ReasonCode.QUEUE_LIMIT:
            hold = plan.waiting[group_id].queue
            if hold.bound == "lendingLimit":
                assert kept, group_id
            else:
                assert blocked == hold.queue, group_id
        else:
            assert blocked is None and not kept, group_id  # waits for room, not for a queue
