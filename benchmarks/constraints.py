"""Benchmark 7: `det-k8s plan` with realistic placement constraints, against json.load of the snapshot.

The cluster of benchmark 1 (`generate.snapshot`), with the constraints real clusters carry:

- the ordinary services become 200 deployments (`app: web-<n>`); 40% of their pods have required pod
  anti-affinity on their app per node, 30% a DoNotSchedule spread over zones, 50% a required node
  affinity on the CPU pool, 10% a PersistentVolumeClaim bound to a local volume on their node;
- 20% of the running det-k8s pods are pinned by node affinity and not bound yet (as det-k8s leaves
  them until kube-scheduler binds them);
- the snapshot also lists the StorageClasses, PersistentVolumes, PersistentVolumeClaims and
  Namespaces (`kubectl get nodes,pods,pvc,pv,storageclasses,namespaces -A -o json`), with a shared
  ReadWriteMany dataset claim in the experiments' namespace;
- of the 200 experiment files, 30% keep one pod per node (anti-affinity on their own group through
  `matchLabelKeys`), 20% spread over zones, 30% require A100 nodes, 30% mount the shared dataset.

Measured as benchmark 1 measures `plan`: the console script in a fresh process (`-n research`,
`-o json`), against `json.load` of the same file in a fresh interpreter, in this process, and in this
process with the cycle collector paused; plus where the time goes. The goal: within 3x `json.load`.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from . import generate
from .scheduling import _root, json_floors, plan_phases
from .timing import child_env, time_commands

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
NAMESPACE = "research"
TOLERATE_GPU = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def _pin(node: str) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}


def constrained(nodes: int, pods: int, seed: int = 1, *, style: str = "lean") -> dict[str, Any]:
    """Benchmark 1's snapshot with constraints on a share of the pods, and the storage they use."""
    document = generate.snapshot(nodes, pods, seed, style=style)
    rng = random.Random(seed + 7)
    items: list[dict[str, Any]] = document["items"]
    extra: list[dict[str, Any]] = [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local-ssd"},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard", "annotations": {
            "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "pd.csi.storage.gke.io",
         "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "datasets-nfs"},
         "spec": {"capacity": {"storage": "10Ti"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                  "claimRef": {"namespace": NAMESPACE, "name": "shared-datasets"}}, "status": {"phase": "Bound"}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "shared-datasets", "namespace": NAMESPACE},
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "datasets-nfs",
                  "resources": {"requests": {"storage": "10Ti"}}}, "status": {"phase": "Bound"}},
    ]
    extra += [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {
        "kubernetes.io/metadata.name": name}}} for name in ("default", "kube-system", NAMESPACE, "apps", "batch")]
    for item in items:
        if item["kind"] != "Pod":
            continue
        labels, spec = item["metadata"]["labels"], item["spec"]
        if labels.get("app") == "web":
            app = f"web-{rng.randrange(200)}"
            labels["app"] = app
            affinity: dict[str, Any] = {}
            if rng.random() < 0.4:
                affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}]}
            if rng.random() < 0.5:
                affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "node-pool", "operator": "In", "values": ["cpu"]}]}]}}
            if affinity:
                spec["affinity"] = affinity
            if rng.random() < 0.3:
                spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                                      "whenUnsatisfiable": "DoNotSchedule",
                                                      "labelSelector": {"matchLabels": {"app": app}}}]
            if rng.random() < 0.1 and spec.get("nodeName"):
                claim, volume, node = f"data-{item['metadata']['name']}", f"pv-{item['metadata']['name']}", spec["nodeName"]
                spec.setdefault("volumes", []).append({"name": "data", "persistentVolumeClaim": {"claimName": claim}})
                extra.append({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                              "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"],
                                       "storageClassName": "local-ssd", "claimRef": {"namespace": "apps", "name": claim},
                                       "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                           {"key": HOST, "operator": "In", "values": [node]}]}]}}},
                              "status": {"phase": "Bound"}})
                extra.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                              "metadata": {"name": claim, "namespace": "apps"},
                              "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local-ssd",
                                       "volumeName": volume, "resources": {"requests": {"storage": "100Gi"}}},
                              "status": {"phase": "Bound"}})
        elif labels.get("app.kubernetes.io/managed-by") == "det-k8s" and rng.random() < 0.2:
            spec["affinity"] = _pin(spec.pop("nodeName"))
            item["status"] = {"phase": "Pending"}
    document["items"] = items + extra
    return document


