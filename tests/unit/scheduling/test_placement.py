"""Placement: all pods at once or none, on eligible nodes only, packed tightly, never over-committing."""

from __future__ import annotations

from det_k8s.cluster.model import Constraints, Requirement, Taint
from det_k8s.scheduling.model import Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import GPU_TAINT, TOLERATE_GPU, gang, node, other_pod, queue, snapshot, task_pods


def nodes_of(plan, group_id):
    return [node_name for _, node_name in plan.placements[group_id]]


def test_pods_are_named_and_listed_in_rank_order():
    plan = schedule(snapshot([node("n", 8)]), [gang("g", 2, 4)], Policy())
    assert plan.placements["g"] == (("g-0", "n"), ("g-1", "n"))


def test_a_group_that_does_not_fit_whole_is_not_placed_at_all():
    cluster = snapshot([node("a", 4), node("b", 4)], [other_pod("x", "b", gpus=2)])
    plan = schedule(cluster, [gang("g", 2, 4)], Policy(reservations=False))
    assert plan.placements == {} and plan.waiting["g"].code is ReasonCode.INSUFFICIENT


def test_best_fit_keeps_the_large_block_free():
    cluster = snapshot([node("big", 8), node("small", 8)], [other_pod("x", "small", gpus=6)])
    plan = schedule(cluster, queue(gang("two", 1, 2), gang("eight", 1, 8)), Policy())
    assert nodes_of(plan, "two") == ["small"]
    assert nodes_of(plan, "eight") == ["big"]


def test_a_gang_fills_the_tightest_nodes_first():
    cluster = snapshot(
        [node("empty", 8), node("half", 8), node("three-quarters", 8)],
        [other_pod("x", "half", gpus=4), other_pod("y", "three-quarters", gpus=6)],
    )
    plan = schedule(cluster, [gang("g", 3, 2)], Policy())
    assert nodes_of(plan, "g") == ["three-quarters", "half", "half"]


def test_groups_placed_earlier_in_the_pass_use_up_capacity():
    plan = schedule(
        snapshot([node("n", 8)]),
        queue(gang("a", 1, 6), gang("b", 1, 4), gang("c", 1, 2)),
        Policy(reservations=False),
    )
    assert set(plan.placements) == {"a", "c"}


def test_pinned_pending_pods_hold_capacity_but_finished_pods_do_not():
    cluster = snapshot(
        [node("n", 8)],
        [
            other_pod("pending", "n", gpus=4, phase="Pending"),
            other_pod("done", "n", gpus=4, phase="Succeeded"),
            other_pod("failed", "n", gpus=4, phase="Failed"),
        ],
    )
    plan = schedule(cluster, queue(gang("a", 1, 4), gang("b", 1, 4)), Policy(reservations=False))
    assert set(plan.placements) == {"a"}


def test_untolerated_taints_not_ready_and_cordoned_nodes_are_never_used():
    cluster = snapshot(
        [
            node("tainted", 8, taints=[GPU_TAINT]),
            node("down", 8, ready=False),
            node("cordoned", 8, cordoned=True),
            node("ok", 4),
        ]
    )
    plan = schedule(cluster, [gang("g", 1, 8)], Policy())
    assert "g" not in plan.placements
    reason = plan.waiting["g"]  # the node that is only not ready may come back: it waits rather than being refused
    assert dict(reason.excluded) == {"taint accelerator=gpu:NoSchedule": 1, "not ready": 1, "cordoned": 1}
    down_for_good = schedule(snapshot([node("tainted", 8, taints=[GPU_TAINT]), node("cordoned", 8, cordoned=True),
                                       node("ok", 4)]), [gang("g", 1, 8)], Policy())
    assert down_for_good.rejected["g"].code is ReasonCode.EXCEEDS_CLUSTER


