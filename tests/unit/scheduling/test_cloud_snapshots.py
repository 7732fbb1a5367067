"""Planning on real-shaped GKE, EKS and AKS snapshots (tests/data/clouds: node labels, taints and
allocatable as those clouds publish them, their system DaemonSets), end to end: experiment files
and settings through `build_group`, the plan, the very pod manifests det-k8s would create (pinned
by node affinity), each checked by the independent model as the cluster's admission leaves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from det_k8s.cluster.admission import detect
from det_k8s.cluster.read import snapshot_from_objects
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.groups import build_group, pod_manifests
from det_k8s.scheduling.model import Plan, Policy, ReasonCode
from det_k8s.scheduling.plan import running_in, schedule
from det_k8s.settings import Document, load_settings
from tests.support import kube_model as kube

CLOUDS = Path(__file__).parents[2] / "data" / "clouds"
NS = "research"
ZONE = "topology.kubernetes.io/zone"


def objects(cloud: str) -> list[dict[str, Any]]:
    return yaml.safe_load((CLOUDS / f"{cloud}.yaml").read_text())["items"]


def settings(extra: str = "", slots: int = 8) -> Any:
    text = f"maxSlotsPerPod: {slots}\n" + extra
    return load_settings([Document("site.yaml", text)]).settings()


def experiment(slots: int, name: str = "train", priority: int = 50, pod_spec: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {"name": name, "resources": {"slots_per_trial": slots, "priority": priority},
                            "entrypoint": "python3 train.py"}
    if pod_spec:
        body["environment"] = {"pod_spec": pod_spec}
    return parse_experiment(yaml.safe_dump(body), f"{name}.yaml").get()


def plan_on(cloud: str, experiments: list[Any], site: Any = None, policy: Policy | None = None,
            plugin: bool = True) -> tuple[Plan, dict[str, list[dict[str, Any]]]]:
    """Plan, then build each placed group's manifests and replay them against the independent model."""
    raw = objects(cloud)
    snapshot = snapshot_from_objects([{"kind": "List", "items": raw}])
    site = site or settings()
    groups = [build_group(e, site, group_id=f"g{i}", user="alice", submitted_at="2026-11-21T12:00:00Z",
                          sequence=i, namespace=NS) for i, e in enumerate(experiments)]
    result = schedule(snapshot, groups, policy or Policy(), running_in(snapshot, NS))
    cluster = kube.Cluster(raw)
    manifests = {}
    for gid in result.order:
        if gid not in result.placements or result.preempting.get(gid):
            continue
        group = next(g for g in groups if g.id == gid)
        exp = experiments[groups.index(group)]
        manifests[gid] = pod_manifests(group, exp, site, result.placements[gid], NS)
        for manifest in manifests[gid]:
            where = kube.where(manifest)
            assert where == dict(result.placements[gid])[manifest["metadata"]["name"]]
            admitted = kube.admitted(manifest, plugin)
            assert cluster.refusal(admitted, where) is None
            cluster.add(admitted, where)
    return result, manifests


def zones(cloud: str, result: Plan, gid: str) -> set[str]:
    labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objects(cloud) if o["kind"] == "Node"}
    return {labels[node][ZONE] for _, node in result.placements[gid]}


def test_gke_runs_the_admission_plugin_and_its_gpu_taint_is_tolerated():
    snapshot = snapshot_from_objects([{"kind": "List", "items": objects("gke")}])
    assert detect(snapshot).extended_resource_toleration
    assert detect(snapshot).why.startswith("GKE (node gke-ml-a100-pool-8f2a1c3e-x7kd)")
    result, _ = plan_on("gke", [experiment(16, "two-nodes")])  # 2 pods x 8: only one node of 8 GPUs is free
    assert result.waiting["g0"].code is ReasonCode.INSUFFICIENT
    result, _ = plan_on("gke", [experiment(8)])
    assert [node for _, node in result.placements["g0"]] == ["gke-ml-a100-pool-8f2a1c3e-q2mv"]


def test_gke_groups_stay_within_one_zone_when_they_fit_there():
    result, _ = plan_on("gke", [experiment(8, "fits-a")], settings(slots=4))
    assert zones("gke", result, "g0") == {"us-central1-a"}  # 2 pods x 4: zone a has 8 GPUs free, zone b 6 (2 + 4)
    result, _ = plan_on("gke", [experiment(12, "three")], settings(slots=4))
    assert zones("gke", result, "g0") == {"us-central1-a", "us-central1-b"}  # 3 x 4 fits no zone: preferred only
    required, _ = plan_on("gke", [experiment(12, "three")], settings(slots=4),
                          Policy(topology_required=True))
    assert required.waiting["g0"].code is ReasonCode.TOPOLOGY


def test_gke_without_the_plugin_would_exclude_every_gpu_node_by_its_taint():
    result, _ = plan_on("gke", [experiment(8)], policy=Policy(extended_resource_toleration=False), plugin=False)
    assert describe(result.rejected["g0"]) == (
        "never fits this cluster: no node can run its pods; 5 nodes excluded: "
        "4 taint nvidia.com/gpu=present:NoSchedule, 1 no nvidia.com/gpu")


def test_eks_gpu_taint_is_tolerated_and_its_pod_counts_read():
    snapshot = snapshot_from_objects([{"kind": "List", "items": objects("eks")}])
    assert detect(snapshot).why.startswith("EKS")
    assert snapshot.nodes_by_name["ip-10-0-12-34.ec2.internal"].allocatable["pods"] == 737_000
    result, _ = plan_on("eks", [experiment(16)])  # 2 x 8: one node per zone is free: split (preferred)
    assert len(zones("eks", result, "g0")) == 2
    result, _ = plan_on("eks", [experiment(8, "pair")], settings(slots=4))
    assert len(zones("eks", result, "g0")) == 1  # 2 x 4 fits either zone: kept in one


def test_aks_gpu_pools_need_the_toleration_of_their_sku_taint():
    result, _ = plan_on("aks", [experiment(8)])
    reason = result.rejected["g0"]
    assert describe(reason) == ("never fits this cluster: no node can run its pods; 3 nodes excluded: "
                                "2 taint sku=gpu:NoSchedule, 1 taint CriticalAddonsOnly=true:NoSchedule")
    tolerant = settings("taskContainerDefaults:\n  gpuPodSpec:\n    apiVersion: v1\n    kind: Pod\n    spec:\n"
                        "      tolerations: [{key: sku, operator: Equal, value: gpu, effect: NoSchedule}]\n")
    result, manifests = plan_on("aks", [experiment(16)], tolerant)
    assert len(result.placements["g0"]) == 2 and len(zones("aks", result, "g0")) == 2
    assert all(m["spec"]["tolerations"] == [{"key": "sku", "operator": "Equal", "value": "gpu",
                                             "effect": "NoSchedule"}] for m in manifests["g0"])


@pytest.mark.parametrize("cloud", ["gke", "eks", "aks"])
def test_cloud_snapshots_look_right_to_the_sanity_checks(cloud):
    from det_k8s.cluster.sanity import snapshot_warnings

    snapshot = snapshot_from_objects([{"kind": "List", "items": objects(cloud)}])
    assert snapshot_warnings(snapshot, cloud) == []
    assert all(pod.permanent for pod in snapshot.pods if pod.namespace == "kube-system" and pod.owner_kind != "ReplicaSet")
