"""Team queues with the Determined master's pods (`scheduler run` serving them), through the real client against
the emulator: a team below its guarantee takes back what another team borrowed, whole trials, whatever their
priority; the master checkpoints the trial it is asked to preempt, and the team's trial is bound once it is gone."""

from __future__ import annotations

from det_k8s.kube.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.queues import parse_queues
from tests.k8s_emulator import node
from tests.master_pods import create_task, honour_preemption, master_task

TEAMS, _ = parse_queues({"queues": [
    {"name": "nlp", "guarantee": {"nvidia.com/gpu": 8}, "members": {"users": ["nina"]}},
    {"name": "vision", "guarantee": {"nvidia.com/gpu": 4}, "members": {"users": ["vera"]}},
]})
POLICY = Policy(queues=TEAMS)


def run_pass(cluster):
    return LiveScheduler(cluster.connect(), "default", POLICY, "sched", serve="coscheduler").run_pass()


def bound(cluster, task) -> bool:
    pods = [p for p in cluster.api.items("pods") if p["metadata"]["name"] in {q["metadata"]["name"] for q in task.pods}]
    return bool(pods) and all(p["spec"].get("nodeName") for p in pods)


def test_a_team_below_its_guarantee_reclaims_a_borrowed_trial_of_higher_priority(cluster):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    vera = [create_task(cluster.connect(), master_task("0.38.1", experiment=i + 1, user="vera", priority=80))
            for i in range(3)]
    run_pass(cluster)
    assert all(bound(cluster, task) for task in vera)  # vision uses all 12 GPUs: 8 of them borrowed
    nina = create_task(cluster.connect(), master_task("0.38.1", experiment=9, user="nina", priority=20))
    report = run_pass(cluster)
    assert len(report.marked) == 1  # one of vision's trials, though of higher priority: nlp has 8 guaranteed
    assert not bound(cluster, nina)
    assert len(honour_preemption(cluster.api)) == 1  # the master checkpoints it and stops it
    run_pass(cluster)
    assert bound(cluster, nina)
    assert sum(bound(cluster, task) for task in vera) == 2
