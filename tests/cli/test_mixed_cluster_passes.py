"""`det-k8s scheduler run --once` end to end on the documents' deadlocks and on a mixed cluster.

The real entry point, the real `kubernetes` client, the API emulator; pods shaped exactly as masters 0.17.15,
0.26.2 and 0.38.1 create them (`tests/support/master_pods.py`), det-k8s's own experiments in its queue, commands,
DaemonSet pods and a cordoned node. After every pass the cluster is judged the way a user (and kube-scheduler)
would judge it, with the independent model (`tests/support/kube_model.py`): no partly bound or partly created group, no
node over its allocatable, nothing on the cordoned node, and every waiting pod with det-k8s's reason (a
`PodScheduled=False` condition and an event), never containing "nodes are available", and true: a group said to
wait for resources does not fit the cluster as it is.
"""

from __future__ import annotations

import json

import pytest

from det_k8s.live.queue import QueueStore
from tests.live.test_live_scheduler import submit as submit_experiment
from tests.support import kube_model as K
from tests.support.k8s_emulator import node
from tests.support.master_pods import VERSIONS, create_task, honour_preemption, master_task

REWRITTEN = "nodes are available"


def pods_of(cluster, task) -> list[dict]:
    return [p for p in cluster.api.items("pods") if p["metadata"]["labels"].get("determined") == task.allocation]