def test_tolerations_open_tainted_nodes():
    plan = schedule(
        snapshot([node("tainted", 8, taints=[GPU_TAINT])]),
        [gang("g", 1, 8, constraints=TOLERATE_GPU)],
        Policy(),
    )
    assert nodes_of(plan, "g") == ["tainted"]


def test_prefer_no_schedule_taints_do_not_exclude():
    plan = schedule(
        snapshot([node("n", 8, taints=[Taint("x", "", "PreferNoSchedule")])]), [gang("g", 1, 8)], Policy()
    )
    assert nodes_of(plan, "g") == ["n"]


def test_node_selector_and_required_affinity_choose_nodes():
    cluster = snapshot([node("a100", 8, labels={"gpu": "a100"}), node("v100", 8, labels={"gpu": "v100"})])
    by_selector = Constraints(node_selector={"gpu": "v100"})
    by_affinity = Constraints(required_terms=((Requirement("gpu", "In", ("a100",)),),))
    plan = schedule(
        cluster,
        queue(gang("s", 1, 8, constraints=by_selector), gang("a", 1, 8, constraints=by_affinity)),
        Policy(),
    )
    assert (nodes_of(plan, "s"), nodes_of(plan, "a")) == (["v100"], ["a100"])


def test_no_eligible_node_is_a_rejection_naming_the_causes():
    plan = schedule(snapshot([node("t", 8, taints=[GPU_TAINT])]), [gang("g", 1, 1)], Policy())
    assert plan.rejected["g"].code is ReasonCode.NO_ELIGIBLE_NODES


def test_a_pod_larger_than_every_node_is_rejected_even_if_the_total_is_enough():
    plan = schedule(snapshot([node("a", 4), node("b", 4)]), [gang("g", 1, 8)], Policy())
    assert plan.rejected["g"].code is ReasonCode.EXCEEDS_CLUSTER
    assert plan.rejected["g"].fits_at_most == 0


def test_every_requested_resource_must_fit_not_only_gpus():
    cluster = snapshot([node("n", 8, cpu=16)], [other_pod("x", "n", cpu=12)])
    plan = schedule(cluster, [gang("g", 1, 4, cpu=8)], Policy(reservations=False))
    assert plan.waiting["g"].limiting == "cpu"


def test_the_pods_allocatable_counts():
    cluster = snapshot([node("n", 8, pods=3)], [other_pod("a", "n"), other_pod("b", "n")])
    plan = schedule(cluster, [gang("g", 2, 1)], Policy(reservations=False))
    assert plan.waiting["g"].limiting == "pods"


def test_cpu_only_groups_pack_by_cpu():
    cluster = snapshot([node("c0", cpu=7.91), node("c1", cpu=7.91), node("c2", cpu=7.91)])
    plan = schedule(cluster, [gang("cpu", 3, cpu=7.5)], Policy())
    assert sorted(nodes_of(plan, "cpu")) == ["c0", "c1", "c2"]


def test_a_node_that_lost_gpus_counts_as_full_not_negative():
    cluster = snapshot([node("shrunk", 2), node("ok", 4)], task_pods("old", ["shrunk"], gpus=4))
    plan = schedule(cluster, [gang("g", 1, 2)], Policy())
    assert nodes_of(plan, "g") == ["ok"]


def test_the_same_input_gives_the_same_plan():
    cluster = snapshot([node(f"n{i}", 8) for i in range(6)], [other_pod("x", "n2", gpus=3)])
    groups = queue(*(gang(f"g{i}", 1 + i % 3, 2 + i % 2 * 2, user=f"u{i % 2}") for i in range(8)))
    assert schedule(cluster, groups, Policy()) == schedule(cluster, groups, Policy())


def test_the_inputs_are_not_changed():
    cluster = snapshot([node("n", 8)], [other_pod("x", "n", gpus=2)])
    before = dict(cluster.free["n"])
    schedule(cluster, [gang("g", 1, 6)], Policy())
    assert cluster.free["n"] == before