def experiment(index: int, rng: random.Random) -> str:
    """A benchmark-1 experiment, with a pod spec carrying constraints on a share of them."""
    text = generate.experiment(index, rng)
    spec: dict[str, Any] = {"tolerations": [TOLERATE_GPU]}
    affinity: dict[str, Any] = {}
    if rng.random() < 0.3:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {}, "matchLabelKeys": ["det-k8s.io/group"], "topologyKey": HOST}]}
    if rng.random() < 0.3:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "accelerator", "operator": "In", "values": ["a100"]}]}]}}
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.2:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {}, "matchLabelKeys": ["det-k8s.io/group"]}]
    if rng.random() < 0.3:
        spec["volumes"] = [{"name": "datasets", "persistentVolumeClaim": {"claimName": "shared-datasets"}}]
    if len(spec) == 1:
        return text
    return text.replace("environment:\n", f"environment:\n  pod_spec: {json.dumps({'spec': spec})}\n", 1)


def write(data: Path, nodes: int, pods: int, experiments: int, seed: int = 1) -> tuple[Path, list[Path]]:
    data.mkdir(parents=True, exist_ok=True)
    snapshot = data / f"snapshot-{nodes}n-{pods}p-constrained-seed{seed}.json"
    if not snapshot.exists():
        snapshot.write_text(json.dumps(constrained(nodes, pods, seed)))
    rng = random.Random(seed + 11)
    directory = data / f"experiments-constrained-{experiments}"
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(experiments):
        path = directory / f"bench-{i:04d}.yaml"
        path.write_text(experiment(i, rng))
        files.append(path)
    return snapshot, files


def run(config: dict[str, Any]) -> dict[str, Any]:
    data = Path(config["data"])
    nodes, pods, count, runs = config["nodes"], config["pods"], config["experiments"], config["runs"]
    snapshot, files = write(data, nodes, pods, count)
    settings = generate.write_settings(data)
    console = Path(sys.executable).with_name("det-k8s")
    plan = [str(console), "plan", *map(str, files), "--snapshot", str(snapshot), "-f", str(settings), "-n", NAMESPACE,
            "-o", "json"]
    commands = {"plan": plan, "json_load_process": [
        sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1]))", str(snapshot)]}
    envs = {"plan": child_env(pythonpath=_root()), "json_load_process": child_env()}
    baseline = config.get("baseline")
    if baseline is not None:
        commands["plan_baseline"] = plan
        envs["plan_baseline"] = child_env(pythonpath=baseline)
    timings = time_commands(commands, runs=runs, warmup=1, cwd=data, envs=envs)
    result = json.loads(subprocess.run(plan, capture_output=True, text=True, check=True, cwd=data, env=envs["plan"],
                                       timeout=600).stdout)
    statuses = [record["status"] for record in result["experiments"]]
    objects = json.loads(snapshot.read_text())["items"]
    kinds: dict[str, int] = {}
    for item in objects:
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    constrained_pods = sum(1 for item in objects if item["kind"] == "Pod" and (
        item["spec"].get("affinity") or item["spec"].get("topologySpreadConstraints") or item["spec"].get("volumes")))
    return {"nodes": nodes, "pods": kinds.get("Pod", 0), "experiments": count,
            "snapshot_mb": round(snapshot.stat().st_size / 1e6, 1), "kinds": kinds,
            "constrained_pods": constrained_pods,
            "constrained_experiments": sum("pod_spec" in path.read_text() for path in files),
            **{name: timing.data() for name, timing in timings.items()}, **json_floors(snapshot, runs),
            "phases": plan_phases(snapshot, files, settings, NAMESPACE),
            "outcome": {status: statuses.count(status) for status in ("placed", "queued", "rejected")},
            "warnings": len(result["warnings"])}
