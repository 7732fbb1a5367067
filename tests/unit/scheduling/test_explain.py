"""Why-pending: one line with the ask, the free blocks that matter, what is short, and who is ahead."""

from __future__ import annotations

from det_k8s.cluster.model import Taint
from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.model import Policy, Reason, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang, node, other_pod, queue, snapshot


def test_the_documented_example_line():
    cluster = snapshot(
        [
            node("gpu-0", 4),
            node("gpu-1", 4),
            node("gpu-2", 4),
            node("gpu-3", 4),
            node("t0", 4, taints=[Taint("accelerator", "gpu")]),
            node("t1", 4, taints=[Taint("accelerator", "gpu")]),
            node("c", 4, cordoned=True),
        ],
        [
            other_pod("x0", "gpu-0", gpus=2),
            other_pod("x1", "gpu-1", gpus=2),
            other_pod("x2", "gpu-2", gpus=4),
            other_pod("x3", "gpu-3", gpus=4),
        ],
    )
    plan = schedule(cluster, queue(gang("big-exp", 4, 4), gang("g", 4, 4)), Policy(reservations=False))
    assert describe(plan.waiting["g"]) == (
        "needs 4 pods x 4 nvidia.com/gpu; 4 of 16 nvidia.com/gpu free on its 4 eligible nodes (12 in use); "
        "largest free blocks: gpu-0 2, gpu-1 2; held by pods in default 12; "
        "3 nodes excluded: 2 taint accelerator=gpu:NoSchedule, 1 cordoned; 1 group ahead: big-exp"
    )


def test_nothing_free_says_so():
    cluster = snapshot([node("n", 4)], [other_pod("x", "n", gpus=4)])
    plan = schedule(cluster, [gang("g", 1, 4)], Policy())
    assert "no free nvidia.com/gpu on its 1 eligible node (4 allocatable: 4 in use)" in describe(plan.waiting["g"])


def test_a_limiting_resource_other_than_gpus_is_named_with_its_amount():
    cluster = snapshot([node("n", 8, cpu=16)], [other_pod("x", "n", cpu=12)])
    line = describe(schedule(cluster, [gang("g", 1, 4, cpu=8)], Policy()).waiting["g"])
    assert line.startswith("needs 1 pod x 4 nvidia.com/gpu + 8 cpu;") and "(limiting: cpu)" in line


def test_nodes_without_the_resource_are_counted_as_excluded():
    plan = schedule(
        snapshot([node("gpu", 4), node("cpu-only")], [other_pod("x", "gpu", gpus=4)]),
        [gang("g", 1, 4)],
        Policy(),
    )
    assert "1 node excluded: 1 no nvidia.com/gpu" in describe(plan.waiting["g"])


def test_long_queues_name_the_first_groups_ahead_and_count_the_rest():
    cluster = snapshot([node("n", 4)], [other_pod("x", "n", gpus=4)])
    plan = schedule(cluster, queue(*(gang(f"g{i}", 1, 4) for i in range(6))), Policy())
    assert describe(plan.waiting["g5"]).endswith("5 groups ahead: g0, g1, g2, ...")


def test_never_fits_because_one_pod_is_larger_than_any_node():
    plan = schedule(snapshot([node("a", 4), node("b", 4)]), [gang("g", 1, 8)], Policy())
    assert describe(plan.rejected["g"]) == (
        "never fits this cluster: each pod needs 8 nvidia.com/gpu, more than any eligible node offers "
        "(limiting: nvidia.com/gpu; largest nodes: a 4, b 4); with --autoscaling it would wait for nodes instead"
    )


def test_never_fits_because_pods_do_not_pack():
    plan = schedule(snapshot([node(f"n{i}", 6) for i in range(3)]), [gang("g", 4, 4)], Policy())
    assert describe(plan.rejected["g"]) == (
        "never fits this cluster: needs 4 pods x 4 nvidia.com/gpu, but its 3 eligible nodes hold at most "
        "3 such pods (limiting: nvidia.com/gpu; 18 nvidia.com/gpu in all; largest nodes: n0 6, n1 6, n2 6); "
        "with --autoscaling it would wait for nodes instead"
    )


def test_no_eligible_node_lists_why():
    plan = schedule(snapshot([node("b", 4, cordoned=True)]), [gang("g", 1, 1)], Policy())
    assert describe(plan.rejected["g"]) == "never fits this cluster: no node can run its pods; 1 node excluded: 1 cordoned"


def test_a_node_that_is_only_not_ready_says_not_now_never_never():
    # Found on the real control plane: every node that joins carries node.kubernetes.io/not-ready (TaintNodesByCondition)
    # until its kubelet reports Ready; a group submitted then was refused as "can never run here".
    plan = schedule(
        snapshot([node("a", 4, ready=False), node("b", 4, cordoned=True)]), [gang("g", 1, 1)], Policy()
    )
    assert "g" not in plan.rejected
    assert describe(plan.waiting["g"]).endswith("2 nodes excluded: 1 cordoned, 1 not ready")


def test_submit_time_rejections_print_their_detail():
    reason = Reason(
        ReasonCode.NOT_DIVISIBLE, detail="slots_per_trial 6 is not a multiple of maxSlotsPerPod 4"
    )
    assert describe(reason) == "slots_per_trial 6 is not a multiple of maxSlotsPerPod 4"
