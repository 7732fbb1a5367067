"""The Determined documents' deadlocks, and how det-k8s avoids them (no partial group, ever)."""

from __future__ import annotations

from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.model import Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support.builders import gang, node, queue, snapshot

THREE_4GPU_NODES = snapshot([node(f"gpu-{i}", 4) for i in range(3)])


def test_a_16_gpu_task_on_three_4_gpu_nodes_is_rejected_with_both_numbers():
    plan = schedule(THREE_4GPU_NODES, [gang("big", 4, 4)], Policy())
    assert plan.placements == {}
    reason = plan.rejected["big"]
    assert reason.code is ReasonCode.EXCEEDS_CLUSTER
    assert (reason.needed, reason.cluster_total) == (16000, 12000)
    assert "needs 16 nvidia.com/gpu" in describe(reason) and "cluster has 12" in describe(reason)


def test_with_autoscaling_the_16_gpu_task_waits_for_nodes_instead():
    plan = schedule(THREE_4GPU_NODES, [gang("big", 4, 4)], Policy(autoscaling=True, reserve_after=0))
    assert plan.waiting["big"].code is ReasonCode.WAITING_FOR_NODES
    assert "autoscaler" in describe(plan.waiting["big"])
    assert plan.reservations == {}  # it reserves nothing: the nodes it needs do not exist yet


def test_two_12_gpu_tasks_on_12_gpus_one_runs_whole_the_other_waits_whole():
    plan = schedule(THREE_4GPU_NODES, queue(gang("a", 3, 4), gang("b", 3, 4)), Policy())
    assert set(plan.placements) == {"a"}
    assert sorted(node for _, node in plan.placements["a"]) == ["gpu-0", "gpu-1", "gpu-2"]
    assert plan.status("b") == "queued"
    assert plan.waiting["b"].limiting == "nvidia.com/gpu"


def test_the_first_submitted_wins_the_tie():
    plan = schedule(THREE_4GPU_NODES, queue(gang("b", 3, 4), gang("a", 3, 4)), Policy())
    assert set(plan.placements) == {"b"}
