"""Team queues on the real API server, with kube-scheduler, the Job controller and kwok beside it: a team below
its guarantee reclaims a trial another team borrowed, of higher priority; while the victim stops, the reclaiming
trial's pods say so in their PodScheduled condition (where `kubectl describe` shows it), and it is bound whole
once the victim is gone."""

from __future__ import annotations

import pytest

from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.queues import parse_queues
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, honour_preemption, master_task

pytestmark = pytest.mark.real
TEAMS, _ = parse_queues({"queues": [
    {"name": "nlp", "guarantee": {"nvidia.com/gpu": 8}, "members": {"users": ["nina"]}},
    {"name": "vision", "guarantee": {"nvidia.com/gpu": 4}, "members": {"users": ["vera"]}},
]})


def bound(real_cluster, task) -> bool:
    pods = [p for p in real_cluster.api.items("pods") if p["metadata"]["labels"].get("determined") == task.allocation]
    return bool(pods) and all(p["spec"].get("nodeName") for p in pods)


def conditions(real_cluster, task) -> list[str]:
    return [c.get("message", "") for p in real_cluster.api.items("pods")
            if p["metadata"]["labels"].get("determined") == task.allocation
            for c in p.get("status", {}).get("conditions", []) if c.get("type") == "PodScheduled"]


def test_a_team_below_its_guarantee_reclaims_and_its_pods_say_so(real_cluster):
    for i in range(3):
        real_cluster.api.put(node(f"gpu-{i}", gpus=4))

    def run_pass():
        return LiveScheduler(real_cluster.connect(), "default", Policy(queues=TEAMS), "t", serve="coscheduler").run_pass()

    admin = real_cluster.connect()
    vera = [create_task(admin, master_task("0.38.1", experiment=i + 1, user="vera", priority=80), job_controller=True)
            for i in range(3)]
    real_cluster.wait_for("vision's three trials bound (8 GPUs of them borrowed)",
                          lambda: (run_pass(), all(bound(real_cluster, t) for t in vera))[1], timeout=120,
                          interval=1)
    nina = create_task(admin, master_task("0.38.1", experiment=9, user="nina", priority=20), job_controller=True)
    report = run_pass()
    assert len(report.marked) == 1, (report.waiting, real_cluster.describe("default"))  # one of vision's, priority 80
    real_cluster.wait_for("the reclaiming trial's condition", lambda: any(
        "waiting to reclaim 4 GPUs lent to vision" in m for m in conditions(real_cluster, nina)), timeout=60)
    assert not bound(real_cluster, nina)
    assert len(honour_preemption(real_cluster.api)) == 1  # the master checkpoints it and stops it
    real_cluster.wait_for("nina's trial bound whole once the victim is gone",
                          lambda: (run_pass(), bound(real_cluster, nina))[1], timeout=120, interval=1)
    assert sum(bound(real_cluster, t) for t in vera) == 2
