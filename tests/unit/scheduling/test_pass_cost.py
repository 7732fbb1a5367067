"""What a pass leaves behind and repeats (issue 24's latency tail on the real control plane): a `schedule()` leaves
no cycles for the collector, and the node-level filters remembered from an earlier pass never change an answer."""

from __future__ import annotations

import gc
from dataclasses import replace

from det_k8s.cluster.model import Taint
from det_k8s.scheduling.model import Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang, node, other_pod, queue, snapshot


def test_a_pass_leaves_nothing_for_the_cycle_collector():
    cluster = snapshot([node(f"n{i}", 8) for i in range(200)], [other_pod(f"x{i}", f"n{i}", gpus=4) for i in range(50)])
    groups = queue(gang("a", 4, 1), gang("b", 2, 8), gang("c", 190, 8))  # placed, placed, waits
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        plan = schedule(cluster, groups, Policy())
        assert set(plan.placements) == {"a", "b"} and "c" in plan.waiting
        del plan
        assert gc.collect() == 0  # freed by reference counting alone
    finally:
        if was:
            gc.enable()


def test_remembered_node_filters_follow_a_node_that_changed_between_passes():
    nodes = [node(f"n{i}", 8) for i in range(4)]
    first = schedule(snapshot(nodes), [gang("g", 1, 8)], Policy())
    assert first.placements["g"] == (("g-0", "n0"),)
    # the same names, new objects: n0 now tainted and n1 not ready (a watch replaces a node's object when it changes)
    changed = [replace(nodes[0], taints=(Taint("dedicated", "x", "NoSchedule"),)), replace(nodes[1], ready=False),
               *nodes[2:]]
    second = schedule(snapshot(changed), [gang("g", 1, 8)], Policy())
    assert second.placements["g"] == (("g-0", "n2"),)
    only_bad = schedule(snapshot(changed[:2]), [gang("g", 1, 8)], Policy())
    assert "g" not in only_bad.placements
    assert (only_bad.waiting.get("g") or only_bad.rejected.get("g")).code in (
        ReasonCode.NO_ELIGIBLE_NODES, ReasonCode.INSUFFICIENT, ReasonCode.EXCEEDS_CLUSTER)
    again = schedule(snapshot(nodes), [gang("g", 1, 8)], Policy())  # the old objects: their answers, still right
    assert again.placements == first.placements
