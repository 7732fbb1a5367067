"""Generate realistic cluster snapshots and experiment files for the benchmarks.

A snapshot is a Kubernetes List of Nodes and Pods, shaped as `kubectl get nodes,pods -A -o json`
prints it: a mix of 8-GPU, 4-GPU and CPU-only nodes (GPU nodes tainted and labelled as cloud
GPU pools are), a DaemonSet-like pod on every node, ordinary workloads, and running det-k8s
groups at several priorities. Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

GPU = "nvidia.com/gpu"
USERS = ["alice", "bob", "carol", "dave", "erin", "frank"]


def _node(name: str, kind: str, rng: random.Random) -> dict[str, Any]:
    if kind == "gpu8":
        alloc = {"cpu": "95690m", "memory": "1006Gi", GPU: "8", "pods": "110"}
        labels = {"node-pool": "gpu-a100", "accelerator": "a100"}
    elif kind == "gpu4":
        alloc = {"cpu": "47690m", "memory": "370Gi", GPU: "4", "pods": "110"}
        labels = {"node-pool": "gpu-v100", "accelerator": "v100"}
    else:
        alloc = {"cpu": "7910m", "memory": "29Gi", "pods": "110"}
        labels = {"node-pool": "cpu"}
    labels["kubernetes.io/hostname"] = name
    labels["topology.kubernetes.io/zone"] = rng.choice(["zone-a", "zone-b", "zone-c"])
    spec: dict[str, Any] = {}
    if kind != "cpu":
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    ready = rng.random() > 0.01
    if rng.random() < 0.005:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-11-01T00:00:00Z"},
            "spec": spec,
            "status": {"capacity": dict(alloc), "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "addresses": [{"type": "InternalIP", "address": f"10.{rng.randrange(256)}.{rng.randrange(256)}.1"}]}}


def _pod(name: str, namespace: str, node: str | None, requests: dict[str, str], labels: dict[str, str],
         phase: str = "Running", tolerate_gpu: bool = False) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.example.com/app:1.0",
                 "resources": {"requests": requests, "limits": {k: v for k, v in requests.items() if k == GPU}}}
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never"}
    if node:
        spec["nodeName"] = node
    if tolerate_gpu:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "creationTimestamp": "2026-11-21T10:00:00Z"},
            "spec": spec, "status": {"phase": phase}}


def snapshot(nodes: int, pods: int, seed: int = 1) -> dict[str, Any]:
    """`nodes` nodes (25% 8-GPU, 35% 4-GPU, 40% CPU) and about `pods` pods."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    kinds = ["gpu8"] * 25 + ["gpu4"] * 35 + ["cpu"] * 40
    node_objs = [_node(f"node-{i:05d}", rng.choice(kinds), rng) for i in range(nodes)]
    items.extend(node_objs)
    free_gpus = {n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, "0")) for n in node_objs}
    gpu_nodes = [n for n, g in free_gpus.items() if g]
    count = 0
    for node in node_objs:  # one node-local agent per node (like a DaemonSet)
        name = node["metadata"]["name"]
        items.append(_pod(f"node-agent-{name}", "kube-system", name, {"cpu": "100m", "memory": "128Mi"},
                          {"app": "node-agent"}, tolerate_gpu=True))
        count += 1
    group = 0
    while count < pods:
        roll = rng.random()
        if roll < 0.35 and gpu_nodes:  # a running det-k8s group of 1-4 pods
            size = rng.choice([1, 1, 2, 2, 4])
            chosen = [n for n in rng.sample(gpu_nodes, min(len(gpu_nodes), size * 3)) if free_gpus[n] >= 4][:size]
            if len(chosen) < size:
                gpu_nodes = [n for n in gpu_nodes if free_gpus[n] >= 4]
                if not gpu_nodes:
                    continue
                continue
            group_id = f"run-{group:05d}"
            group += 1
            user = rng.choice(USERS)
            priority = str(rng.choice([10, 30, 50, 50, 50, 70]))
            for rank, node_name in enumerate(chosen):
                free_gpus[node_name] -= 4
                labels = {"determined": group_id, "app.kubernetes.io/managed-by": "det-k8s",
                          "det-k8s.io/group": group_id, "det-k8s.io/experiment": f"exp-{group_id}",
                          "det-k8s.io/user": user, "det-k8s.io/priority": priority, "det-k8s.io/rank": str(rank),
                          "det-k8s.io/size": str(size)}
                items.append(_pod(f"{group_id}-{rank}", "research", node_name,
                                  {GPU: "4", "cpu": "8", "memory": "64Gi"}, labels, tolerate_gpu=True))
                count += 1
        elif roll < 0.45:  # finished pods still listed
            node = rng.choice(node_objs)["metadata"]["name"]
            items.append(_pod(f"job-{count}", "batch", node, {"cpu": "1"}, {"app": "job"}, phase="Succeeded"))
            count += 1
        else:  # ordinary services on CPU
            node = rng.choice(node_objs)["metadata"]["name"]
            items.append(_pod(f"web-{count}", "apps", node, {"cpu": "250m", "memory": "256Mi"}, {"app": "web"}))
            count += 1
    return {"apiVersion": "v1", "kind": "List", "items": items}


def experiment(index: int, rng: random.Random) -> str:
    slots = rng.choice([1, 2, 4, 4, 8, 8, 16, 32])
    priority = rng.choice([10, 30, 50, 50, 70, 90])
    return (f"name: bench-{index:04d}\n"
            f"description: generated for the det-k8s benchmarks\n"
            f"resources:\n  slots_per_trial: {slots}\n  priority: {priority}\n"
            f"environment:\n  image: determinedai/environments:cuda-11.3-pytorch-1.10-gpu\n"
            f"entrypoint: python3 train.py\n"
            f"hyperparameters:\n  lr: 0.01\n")


def write(out: Path, nodes: int, pods: int, experiments: int, seed: int = 1) -> tuple[Path, list[Path]]:
    out.mkdir(parents=True, exist_ok=True)
    snap = out / f"snapshot-{nodes}n-{pods}p.json"
    snap.write_text(json.dumps(snapshot(nodes, pods, seed)))
    rng = random.Random(seed + 1)
    exp_dir = out / f"experiments-{experiments}"
    exp_dir.mkdir(exist_ok=True)
    files = []
    for i in range(experiments):
        path = exp_dir / f"bench-{i:04d}.yaml"
        path.write_text(experiment(i, rng))
        files.append(path)
    return snap, files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--experiments", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/data"))
    args = parser.parse_args()
    snap, files = write(args.out, args.nodes, args.pods, args.experiments, args.seed)
    print(f"{snap} ({snap.stat().st_size / 1e6:.1f} MB), {len(files)} experiments in {files[0].parent}")


if __name__ == "__main__":
    main()
