"""Offline `plan` (and the pure pass the live scheduler runs over the master's pods) on snapshots where KAI's,
Volcano's and coscheduling's pods sit beside the master's, and where DRA manages some nodes' GPUs (issue 21)."""

from __future__ import annotations

import copy
import json

from det_k8s.cluster.read import snapshot_from_objects
from det_k8s.scheduling.master import master_groups, planned_forms
from det_k8s.scheduling.model import Policy
from det_k8s.scheduling.plan import schedule
from tests.support.dra_objects import device_class, resource_slice
from tests.support.k8s_emulator import node
from tests.support.master_pods import master_task


def other(name: str, scheduler: str, *, annotations=None, labels=None, node_name=None, gpus: int = 4,
          phase: str = "Running") -> dict:
    spec = {"schedulerName": scheduler,
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec, "status": {"phase": phase if node_name else "Pending"},
            "metadata": {"name": name, "namespace": "ml", "annotations": annotations or {}, "labels": labels or {},
                         "creationTimestamp": "2026-01-01T09:00:00Z"}}


def stored(task) -> list[dict]:
    pods = copy.deepcopy(task.pods)
    for i, pod in enumerate(pods):
        pod["metadata"].update(uid=f"uid-{i}", resourceVersion="1", creationTimestamp="2026-01-01T10:00:00Z")
        pod["spec"]["priority"] = 50
        pod["status"] = {"phase": "Pending"}
    return pods


def cluster() -> list[dict]:
    """Four 4-GPU nodes: KAI holds gpu-0 and gpu-1 (a bound gang), Volcano and coscheduling pods name det-k8s's
    scheduler name and wait; the master's 8-GPU trial (two 4-GPU pods) is queued."""
    return [
        *(node(f"gpu-{i}", gpus=4) for i in range(4)),
        other("kai-0", "kai-scheduler", annotations={"pod-group-name": "pg-kai"}, node_name="gpu-0"),
        other("kai-1", "kai-scheduler", annotations={"pod-group-name": "pg-kai"}, node_name="gpu-1"),
        other("volcano-0", "coscheduler", annotations={"scheduling.k8s.io/group-name": "pg-v"}),
        other("volcano-1", "coscheduler", annotations={"scheduling.k8s.io/group-name": "pg-v"}),
        other("cosched-0", "coscheduler", labels={"scheduling.x-k8s.io/pod-group": "pg-c"}),
        other("native-0", "coscheduler", gpus=2) | {"spec": {**other("native-0", "coscheduler")["spec"],
                                                             "schedulingGroup": {"podGroupName": "pg-n"}}},
        *stored(master_task("0.26.2", slots_per_trial=8)),
    ]


def test_the_pass_binds_none_of_the_other_gangs_pods_and_counts_theirs_as_held():
    objects = cluster()
    snapshot = snapshot_from_objects([{"kind": "List", "items": objects}])
    queue, running = planned_forms(master_groups(objects))
    assert len(queue) == 1  # the master's trial only: Volcano's, coscheduling's and the native group's are not its
    plan = schedule(snapshot, queue, Policy(), running)
    (placement,) = plan.placements.values()
    assert sorted(node for _, node in placement) == ["gpu-2", "gpu-3"]  # gpu-0 and gpu-1 are KAI's
    assert {pod.gang.split(" ")[0] for pod in snapshot.pods if pod.gang} == {"KAI", "Volcano", "coscheduling",
                                                                             "Kubernetes"}


def test_offline_plan_counts_other_gangs_gpus_and_waits_for_dra_saying_so(run_cli, tmp_path):
    snapshot = tmp_path / "snapshot.json"
    objects = [*cluster(), node("dra-0"), node("dra-1"), device_class(), resource_slice("dra-0"),
               resource_slice("dra-1")]
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    small, big = tmp_path / "small.yaml", tmp_path / "big.yaml"
    small.write_text("name: small\nresources: {slots_per_trial: 8}\n")
    big.write_text("name: big\nresources: {slots_per_trial: 32}\n")
    result = run_cli("plan", small, big, "--snapshot", snapshot, "-o", "json")
    assert result.code == 0, result.err
    first, second = json.loads(result.out)["experiments"]
    assert first["status"] == "placed" and sorted(p["node"] for p in first["pods"]) == ["gpu-2", "gpu-3"]
    assert second["status"] == "queued" and second["why"]["code"] == "dra"
    assert second["why"]["dra"] == {"resource": "nvidia.com/gpu", "deviceClass": "gpu.example.com", "nodes": 2,
                                    "devices": 16, "claims": [], "without_dra": "exceeds-cluster"}
    table = run_cli("plan", small, big, "--snapshot", snapshot, "--map")
    assert table.code == 0, table.err
    flat = " ".join(table.out.split())
    assert "2 nodes serve nvidia.com/gpu through DRA" in flat and "managed by DRA" in flat


def test_validate_says_which_nodes_dra_manages_and_what_the_admin_can_do(run_cli, tmp_path):
    from tests.conftest import example

    snapshot = tmp_path / "nodes.json"
    objects = [node("gpu-0", gpus=4), node("dra-0"), node("dra-1"), device_class(), resource_slice("dra-0", 8),
               resource_slice("dra-1", 8)]
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--nodes", snapshot, "-o", "json")
    (problem,) = [p for p in json.loads(result.out)["problems"] if "DRA" in p["message"]]
    assert problem["severity"] == "warning" and problem["key"] == "slotType"
    assert problem["message"].startswith(f"2 node(s) in {snapshot} hold 16 GPU(s) managed by DRA, not a device plugin: "
                                         "dra-0 (8), dra-1 (8)")
    assert "device plugin on those nodes" in problem["hint"] and "kube-scheduler" in problem["hint"]


def test_validate_warns_about_a_pod_spec_with_resource_claims(run_cli, tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("checkpointStorage: {type: s3, bucket: b}\ntaskContainerDefaults:\n  gpuPodSpec:\n    spec:\n"
                    "      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]\n"
                    "      containers: [{name: determined-container, resources: {claims: [{name: gpu}]}}]\n")
    result = run_cli("validate", "-f", site, "-o", "json")
    (problem,) = [p for p in json.loads(result.out)["problems"] if "ResourceClaims" in p["message"]]
    assert problem["severity"] == "warning" and problem["key"] == "taskContainerDefaults.gpuPodSpec.spec.resourceClaims"
    assert problem["location"].endswith("site.yaml:5")  # the resourceClaims line
