#!/usr/bin/env python3
"""Rough timings of the scheduling core and of `det-k8s plan` (not a benchmark suite; no assertions).

    .venv/bin/python scripts/measure_scheduler.py plan  # 5,000 nodes/30,000 pods/200 experiments vs json.load
    .venv/bin/python scripts/measure_scheduler.py pass  # one pass: 1k/5k/10k nodes x 1k/10k queued groups

Data is generated into a temporary directory (or --keep DIR) with a fixed seed.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def kubectl_node(i: int, gpus: int) -> dict:
    name = f"node-{i:05d}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{i:08d}-0000-0000-0000-000000000000",
            "resourceVersion": "123456",
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "p4d.24xlarge" if gpus else "m5.4xlarge",
                "topology.kubernetes.io/zone": "us-east-1a",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {
            "podCIDR": "10.0.0.0/24",
            "providerID": f"aws:///us-east-1a/i-{i:017x}",
            **(
                {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
                if gpus
                else {}
            ),
        },
        "status": {
            "allocatable": {
                "cpu": "95690m",
                "memory": "1148Gi",
                "ephemeral-storage": "95Gi",
                "pods": "110",
                **({"nvidia.com/gpu": str(gpus)} if gpus else {}),
            },
            "capacity": {
                "cpu": "96",
                "memory": "1152Gi",
                "ephemeral-storage": "100Gi",
                "pods": "110",
                **({"nvidia.com/gpu": str(gpus)} if gpus else {}),
            },
            "conditions": [
                {
                    "type": t,
                    "status": "False",
                    "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                    "reason": f"KubeletHasNo{t}",
                    "message": f"kubelet has no {t}",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
            ]
            + [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250}"}],
            "nodeInfo": {
                "kubeletVersion": "v1.31.0",
                "containerRuntimeVersion": "containerd://1.7.0",
                "osImage": "Amazon Linux 2",
                "architecture": "amd64",
            },
        },
    }


def kubectl_pod(j: int, node: str, gpus: int, labels: dict | None = None) -> dict:
    resources = {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{j:06d}",
            "namespace": "team",
            "uid": f"{j:08d}-1111-1111-1111-111111111111",
            "resourceVersion": "999",
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "labels": labels or {"app": "web", "pod-template-hash": "abc123"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc123",
                    "uid": "x",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "nginx:1.25",
                    "imagePullPolicy": "IfNotPresent",
                    "resources": resources,
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [{"name": "token", "mountPath": "/var/run/secrets", "readOnly": True}],
                }
            ],
            "nodeName": node,
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "priority": 0,
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "tolerations": [
                {
                    "effect": "NoExecute",
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                },
                {
                    "effect": "NoExecute",
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                },
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
            "volumes": [
                {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
            ],
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": "10.1.0.1",
            "qosClass": "Burstable",
            "startTime": "2024-01-01T00:00:00Z",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "main",
                    "ready": True,
                    "restartCount": 0,
                    "image": "nginx:1.25",
                    "imageID": "sha256:" + "a" * 64,
                    "containerID": "containerd://" + "b" * 64,
                    "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}},
                }
            ],
        },
    }


def write_plan_inputs(directory: Path, nodes: int, pods: int, experiments: int) -> tuple[Path, list[Path]]:
    rng = random.Random(7)
    items = [kubectl_node(i, 8 if i % 10 else 0) for i in range(nodes)]
    gpu_nodes = [i for i in range(nodes) if i % 10]
    free = {i: 8 for i in gpu_nodes}
    for j in range(pods):
        i = rng.choice(gpu_nodes)
        gpus = 1 if free[i] > 0 and rng.random() < 0.25 else 0
        free[i] -= gpus
        items.append(kubectl_pod(j, f"node-{i:05d}", gpus))
    snapshot = directory / "snapshot.json"
    snapshot.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}, indent=4)
    )
    paths = []
    for k in range(experiments):
        slots = rng.choice([1, 2, 4, 8, 8, 16, 32, 64])
        path = directory / f"exp-{k:03d}.yaml"
        path.write_text(
            f"name: exp-{k:03d}\nresources: {{slots_per_trial: {slots}, priority: {rng.randint(1, 99)}}}\n"
            "environment:\n  pod_spec:\n    spec:\n"
            "      tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n"
            "entrypoint: python3 train.py\nhyperparameters: {lr: 0.1}\n"
        )
        paths.append(path)
    return snapshot, paths


def best_of(runs: int, argv: list[str]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return min(times)


def measure_plan(directory: Path, runs: int) -> None:
    snapshot, experiments = write_plan_inputs(directory, 5000, 30000, 200)
    size = snapshot.stat().st_size / 2**20
    load = best_of(runs, [sys.executable, "-c", f"import json; json.load(open({str(snapshot)!r}))"])
    plan = best_of(
        runs,
        [
            sys.executable,
            "-m",
            "det_k8s",
            "plan",
            *map(str, experiments),
            "--snapshot",
            str(snapshot),
            "--set",
            "maxSlotsPerPod=8",
            "-o",
            "json",
        ],
    )
    print(
        f"snapshot {size:.0f} MiB: json.load {load:.2f}s, det-k8s plan (200 experiments) {plan:.2f}s "
        f"= {plan / load:.2f}x"
    )


def measure_pass(nodes_list: list[int], groups_list: list[int], preemption: bool) -> None:
    from det_k8s.cluster.model import GPU, Node, Pod, Snapshot
    from det_k8s.scheduling import labels as L
    from det_k8s.scheduling.model import PodGroup, PodRequest, Policy
    from det_k8s.scheduling.plan import schedule

    for n in nodes_list:
        rng = random.Random(n)
        nodes = tuple(
            Node(f"n{i}", {GPU: 8000, "cpu": 95690, "memory": 1148 * 2**30 * 1000, "pods": 110000})
            for i in range(n)
        )
        pods = []
        for i in range(n):  # about half the GPUs busy, in det-k8s groups of 1-2 pods at random priorities
            used = rng.choice([0, 2, 4, 8])
            if used:
                gid = f"run{i}"
                labels = {
                    L.MANAGED_BY: L.MANAGER,
                    L.GROUP: gid,
                    L.DETERMINED: gid,
                    L.USER: f"u{i % 7}",
                    L.PRIORITY: str(rng.choice([10, 30, 50, 70])),
                }
                pods.append(
                    Pod(f"{gid}-0", "ml", f"n{i}", "Running", {GPU: used * 1000, "cpu": 4000}, labels)
                )
        cluster = Snapshot(nodes, tuple(pods))
        cluster.used  # noqa: B018 - computed once per snapshot, as the live side will
        for g in range(len(groups_list)):
            count = groups_list[g]
            queue = []
            for k in range(count):
                slots = rng.choice([1, 2, 4, 8, 16, 32])
                size, per = (1, slots) if slots <= 8 else (slots // 8, 8)
                queue.append(
                    PodGroup(
                        f"g{k}",
                        f"exp-{k}",
                        f"u{k % 7}",
                        rng.choice([20, 40, 50, 60, 80]),
                        "",
                        k,
                        tuple(
                            PodRequest(f"g{k}-{r}", r, {GPU: per * 1000, "cpu": 8000}) for r in range(size)
                        ),
                        slots,
                    )
                )
            start = time.perf_counter()
            plan = schedule(cluster, queue, Policy(preemption=preemption))
            elapsed = time.perf_counter() - start
            print(
                f"{n:>6} nodes, {count:>6} groups, preemption={preemption!s:5}: {elapsed:6.2f}s "
                f"({len(plan.placements)} placed, {len(plan.waiting)} waiting, {len(plan.victims)} victims)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("what", choices=["plan", "pass"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write generated data here and keep it")
    parser.add_argument("--preemption", action="store_true")
    args = parser.parse_args()
    if args.what == "plan":
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            measure_plan(args.keep, args.runs)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                measure_plan(Path(tmp), args.runs)
    else:
        measure_pass([1000, 5000, 10000], [1000, 10000], args.preemption)


if __name__ == "__main__":
    main()
