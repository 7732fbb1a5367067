"""Team queues with the Determined master's pods (`scheduler run` serving them), through the real client against
the emulator: a team below its guarantee takes back what another team borrowed, whole trials, whatever their
priority; the master checkpoints the trial it is asked to preempt, and the team's trial is bound once it is gone."""

from __future__ import annotations

from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.queues import parse_queues
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task_on, honour_preemption, master_task

ON_REAL_CLUSTER_TOO = True

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
    vera = [create_task_on(cluster, master_task("0.38.1", experiment=i + 1, user="vera", priority=80))
            for i in range(3)]
    run_pass(cluster)
    assert all(bound(cluster, task) for task in vera)  # vision uses all 12 GPUs: 8 of them borrowed
    nina = create_task_on(cluster, master_task("0.38.1", experiment=9, user="nina", priority=20))
    report = run_pass(cluster)
    assert len(report.marked) == 1  # one of vision's trials, though of higher priority: nlp has 8 guaranteed
    assert not bound(cluster, nina)
    names = {q["metadata"]["name"] for q in nina.pods}
    messages = [c.get("message", "") for p in cluster.api.items("pods") if p["metadata"]["name"] in names
                for c in p.get("status", {}).get("conditions", [])]
    assert any("waiting to reclaim 4 GPUs lent to vision" in m for m in messages), messages  # where users look
    assert len(honour_preemption(cluster.api)) == 1  # the master checkpoints it and stops it
    run_pass(cluster)
    assert bound(cluster, nina)
    assert sum(bound(cluster, task) for task in vera) == 2


def submit(cluster, group_id: str, user: str, priority: int, sequence: int) -> None:
    from det_k8s.cli.live import entry_for
    from det_k8s.live.queue import QueueStore
    from det_k8s.scheduling.experiments import parse_experiment
    from det_k8s.scheduling.groups import build_group
    from det_k8s.settings import Document, load_settings

    settings = load_settings([Document("s", "maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")]).settings()
    text = f"name: exp-{group_id}\nresources: {{slots_per_trial: 4, priority: {priority}}}\n"
    experiment = parse_experiment(text, f"{group_id}.yaml").get()
    group = build_group(experiment, settings, group_id=group_id, user=user, submitted_at="2026-11-21T12:00:00Z",
                        sequence=sequence)
    QueueStore(cluster.connect(), "default").add(entry_for(experiment, text, settings, group, "default"))


def test_det_k8s_experiments_of_a_team_below_its_guarantee_reclaim_and_say_so(cluster):
    from det_k8s.live.queue import QUEUED, RUNNING, QueueStore

    teams, _ = parse_queues({"queues": [
        {"name": "nlp", "guarantee": {"nvidia.com/gpu": 8}, "members": {"users": ["nina"]}},
        {"name": "vision", "guarantee": {"nvidia.com/gpu": 4}, "members": {"users": ["vera"]}}]})
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))

    def run():
        return LiveScheduler(cluster.connect(), "default", Policy(queues=teams), "c").run_pass()

    for i in range(3):
        submit(cluster, f"vera000{i}", "vera", 90, i)
    assert len(run().placed) == 3
    submit(cluster, "nina0001", "nina", 10, 9)
    report = run()
    (victim,) = report.preempted
    assert report.preempted[victim] == "nina0001" and victim == "vera0002"  # the newest: least work lost
    store = QueueStore(cluster.connect(), "default")
    assert store.get(victim).state == QUEUED and store.get(victim).reason.startswith("reclaimed by nina0001")
    assert store.get("nina0001").reason == "waiting to reclaim 4 GPUs lent to vision (group now stopping: vera0002)"
    again = run()
    assert store.get("nina0001").state == RUNNING, (again.waiting, again.requeued, again.preempted)


def test_a_trial_its_queue_limit_holds_says_so_in_its_pods_condition(cluster):
    limited, _ = parse_queues({"queues": [{"name": "nlp", "limit": {"nvidia.com/gpu": 4}, "members": {"users": ["nina"]}}]})
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    first = create_task_on(cluster, master_task("0.38.1", experiment=1, user="nina"))
    second = create_task_on(cluster, master_task("0.38.1", experiment=2, user="nina"))
    LiveScheduler(cluster.connect(), "default", Policy(queues=limited), "sched", serve="coscheduler").run_pass()
    assert bound(cluster, first) and not bound(cluster, second)
    names = {q["metadata"]["name"] for q in second.pods}
    messages = [c.get("message", "") for p in cluster.api.items("pods") if p["metadata"]["name"] in names
                for c in p.get("status", {}).get("conditions", [])]
    assert any("queue nlp: 4 of 4 GPUs (its limit), the group needs 4" in m for m in messages), messages
