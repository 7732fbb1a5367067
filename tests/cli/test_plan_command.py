"""`det-k8s plan` through the real entry point: who runs where, who waits and why, exit codes, exact JSON."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import example

EXPERIMENTS = example("experiments")
SNAPSHOTS = example("snapshots")
TWELVE_A, TWELVE_B = EXPERIMENTS / "distributed-12gpu-a.yaml", EXPERIMENTS / "distributed-12gpu-b.yaml"


def plan_json(run_cli, *args):
    result = run_cli("plan", *args, "-o", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_the_16_gpu_deadlock_is_rejected_with_both_numbers(run_cli):
    result = run_cli(
        "plan", EXPERIMENTS / "distributed-16gpu.yaml", "--snapshot", SNAPSHOTS / "three-4gpu-nodes.yaml"
    )
    assert result.code == 0
    assert ("distributed-16gpu   rejected   never fits this cluster: needs 16 nvidia.com/gpu (4 pods x 4), "
            "cluster has 12 on 3 eligible nodes") in result.out
    assert "0 placed, 0 queued, 1 rejected" in result.err


def test_two_12_gpu_experiments_exact_json(run_cli):
    data = plan_json(run_cli, TWELVE_A, TWELVE_B, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml")
    assert list(data) == ["namespace", "experiments", "victims", "warnings"]
    assert (data["namespace"], data["victims"], data["warnings"]) == ("default", [], [])
    first, second = data["experiments"]
    assert list(first) == ["name", "status", "reason", "pods"]
    assert list(second) == ["name", "status", "reason", "pods", "why"]
    assert (first["name"], first["status"], first["reason"]) == ("distributed-12gpu-a", "placed", "")
    assert [list(pod) for pod in first["pods"]] == [["name", "node", "slots"]] * 3
    assert sorted(pod["node"] for pod in first["pods"]) == ["gpu-a", "gpu-a", "gpu-b"]
    assert {pod["slots"] for pod in first["pods"]} == {4}
    assert all(pod["name"].startswith("distributed-12gpu-a-") for pod in first["pods"])
    assert (second["status"], second["pods"]) == ("queued", [])
    assert second["reason"].startswith("needs 3 pods x 4 nvidia.com/gpu; no free nvidia.com/gpu")


def test_the_table_shows_pods_on_nodes_then_who_waits_and_why(run_cli):
    result = run_cli("plan", TWELVE_A, TWELVE_B, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml")
    lines = result.out.splitlines()
    assert lines[0] == "Placed (all pods start together)"
    assert lines[1].split() == ["EXPERIMENT", "POD", "NODE", "SLOTS"]
    assert lines[2].split()[0] == "distributed-12gpu-a" and lines[2].split()[2:] == ["gpu-b", "4"]
    assert "Not placed" in lines and any(
        line.startswith("distributed-12gpu-b   queued   needs 3 pods") for line in lines
    )


def test_yaml_output_has_the_same_records(run_cli):
    result = run_cli("plan", TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "-o", "yaml")
    assert yaml.safe_load(result.out)["experiments"][0]["status"] == "placed"


def test_without_settings_max_slots_per_pod_is_the_gcd_of_the_gpu_nodes_with_a_warning(run_cli):
    result = run_cli("plan", TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "-o", "json")
    assert (
        "warning: no settings file given: assuming maxSlotsPerPod 4, the greatest common divisor of the GPU "
        "node sizes (4, 8)"
    ) in result.err
    result = run_cli(
        "plan",
        TWELVE_A,
        "--snapshot",
        SNAPSHOTS / "twelve-gpus.yaml",
        "--set",
        "maxSlotsPerPod=2",
        "-o",
        "json",
    )
    assert "warning" not in result.err and len(json.loads(result.out)["experiments"][0]["pods"]) == 6


def test_slots_that_do_not_divide_are_rejected_with_the_reason(run_cli, tmp_path):
    six = tmp_path / "six.yaml"
    six.write_text("name: six\nresources: {slots_per_trial: 6}\n")
    data = plan_json(run_cli, six, TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml")
    reason = "slots_per_trial 6 is not a multiple of maxSlotsPerPod 4; use 4 or 8 slots"
    assert data["experiments"][0] == {
        "name": "six",
        "status": "rejected",
        "pods": [],
        "reason": reason,
        "why": {"code": "not-divisible", "line": reason, "never_fits": True, "ask": {"pods": 0, "per_pod": {}},
                "resource": "nvidia.com/gpu", "limiting": None, "detail": reason},
    }
    assert data["experiments"][1]["status"] == "placed"


def test_why_pending_on_the_mixed_cluster_names_exclusions_and_reserves_nothing_for_new_groups(run_cli):
    data = plan_json(
        run_cli,
        EXPERIMENTS / "distributed-16gpu.yaml",
        EXPERIMENTS / "small-4gpu.yaml",
        "--snapshot",
        SNAPSHOTS / "mixed-cluster.yaml",
        "-f",
        example("gpu-cluster.yaml"),
    )
    big, small = data["experiments"]
    assert big["status"] == small["status"] == "queued"
    assert "largest free blocks: gpu-2 2" in big["reason"]
    assert "reserved" not in big["reason"]  # just submitted: it has not waited reserve_after yet
    assert (
        "5 nodes excluded: 1 cordoned, 1 not ready, 1 taint dedicated=inference:NoSchedule, "
        "1 taint node-role.kubernetes.io/control-plane:NoSchedule, 1 no nvidia.com/gpu"
    ) in big["reason"]
    assert "1 group ahead: distributed-16gpu" in small["reason"]


def test_preemption_evicts_the_lowest_priority_group_whole(run_cli):
    args = (
        EXPERIMENTS / "high-priority-8gpu.yaml",
        "--snapshot",
        SNAPSHOTS / "mixed-cluster.yaml",
        "-f",
        example("gpu-cluster.yaml"),
        "-n",
        "determined",
    )
    assert plan_json(run_cli, *args)["experiments"][0]["status"] == "queued"
    (record,) = plan_json(run_cli, *args, "--preemption")["experiments"]
    assert record["status"] == "placed"
    assert record["reason"] == "after preempting hp-sweep-trial-3 (priority 10)"
    table = run_cli("plan", *args, "--preemption")
    assert "Preempted (whole groups, returned to the queue)" in table.out
    assert ("7d3f0c2a91b4   hp-sweep-trial-3   determined   bob    10         2      high-priority-8gpu"
            in table.out)
    data = plan_json(run_cli, *args, "--preemption")
    assert data["victims"] == [{"group": "7d3f0c2a91b4", "experiment": "hp-sweep-trial-3", "namespace": "determined",
                                "user": "bob", "priority": 10, "pods": 2, "for": ["high-priority-8gpu"]}]
    assert data["experiments"][0]["waits_for"] == [
        {"group": "7d3f0c2a91b4", "experiment": "hp-sweep-trial-3", "victim": True}]


def test_plan_preempts_only_the_queue_namespace_like_the_live_scheduler(run_cli):
    # the mixed cluster's det-k8s groups run in namespace determined: planning for default evicts none of them
    data = plan_json(run_cli, EXPERIMENTS / "high-priority-8gpu.yaml", "--snapshot", SNAPSHOTS / "mixed-cluster.yaml",
                     "-f", example("gpu-cluster.yaml"), "--preemption")
    (record,) = data["experiments"]
    assert (record["status"], data["victims"]) == ("queued", [])
    assert record["why"]["preemption"] == {"outcome": "none-lower", "lower_priority_groups": 0, "would_start": None}
    assert "preemption: no lower-priority group in this queue to evict" in record["reason"]


def test_default_scheduler_preemption_in_the_settings_switches_preemption_on(run_cli):
    data = plan_json(
        run_cli,
        EXPERIMENTS / "high-priority-8gpu.yaml",
        "--snapshot",
        SNAPSHOTS / "mixed-cluster.yaml",
        "-f",
        example("gpu-cluster.yaml"),
        "--set",
        "defaultScheduler=preemption",
        "--set",
        "appVersion=0.35.1",  # the last release line with the preemption scheduler
        "-n",
        "determined",
    )
    assert data["experiments"][0]["status"] == "placed"


def test_autoscaling_turns_a_rejection_into_a_wait(run_cli):
    data = plan_json(
        run_cli,
        EXPERIMENTS / "distributed-16gpu.yaml",
        "--snapshot",
        SNAPSHOTS / "three-4gpu-nodes.yaml",
        "--autoscaling",
    )
    assert data["experiments"][0]["status"] == "queued"
    assert "waiting for nodes to be added" in data["experiments"][0]["reason"]


def test_cpu_slots_on_a_cpu_cluster(run_cli):
    data = plan_json(
        run_cli,
        EXPERIMENTS / "cpu-experiment.yaml",
        "--snapshot",
        example("nodes-cpu.yaml"),
        "-f",
        example("cpu-azure.yaml"),
    )
    assert [pod["slots"] for pod in data["experiments"][0]["pods"]] == [1, 1]


def test_a_json_snapshot_as_kubectl_prints_it(run_cli, tmp_path):
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(yaml.safe_load((SNAPSHOTS / "twelve-gpus.yaml").read_text()), indent=4))
    assert plan_json(run_cli, TWELVE_A, "--snapshot", snapshot)["experiments"][0]["status"] == "placed"


def test_an_invalid_experiment_reports_every_error_with_file_and_line(run_cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nresources:\n  slots_per_trial: eight\n  priority: 0\n")
    result = run_cli("plan", bad, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml")
    assert result.code == 1 and result.out == ""
    assert result.err.splitlines()[-2:] == [
        f"error: resources.slots_per_trial: expected an integer, found a string ({bad}:3)",
        f"error: resources.priority: must be between 1 and 99, found 0 ({bad}:4)",
    ]
    assert "Traceback" not in result.err


def test_a_misspelt_key_det_k8s_acts_on_is_an_error_not_a_one_gpu_plan(run_cli, tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text("name: typo\nresources:\n  slot_per_trial: 16\n")
    result = run_cli("plan", typo, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml")
    assert (result.code, result.out) == (1, "")
    assert result.err.splitlines()[-1] == (
        f"error: resources.slot_per_trial: not a key of Determined 0.38.1's experiment config: its master refuses "
        f"the experiment; did you mean resources.slots_per_trial? ({typo}:3)")


def test_keys_are_checked_against_the_appversion_of_the_settings(run_cli, tmp_path):
    experiment = tmp_path / "ws.yaml"
    experiment.write_text("name: ws\nworkspace: research\nresources: {slots_per_trial: 4}\n")
    settings = tmp_path / "site.yaml"
    settings.write_text("maxSlotsPerPod: 4\nappVersion: 0.17.15\n")
    old = run_cli("plan", experiment, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "-f", settings)
    assert old.code == 1 and f"error: workspace: Determined 0.17.15 has no such key (the schemas of 0.26.2 and " \
        f"v0.38.1 have it): its master refuses the experiment; set appVersion to a release that has it, or remove " \
        f"it ({experiment}:2)" in old.err
    new = plan_json(run_cli, experiment, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "--set", "maxSlotsPerPod=4")
    assert new["experiments"][0]["status"] == "placed"  # the default release, 0.38.1, has workspace


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("missing.yaml", "--snapshot", SNAPSHOTS / "twelve-gpus.yaml"),
            "error: missing.yaml: no such experiment file",
        ),
        ((TWELVE_A, "--snapshot", "nowhere.yaml"), "error: nowhere.yaml: no such snapshot file"),
    ],
)
def test_missing_files_are_one_error_line(run_cli, args, message):
    result = run_cli("plan", *args)
    assert (result.code, result.err.strip().splitlines()[-1]) == (1, message)


def test_a_snapshot_that_is_not_a_list_of_nodes_and_pods(run_cli, tmp_path):
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("just: a mapping\n")
    result = run_cli("plan", TWELVE_A, "--snapshot", snapshot)
    assert result.code == 1
    assert result.err.strip() == (
        f"error: {snapshot}: expected a Kubernetes List of Nodes and Pods (as "
        "`kubectl get nodes,pods -A -o yaml` prints it)"
    )


def test_invalid_settings_exit_1_naming_the_key(run_cli):
    result = run_cli("plan", TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "--set", "slotType=tpu")
    assert result.code == 1 and "error: slotType: must be one of gpu, cuda, cpu, rocm" in result.err


@pytest.mark.parametrize(
    "args",
    [
        ("--snapshot", str(SNAPSHOTS / "twelve-gpus.yaml")),
        (str(TWELVE_A),),
        (str(TWELVE_A), "--snapshot", str(SNAPSHOTS / "twelve-gpus.yaml"), "-o", "xml"),
    ],
)
def test_usage_errors_exit_2(run_cli, args):
    assert run_cli("plan", *args).code == 2


def test_a_snapshot_from_a_device_is_refused_at_once(run_cli):
    result = run_cli("plan", EXPERIMENTS / "distributed-16gpu.yaml", "--snapshot", "/dev/zero")
    assert (result.code, result.err.strip()) == (
        1, "error: /dev/zero: a device, not a regular file; det-k8s reads only regular files and stdin; save it to "
           "a file, or pipe it in and pass -")



def test_snapshots_that_cannot_be_right_are_said_so(run_cli, tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    result = run_cli("plan", TWELVE_A, "--snapshot", empty)
    assert result.code == 1 and f"error: {empty}: no Node objects in it; nothing can be checked or planned" in result.err
    bare = tmp_path / "nodes-only.yaml"
    bare.write_text(yaml.safe_dump({"kind": "List", "items": [
        item for item in yaml.safe_load((SNAPSHOTS / "twelve-gpus.yaml").read_text())["items"] if item["kind"] == "Node"]}))
    result = run_cli("plan", TWELVE_A, "--snapshot", bare)
    assert result.code == 0
    assert f"warning: {bare} lists 2 node(s) and no pods, so every node looks free" in result.err


def test_topology_and_admission_flags_reach_the_plan(run_cli, tmp_path):
    snapshot = tmp_path / "zones.yaml"
    nodes = [{"kind": "Node", "metadata": {"name": f"n{i}", "labels": {"rack": f"r{i // 2}"}},
              "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
              "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4", "pods": "110"}}}
             for i in range(4)]
    agent = {"kind": "Pod", "metadata": {"name": "agent", "namespace": "kube-system"},
             "spec": {"nodeName": "n0", "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]},
             "status": {"phase": "Running"}}
    snapshot.write_text(yaml.safe_dump({"kind": "List", "items": [*nodes, agent]}))
    args = (EXPERIMENTS / "distributed-12gpu-a.yaml", "--snapshot", snapshot, "--set", "maxSlotsPerPod=4")
    (record,) = plan_json(run_cli, *args)["experiments"]  # the GPU taint: no plugin detected, every node excluded
    assert record["status"] == "rejected" and "4 taint nvidia.com/gpu=present:NoSchedule" in record["reason"]
    (record,) = plan_json(run_cli, *args, "--extended-resource-toleration", "--topology-key", "rack")["experiments"]
    assert record["status"] == "placed"
    (record,) = plan_json(run_cli, *args, "--extended-resource-toleration", "--topology-key", "rack",
                          "--require-topology")["experiments"]
    assert record["status"] == "rejected" and record["why"]["code"] == "exceeds-domain"  # 3 pods x 4, racks of 8
    assert record["why"]["topology"] == {"key": "rack", "best_domain": "r0", "pods_there": 2}
    assert record["reason"].startswith("never fits one rack (needs 3 pods x 4 nvidia.com/gpu), which the topology "
                                       "policy requires; the largest, r0 holds at most 2 of its 3 pods")


def test_plan_reads_the_resource_quotas_in_the_snapshot(run_cli, tmp_path):
    """`kubectl get nodes,pods,resourcequotas -A -o yaml` as the snapshot: a quota the group would exceed holds it."""
    cluster = yaml.safe_load((SNAPSHOTS / "twelve-gpus.yaml").read_text())
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": "default"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
             "status": {"hard": {"requests.nvidia.com/gpu": "8"}, "used": {"requests.nvidia.com/gpu": "0"}}}
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(yaml.safe_dump({**cluster, "items": [*cluster["items"], quota]}))
    data = plan_json(run_cli, TWELVE_A, "--snapshot", snapshot)
    (record,) = data["experiments"]
    assert record["status"] == "queued"
    assert record["reason"].startswith("namespace default: quota gpu-quota: requests.nvidia.com/gpu 0 of 8 used, "
                                       "the group needs 12 (more than the quota allows in all)")
    assert record["why"]["code"] == "quota" and record["why"]["quota"]["hard"] == "8"
    elsewhere = plan_json(run_cli, TWELVE_A, "--snapshot", snapshot, "-n", "other")
    assert elsewhere["experiments"][0]["status"] == "placed"  # the quota is default's