def daemon_pod(node_name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"node-exporter-{node_name}", "namespace": "kube-system", "labels": {"app": "ne"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-exporter",
                                              "uid": "ds-1", "controller": True}]},
            "spec": {"nodeName": node_name, "containers": [{"name": "ne", "image": "prom/node-exporter",
                                                           "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                     "tolerations": [{"operator": "Exists"}]},
            "status": {"phase": "Running"}}


def objects(cluster) -> list[dict]:
    found = []
    for plural, kind in (("nodes", "Node"), ("pods", "Pod")):
        found += [{**o, "kind": kind} for o in cluster.api.items(plural)]
    return found


def condition(pod: dict) -> dict | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"), None)


def check(cluster, tasks, experiments, cordoned: str | None = None) -> None:
    """The invariants, judged on the emulator's objects after a pass."""
    model = K.Cluster(objects(cluster))
    for name in model.nodes:
        free = model.free(name)
        assert all(free.get(r, 0) >= 0 for r in ("nvidia.com/gpu", "cpu", "memory", "pods")), (name, free)
    if cordoned:
        assert not [p for p, on in model.pods if on == cordoned and "determined" in p["metadata"]["labels"]]
    for task in tasks:
        pods = pods_of(cluster, task)
        bound = [p for p in pods if p["spec"].get("nodeName")]
        assert len(bound) in (0, len(pods)), f"{task.allocation} partly bound: {len(bound)} of {len(pods)}"
        waiting = [p for p in pods if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
        for pod in waiting:
            scheduled = condition(pod)
            assert scheduled and scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable", pod
            assert scheduled["message"].startswith("det-k8s: ") and REWRITTEN not in scheduled["message"]
            events = [e for e in cluster.api.items("events") if e["involvedObject"]["name"] == pod["metadata"]["name"]]
            assert events and all(REWRITTEN not in e["message"] for e in events)
        if waiting and "waiting for resources:" in condition(waiting[0])["message"]:
            # true: the group does not fit the cluster as it is (every eligible node, every assignment)
            schedulable = [n for n, o in model.nodes.items() if not (o.get("spec") or {}).get("unschedulable")]
            assert not K.fits_somewhere(model, waiting, schedulable), (task.allocation, condition(waiting[0]))
    store = QueueStore(cluster.connect(), "default")
    for group_id, size in experiments.items():
        pods = [p for p in cluster.api.items("pods", "default")
                if p["metadata"]["labels"].get("det-k8s.io/group") == group_id
                and not p["metadata"].get("deletionTimestamp")]
        assert len(pods) in (0, size), f"{group_id}: {len(pods)} of {size} pods"
        entry = store.get(group_id)
        if entry.state == "queued":
            assert entry.reason and REWRITTEN not in entry.reason, entry


def once(run_cli, *extra: str):
    result = run_cli("scheduler", "run", "--once", *extra)
    assert result.code == 0, result.err
    assert REWRITTEN not in result.out + result.err
    return result


@pytest.mark.parametrize("version", VERSIONS)
def test_the_documents_first_deadlock_through_the_cli(cluster, run_cli, version):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    task = create_task(cluster.connect(), master_task(version, slots_per_trial=16, max_slots_per_pod=4))
    result = once(run_cli)
    assert "never fits this cluster: needs 16 nvidia.com/gpu" in result.err
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, task))
    check(cluster, [task], {})


@pytest.mark.parametrize("version", VERSIONS)
def test_the_documents_second_deadlock_through_the_cli(cluster, run_cli, version):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    api = cluster.connect()
    first = create_task(api, master_task(version, experiment=1, slots_per_trial=12, max_slots_per_pod=4))
    second = create_task(api, master_task(version, experiment=2, slots_per_trial=12, max_slots_per_pod=4))
    result = once(run_cli)
    assert "3 pod(s) started together" in result.err and "waiting for resources" in result.err
    assert sorted(len([p for p in pods_of(cluster, t) if p["spec"].get("nodeName")]) for t in (first, second)) == [0, 3]
    check(cluster, [first, second], {})
    once(run_cli)  # a second pass changes nothing
    check(cluster, [first, second], {})


def test_a_mixed_cluster_over_several_passes(cluster, run_cli):
    """Four 4-GPU nodes, a cordoned one, a CPU node, a DaemonSet everywhere; det-k8s experiments, trials of three
    master versions, commands. Passes with preemption, the master honouring it, pods finishing in between."""
    for i in range(4):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="16"))
    cluster.api.put(node("gpu-4", gpus=4, cpu="16", unschedulable=True))
    cluster.api.put(node("cpu-0", cpu="16"))
    for name in ("gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "cpu-0"):
        cluster.api.put(daemon_pod(name))
    api = cluster.connect()
    tasks = [
        create_task(api, master_task("0.17.15", experiment=1, slots_per_trial=8, priority=50)),
        create_task(api, master_task("0.26.2", experiment=2, slots_per_trial=4, priority=30)),
        create_task(api, master_task("0.38.1", experiment=3, slots_per_trial=12, priority=20)),
        create_task(api, master_task("0.38.1", task_type="COMMAND", slots_per_trial=1, priority=10)),
        create_task(api, master_task("0.26.2", task_type="COMMAND", slots_per_trial=0, priority=10)),
    ]
    submit_experiment(cluster, "aaaa0001", 4, 1, priority=40)
    submit_experiment(cluster, "bbbb0002", 8, 2, priority=25)
    experiments = {"aaaa0001": 1, "bbbb0002": 2}
    once(run_cli)
    check(cluster, tasks, experiments, cordoned="gpu-4")
    # a high-priority trial and experiment arrive: lower ones are preempted (never a command)
    tasks.append(create_task(api, master_task("0.38.1", experiment=4, slots_per_trial=8, priority=90)))
    submit_experiment(cluster, "cccc0003", 4, 3, priority=95)
    experiments["cccc0003"] = 1
    for _ in range(4):
        once(run_cli, "--preemption")
        check(cluster, tasks, experiments, cordoned="gpu-4")
        commands = [p for t in tasks[3:5] for p in pods_of(cluster, t)]
        assert not any("determined-preemption" in p["metadata"]["labels"] for p in commands)
        honour_preemption(cluster.api)  # the master checkpoints and stops what was marked
        cluster.api.finish_deletions()  # the kubelet stops what was deleted
    bound = {t.allocation for t in tasks if pods_of(cluster, t) and all(p["spec"].get("nodeName")
                                                                        for p in pods_of(cluster, t))}
    assert tasks[5].allocation in bound  # the priority-90 trial runs
    assert QueueStore(api, "default").get("cccc0003").state == "running"


def test_list_describe_and_the_map_answer_as_the_serving_loops_next_pass(cluster, run_cli):
    """While a `scheduler run` loop serves the master's pods (it says so in the Lease), the plans that write nothing
    (`experiment list`, `describe`, `nodes map`, `create --dry-run`) plan the master's groups too: a priority-80
    trial takes gpu-0 before experiment aaaa0001 (20), and they all say so, as the pass then does."""
    from det_k8s.live.scheduler import LiveScheduler
    from det_k8s.scheduling.model import Policy

    cluster.api.put(node("gpu-0", gpus=4))
    LiveScheduler(cluster.connect(), "default", Policy(), "loop", serve="coscheduler", advertise_for=120).run_pass()
    trial = create_task(cluster.connect(), master_task("0.38.1", slots_per_trial=4, priority=80))
    submit_experiment(cluster, "aaaa0001", 4, 1, priority=20)
    listed = run_cli("experiment", "list", "-o", "json")
    (row,) = json.loads(listed.out)["experiments"]
    assert row["position"] == 1 and "no free nvidia.com/gpu" in row["reason"], row
    described = run_cli("experiment", "describe", "aaaa0001")
    assert "Why:" in described.out and "planned" not in described.out, described.out
    result = once(run_cli)
    assert f"aaaa0001: waiting: {row['reason']}" in result.err
    assert all(p["spec"].get("nodeName") == "gpu-0" for p in pods_of(cluster, trial))
