"""Repacking: this pass's own placements move to make room for a later group; who is placed never changes."""

from __future__ import annotations

from det_k8s.cluster.model import Constraints
from det_k8s.scheduling.model import Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang, node, queue, snapshot

A100 = Constraints(node_selector={"pool": "a100"})
# a free 4-GPU v100 node and a free 8-GPU a100 node: 12 GPUs
CLUSTER = snapshot([node("v100", 4, labels={"pool": "v100"}), node("a100", 8, labels={"pool": "a100"})])


def nodes_of(plan, group_id):
    return sorted(node_name for _, node_name in plan.placements[group_id])


def test_earlier_placements_move_so_a_later_group_fits_and_nobody_is_displaced():
    # best fit puts "two" on the tighter v100; then "eight" (2 x 4) takes the a100, and "pinned" (a100 only)
    # finds no room. Packed again, largest pods first: eight on v100 + a100, two and pinned on the a100.
    plan = schedule(CLUSTER, queue(gang("two", 1, 2), gang("eight", 2, 4), gang("pinned", 1, 2, constraints=A100)),
                    Policy())
    assert set(plan.placements) == {"two", "eight", "pinned"}
    assert (nodes_of(plan, "eight"), nodes_of(plan, "two"), nodes_of(plan, "pinned")) == (
        ["a100", "v100"], ["a100"], ["a100"])


def test_groups_decided_before_a_waiting_group_keep_their_nodes():
    # "twelve" waits (12 GPUs do not fit next to "two", however packed); "two" then stays on the v100
    # although moving it would admit "pinned": the waiting group did not fit the nodes as they were.
    groups = queue(gang("two", 1, 2), gang("twelve", 3, 4), gang("eight", 2, 4),
                   gang("pinned", 1, 2, constraints=A100))
    plan = schedule(CLUSTER, groups, Policy())
    assert plan.waiting["twelve"].code is ReasonCode.INSUFFICIENT
    assert nodes_of(plan, "two") == ["v100"] and nodes_of(plan, "eight") == ["a100", "a100"]
    assert plan.waiting["pinned"].code is ReasonCode.INSUFFICIENT  # the failed repack changed nothing


def test_a_repack_that_cannot_fit_everyone_changes_nothing():
    plan = schedule(CLUSTER, queue(gang("two", 1, 2), gang("eight", 2, 4), gang("big", 1, 8, constraints=A100)),
                    Policy())
    assert "big" in plan.waiting
    assert (nodes_of(plan, "two"), nodes_of(plan, "eight")) == (["v100"], ["a100", "a100"])


def test_repacking_respects_the_order_of_decisions():
    plan = schedule(CLUSTER, queue(gang("two", 1, 2), gang("eight", 2, 4), gang("pinned", 1, 2, constraints=A100)),
                    Policy())
    assert plan.order == ("two", "eight", "pinned")
