"""`plan --snapshot --preemption` makes the Determined master's running trials victims as the live pass does (issue 40):
for a strictly higher-priority experiment in the trials' namespace, and for a team queue below its guarantee reclaiming
what the trials borrowed. Before, `plan` built its running groups from det-k8s's own pods only and answered "no
lower-priority group in this queue to evict"."""

from __future__ import annotations

import copy
import json

import pytest

from tests.support.k8s_emulator import node
from tests.support.master_pods import VERSIONS, master_task

EXPERIMENT = """\
name: {name}
resources: {{slots_per_trial: 8, priority: {priority}}}
entrypoint: python3 train.py
searcher: {{name: single, metric: loss, max_length: {{batches: 10}}}}
"""
QUEUES = """\
version: 1
defaultQueue: shared
queues:
- name: team-a
  guarantee: {nvidia.com/gpu: 8}
  members: {namespaces: [team-a]}
- name: shared
"""


def bound(pod: dict, node_name: str, priority: int) -> dict:
    """A task pod as the API server holds it once det-k8s bound it: its node, its resolved priority, running."""
    pod = copy.deepcopy(pod)
    pod["kind"] = "Pod"
    pod["spec"]["nodeName"] = node_name
    pod["spec"]["priority"] = priority
    pod["metadata"].setdefault("uid", f"uid-{pod['metadata']['name']}")
    pod["metadata"].setdefault("creationTimestamp", "2026-12-07T10:00:00Z")
    pod["status"] = {"phase": "Running", "startTime": "2026-12-07T10:00:05Z",
                     "conditions": [{"type": "PodScheduled", "status": "True",
                                     "lastTransitionTime": "2026-12-07T10:00:01Z"}]}
    return pod


def snapshot_with_trials(tmp_path, version: str, priority: int) -> tuple:
    """Two 4-GPU nodes, both held by one 8-GPU trial of the master (priority `priority`, namespace default)."""
    task = master_task(version, experiment=7, slots_per_trial=8, priority=priority)
    pods = [bound(p, f"gpu-{i}", priority) for i, p in enumerate(task.pods)]
    objects = [node(f"gpu-{i}", gpus=4) for i in range(2)] + pods
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path, task


def experiment(tmp_path, priority: int):
    path = tmp_path / "high.yaml"
    path.write_text(EXPERIMENT.format(name="high", priority=priority))
    return path


@pytest.mark.parametrize("version", VERSIONS)
def test_a_higher_priority_experiment_preempts_the_masters_trial_in_its_namespace(run_cli, tmp_path, version):
    snapshot, task = snapshot_with_trials(tmp_path, version, priority=10)
    result = run_cli("plan", experiment(tmp_path, 90), "--snapshot", snapshot, "--preemption", "-o", "json")
    assert result.code == 0, result.err
    answer = json.loads(result.out)
    (record,) = answer["experiments"]
    assert record["status"] == "placed", record
    (victim,) = answer["victims"]
    assert victim["experiment"] == "exp 7 trial 1" and victim["priority"] == 10 and victim["pods"] == len(task.pods)
    assert victim["namespace"] == "default" and victim["for"] == ["high"]
    assert record["waits_for"] == [{"group": victim["group"], "experiment": "exp 7 trial 1", "victim": True}]
    table = run_cli("plan", experiment(tmp_path, 90), "--snapshot", snapshot, "--preemption")
    assert "exp 7 trial 1" in table.out and "1 running group(s) preempted" in table.err + table.out


def test_an_equal_priority_experiment_preempts_no_trial_and_says_why(run_cli, tmp_path):
    snapshot, _ = snapshot_with_trials(tmp_path, "0.38.1", priority=50)
    answer = json.loads(run_cli("plan", experiment(tmp_path, 50), "--snapshot", snapshot, "--preemption",
                                "-o", "json").out)
    assert answer["victims"] == [] and answer["experiments"][0]["status"] == "queued"


def test_without_serving_the_masters_scheduler_name_the_trials_only_hold_capacity(run_cli, tmp_path):
    snapshot, _ = snapshot_with_trials(tmp_path, "0.38.1", priority=10)
    answer = json.loads(run_cli("plan", experiment(tmp_path, 90), "--snapshot", snapshot, "--preemption",
                                "--scheduler-name", "", "-o", "json").out)
    assert answer["victims"] == [] and answer["experiments"][0]["status"] == "queued"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_queue_below_its_guarantee_reclaims_what_the_masters_trials_borrowed(run_cli, tmp_path, version):
    snapshot, _ = snapshot_with_trials(tmp_path, version, priority=50)
    policy = tmp_path / "queues.yaml"
    policy.write_text(QUEUES)
    result = run_cli("-n", "team-a", "plan", experiment(tmp_path, 50), "--snapshot", snapshot, "--policy", policy,
                     "-o", "json")
    assert result.code == 0, result.err
    answer = json.loads(result.out)
    (record,) = answer["experiments"]
    assert record["status"] == "placed", record
    assert record["reclaims"] and record["reclaims"][0]["from"] == "shared"
    (victim,) = answer["victims"]
    assert victim["experiment"] == "exp 7 trial 1" and victim["namespace"] == "default"


def test_a_partly_bound_gang_is_left_to_the_serving_pass_and_said(run_cli, tmp_path):
    task = master_task("0.26.2", experiment=8, slots_per_trial=8, priority=10)
    first = bound(task.pods[0], "gpu-0", 10)
    second = copy.deepcopy(task.pods[1])
    second["kind"] = "Pod"
    second["spec"]["priority"] = 10
    second["status"] = {"phase": "Pending"}
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"kind": "List", "items": [node("gpu-0", gpus=4), node("gpu-1", gpus=4), first,
                                                          second]}))
    result = run_cli("plan", experiment(tmp_path, 90), "--snapshot", path, "--preemption", "-o", "json")
    assert result.code == 0, result.err
    assert "is partly bound: the pass that serves it deletes its pods first (Determined restarts it)" in result.err
    answer = json.loads(result.out)
    assert answer["victims"] == []  # never a victim: the serving pass tears it down (its pod still holds gpu-0 now)
    assert answer["experiments"][0]["status"] == "queued"


def test_a_gang_bound_to_a_node_the_snapshot_lacks_is_said(run_cli, tmp_path):
    task = master_task("0.38.1", experiment=9, slots_per_trial=4, priority=10)
    pods = [bound(p, "gone-node", 10) for p in task.pods]
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"kind": "List", "items": [node("gpu-0", gpus=4), *pods]}))
    result = run_cli("plan", experiment(tmp_path, 90), "--snapshot", path, "-o", "json")
    assert result.code == 0, result.err
    assert "is bound to node(s) gone-node not in the snapshot" in result.err
