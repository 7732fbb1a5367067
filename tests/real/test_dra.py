"""DRA-managed GPUs and other gang schedulers on the real control plane (Kubernetes 1.37: resource.k8s.io/v1 GA,
DeviceClass `extendedResourceName` GA and locked on): det-k8s refuses to bind a master's pod that only DRA nodes
could hold and says why, while a device-plugin node keeps working in the same pass; pods of other gang mechanisms
are never bound, and those already bound hold their GPUs."""

from __future__ import annotations

import json

import pytest

from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.conftest import example
from tests.support.dra_objects import device_class, resource_slice
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, master_task

pytestmark = pytest.mark.real


def foreign(name: str, scheduler: str, *, annotations=None, labels=None, node_name=None, gpus: int = 4) -> dict:
    spec = {"schedulerName": scheduler,
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}, "labels": labels or {}}}


def condition(pod: dict) -> str:
    return next((c.get("message", "") for c in pod["status"].get("conditions") or ()
                 if c["type"] == "PodScheduled" and c["status"] == "False"), "")


def test_dra_nodes_are_refused_with_a_reason_while_device_plugin_nodes_work_and_other_gangs_are_left_alone(
        real_cluster, run_cli):
    for name, gpus in (("dp-0", 4), ("dp-1", 4), ("dra-0", 0), ("dra-1", 0)):
        real_cluster.api.put(node(name, gpus=gpus))
    real_cluster.api.put(device_class())  # the API server validates them: the fields are the real ones
    for name in ("dra-0", "dra-1"):
        real_cluster.api.put(resource_slice(name, 8))
    # a KAI gang's pod already bound to dp-1 holds its 4 GPUs; a Volcano and a coscheduling pod name det-k8s's
    # scheduler but belong to their own gangs: never bound by det-k8s
    real_cluster.api.put(foreign("kai-0", "kai-scheduler", annotations={"pod-group-name": "pg-kai"}, node_name="dp-1"))
    real_cluster.api.put(foreign("volcano-0", "coscheduler", annotations={"scheduling.k8s.io/group-name": "pg-v"},
                                 gpus=1))
    real_cluster.api.put(foreign("cosched-0", "coscheduler", labels={"scheduling.x-k8s.io/pod-group": "pg-c"}, gpus=1))
    api = real_cluster.connect("default")
    small = create_task(api, master_task("0.26.2", experiment=1, slots_per_trial=4))
    large = create_task(api, master_task("0.26.2", experiment=2, slots_per_trial=8, max_slots_per_pod=8))
    try:
        report = LiveScheduler(api, "default", Policy(), "sched", serve="coscheduler").run_pass()
        pods = {p["metadata"]["name"]: p for p in real_cluster.api.items("pods")}
        assert {pods[n]["spec"].get("nodeName") for n in small.names} == {"dp-0"}  # dp-1's GPUs are KAI's
        assert not any(pods[n]["spec"].get("nodeName") for n in large.names)
        assert not pods["volcano-0"]["spec"].get("nodeName") and not pods["cosched-0"]["spec"].get("nodeName")
        (text,) = [t for t in report.waiting.values() if "gang" in t or "pod" in t]
        assert "2 nodes serve nvidia.com/gpu through DRA (DeviceClass gpu.example.com, 16 devices)" in text
        assert "run the device plugin on those nodes" in text
        for name in large.names:  # the same line on the pods, where users look
            assert "through DRA" in condition(pods[name])
        events = [e for e in real_cluster.api.items("events") if e["involvedObject"]["name"] in large.names]
        assert any(e["reason"] == "GangNeedsDRA" and e["type"] == "Warning" for e in events), events
        doctor = run_cli("doctor", "-o", "json")
        data = json.loads(doctor.out)
        assert [(n["node"], n["gpus"], n["deviceClass"]) for n in data["draNodes"]] == [
            ("dra-0", 8, "gpu.example.com"), ("dra-1", 8, "gpu.example.com")]
        rows = {row["name"]: row for row in data["schedulers"]}
        assert rows["coscheduler"]["servedByDetK8s"] and rows["coscheduler"]["otherGangs"] == {
            "Volcano": 1, "coscheduling": 1}
        assert rows["kai-scheduler"]["bound"] == 1 and rows["kai-scheduler"]["otherGangs"] == {"KAI": 1}
        nodes_map = run_cli("nodes", "map", "-o", "json")
        assert nodes_map.code == 0, nodes_map.err
        cells = {n["name"]: n for n in json.loads(nodes_map.out)["nodes"]}
        assert [c["kind"] for c in cells["dra-0"]["cells"]] == ["dra"] * 8
        validated = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--kube-context", "real", "-o", "json")
        (problem,) = [p for p in json.loads(validated.out)["problems"] if "DRA" in p["message"]]
        assert problem["message"].startswith("2 node(s) in cluster real hold 16 GPU(s) managed by DRA"), problem
        assert "device plugin on those nodes" in problem["hint"]
    except AssertionError:
        print(real_cluster.describe("default"))
        raise


def test_the_loops_watch_follows_device_classes_and_slices(real_cluster):
    """`scheduler run`'s watch (ClusterView) lists and watches them where served: a slice published later reaches the
    next pass's snapshot, with no problem reported."""
    import time

    from det_k8s.kube.watch import ClusterView

    real_cluster.api.put(node("dra-0"))
    real_cluster.api.put(device_class())
    view = ClusterView(real_cluster.connect("default"), "coscheduler", queue_namespace="default").start()
    try:
        assert view.wait_synced(timeout=60)
        assert [k.name for k in view.state().snapshot.device_classes] == ["gpu.example.com"]
        real_cluster.api.put(resource_slice("dra-0", 4))
        deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion
        while view.state().snapshot.devices.dra_nodes("nvidia.com/gpu") != {"dra-0": 4}:
            assert time.monotonic() < deadline, "the slice never reached the view"
            time.sleep(0.1)
        assert view.problems == []
    finally:
        view.stop()


def test_experiment_create_never_pins_a_group_that_only_dra_nodes_could_hold(real_cluster, run_cli, tmp_path):
    """det-k8s's own experiments: the 16-GPU one waits (queued, not rejected: kube-scheduler could place it with
    claims) with no pod created, while the 4-GPU one is pinned to the device-plugin node in the same cluster."""
    import yaml

    from tests.conftest import example

    for name, gpus in (("dp-0", 4), ("dra-0", 0), ("dra-1", 0)):
        real_cluster.api.put(node(name, gpus=gpus, cpu="31910m", memory="240Gi"))
    real_cluster.api.put(device_class())
    for name in ("dra-0", "dra-1"):
        real_cluster.api.put(resource_slice(name, 8))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    experiments = example("experiments")
    big = run_cli("experiment", "create", experiments / "distributed-16gpu.yaml", "-f", settings)
    try:
        assert big.code == 0, big.err
        assert real_cluster.api.items("pods") == []
        small = run_cli("experiment", "create", experiments / "small-4gpu.yaml", "-f", settings)
        assert small.code == 0, small.err
        pods = real_cluster.api.items("pods")
        assert pods  # the 4-GPU experiment's
        pinned = {str(p["spec"]["affinity"]["nodeAffinity"]) for p in pods}
        assert all("dp-0" in text for text in pinned), pinned
        listing = json.loads(run_cli("experiment", "list", "-o", "json").out)
        waiting = [r for r in listing["experiments"] if r["name"] == "distributed-16gpu"]
        assert waiting and "through DRA" in yaml.safe_dump(waiting[0]), waiting
    except AssertionError:
        print(real_cluster.describe("default"))
        raise
