"""Realistic cluster snapshots, settings and experiment files for the benchmarks.

A snapshot is a Kubernetes List of Nodes and Pods, as `kubectl get nodes,pods -A -o json` prints
it. Nodes: 25% 8-GPU (pool a100), 35% 4-GPU (pool v100), 40% CPU-only; GPU nodes carry the
`nvidia.com/gpu=present:NoSchedule` taint GPU pools have; about 1% are NotReady and 0.5%
cordoned. Pods: a DaemonSet-like agent on every node, running det-k8s groups (1, 2 or 4 pods of
4 GPUs, at several priorities and users) until `gpu_use` of the GPUs is taken, finished batch
pods (Succeeded, still listed) and ordinary services, up to `pods` pods in all.

Two object styles, the same cluster:

- `lean`: only the fields a scheduler reads (names, labels, requests, tolerations, phase). The
  hard case for "plan within a few times json.load": little JSON per object to amortise our work.
- `kubectl`: what `kubectl get -o json` really prints (uids, owner references, defaulted spec
  fields, service-account volumes, conditions, container statuses, node images and info), about
  2 KB per pod and 6 KB per node.

Deterministic for a given seed. `write()` also writes the settings file (`site.yaml`:
maxSlotsPerPod 4, the GCD of 4 and 8, and a GPU pod spec tolerating the GPU taint) and the
experiment files (Determined's keys; slots 1-32, priorities 10-90).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

GPU = "nvidia.com/gpu"
USERS = ["alice", "bob", "carol", "dave", "erin", "frank"]
TIME = "2026-11-21T10:00:00Z"
SETTINGS = """\
# Written by benchmarks/generate.py: the scheduling settings of the benchmark cluster.
maxSlotsPerPod: 4
taskContainerDefaults:
  gpuPodSpec:
    apiVersion: v1
    kind: Pod
    spec:
      tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""


def _uid(rng: random.Random) -> str:
    return (f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-{rng.getrandbits(16):04x}-"
            f"{rng.getrandbits(16):04x}-{rng.getrandbits(48):012x}")


def _node(name: str, kind: str, rng: random.Random, style: str) -> dict[str, Any]:
    if kind == "gpu8":
        alloc = {"cpu": "95690m", "memory": "1006Gi", "ephemeral-storage": "450Gi", GPU: "8", "pods": "110"}
        labels = {"node-pool": "gpu-a100", "accelerator": "a100"}
    elif kind == "gpu4":
        alloc = {"cpu": "47690m", "memory": "370Gi", "ephemeral-storage": "200Gi", GPU: "4", "pods": "110"}
        labels = {"node-pool": "gpu-v100", "accelerator": "v100"}
    else:
        alloc = {"cpu": "7910m", "memory": "29Gi", "ephemeral-storage": "95Gi", "pods": "110"}
        labels = {"node-pool": "cpu"}
    labels["kubernetes.io/hostname"] = name
    labels["topology.kubernetes.io/zone"] = rng.choice(["zone-a", "zone-b", "zone-c"])
    spec: dict[str, Any] = {}
    if kind != "cpu":
        spec["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    ready = rng.random() > 0.01
    if rng.random() < 0.005:
        spec["unschedulable"] = True
    address = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": spec,
        "status": {"capacity": dict(alloc), "allocatable": alloc,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                   "addresses": [{"type": "InternalIP", "address": address}]},
    }
    if style == "kubectl":
        _kubectl_node(obj, rng, kind, address)
    return obj


def _kubectl_node(obj: dict[str, Any], rng: random.Random, kind: str, address: str) -> None:
    meta, spec, status = obj["metadata"], obj["spec"], obj["status"]
    name = meta["name"]
    meta.update(uid=_uid(rng), resourceVersion=str(rng.randrange(10**8)), annotations={
        "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"})
    meta["labels"].update({"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                           "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                           "node.kubernetes.io/instance-type": {"gpu8": "p4d.24xlarge", "gpu4": "p3.8xlarge"}.get(
                               kind, "m5.2xlarge")})
    spec.update(podCIDR=f"10.244.{rng.randrange(256)}.0/24", podCIDRs=[f"10.244.{rng.randrange(256)}.0/24"],
                providerID=f"aws:///zone-a/i-{rng.getrandbits(60):015x}")
    ready = status["conditions"][0]["status"]
    status["conditions"] = [
        {"type": t, "status": "False", "lastHeartbeatTime": TIME, "lastTransitionTime": "2026-11-01T00:00:00Z",
         "reason": f"KubeletHasSufficient{t.removesuffix('Pressure')}", "message": f"kubelet has no {t}"}
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ] + [{"type": "Ready", "status": ready, "lastHeartbeatTime": TIME, "lastTransitionTime": "2026-11-01T00:00:00Z",
          "reason": "KubeletReady", "message": "kubelet is posting ready status"}]
    status["addresses"].append({"type": "Hostname", "address": name})
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    status["nodeInfo"] = {"architecture": "amd64", "bootID": _uid(rng), "containerRuntimeVersion": "containerd://1.7.22",
                          "kernelVersion": "6.1.112-124.190.amzn2023.x86_64", "kubeProxyVersion": "v1.31.4",
                          "kubeletVersion": "v1.31.4", "machineID": f"{rng.getrandbits(128):032x}",
                          "operatingSystem": "linux", "osImage": "Amazon Linux 2023", "systemUUID": _uid(rng)}
    status["images"] = [{"names": [f"registry.example.com/image-{i}@sha256:{rng.getrandbits(256):064x}",
                                   f"registry.example.com/image-{i}:v{i}.0"],
                         "sizeBytes": rng.randrange(10**7, 10**10)} for i in range(rng.randrange(8, 20))]


def _pod(name: str, namespace: str, node: str | None, requests: dict[str, str], labels: dict[str, str],
         rng: random.Random, style: str, phase: str = "Running", tolerate_gpu: bool = False,
         owner: str = "ReplicaSet") -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main", "image": "registry.example.com/app:1.0",
        "resources": {"requests": requests, "limits": {k: v for k, v in requests.items() if k == GPU}}}
    spec: dict[str, Any] = {"containers": [container], "restartPolicy": "Never" if owner == "Job" else "Always"}
    if node:
        spec["nodeName"] = node
    if tolerate_gpu:
        spec["tolerations"] = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": namespace, "labels": labels,
                                        "creationTimestamp": TIME},
                           "spec": spec, "status": {"phase": phase}}
    if style == "kubectl":
        _kubectl_pod(obj, rng, owner)
    return obj


def _kubectl_pod(obj: dict[str, Any], rng: random.Random, owner: str) -> None:
    meta, spec, status = obj["metadata"], obj["spec"], obj["status"]
    container = spec["containers"][0]
    meta.update(uid=_uid(rng), resourceVersion=str(rng.randrange(10**8)),
                generateName=meta["name"].rsplit("-", 1)[0] + "-",
                ownerReferences=[{"apiVersion": "apps/v1" if owner != "Job" else "batch/v1", "kind": owner,
                                  "name": meta["name"].rsplit("-", 1)[0], "uid": _uid(rng), "controller": True,
                                  "blockOwnerDeletion": True}],
                annotations={"kubectl.kubernetes.io/restartedAt": TIME})
    container.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log",
                     terminationMessagePolicy="File",
                     ports=[{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                     env=[{"name": "LOG_LEVEL", "value": "info"},
                          {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                          "fieldPath": "metadata.name"}}}],
                     volumeMounts=[{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                    "name": "kube-api-access", "readOnly": True}])
    spec.update(dnsPolicy="ClusterFirst", enableServiceLinks=True, preemptionPolicy="PreemptLowerPriority",
                priority=0, schedulerName="default-scheduler", securityContext={},
                serviceAccount="default", serviceAccountName="default", terminationGracePeriodSeconds=30)
    spec["tolerations"] = [*spec.get("tolerations", ()),
                           {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
                            "tolerationSeconds": 300},
                           {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
                            "tolerationSeconds": 300}]
    spec["volumes"] = [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                      "fieldPath": "metadata.namespace"}}]}}]}}]
    running = status["phase"] == "Running"
    status.update(hostIP=f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                  podIP=f"10.244.{rng.randrange(256)}.{rng.randrange(1, 255)}", qosClass="Burstable",
                  startTime=TIME)
    status["conditions"] = [{"type": t, "status": "True" if running or t == "PodScheduled" else "False",
                             "lastProbeTime": None, "lastTransitionTime": TIME}
                            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                      "PodScheduled")]
    state = ({"running": {"startedAt": TIME}} if running else
             {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": TIME, "finishedAt": TIME,
                             "containerID": f"containerd://{rng.getrandbits(256):064x}"}})
    status["containerStatuses"] = [{"name": "main", "ready": running, "restartCount": 0, "started": running,
                                    "image": container["image"], "imageID": f"sha256:{rng.getrandbits(256):064x}",
                                    "containerID": f"containerd://{rng.getrandbits(256):064x}", "state": state,
                                    "lastState": {}}]


def snapshot(nodes: int, pods: int, seed: int = 1, *, style: str = "lean", gpu_use: float = 0.7) -> dict[str, Any]:
    """`nodes` nodes and `pods` pods (at least one agent per node); det-k8s groups take about `gpu_use` of the GPUs."""
    if style not in ("lean", "kubectl"):
        raise ValueError(f"unknown style {style!r}")
    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    kinds = ["gpu8"] * 25 + ["gpu4"] * 35 + ["cpu"] * 40
    node_objs = [_node(f"node-{i:05d}", rng.choice(kinds), rng, style) for i in range(nodes)]
    items.extend(node_objs)
    names = [n["metadata"]["name"] for n in node_objs]
    free_gpus = {n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, "0")) for n in node_objs}
    budget = int(sum(free_gpus.values()) * gpu_use)
    gpu_nodes = [n for n, g in free_gpus.items() if g]
    for name in names:  # one node-local agent per node (like a DaemonSet)
        items.append(_pod(f"node-agent-{name[5:]}", "kube-system", name, {"cpu": "100m", "memory": "128Mi"},
                          {"app": "node-agent", "controller-revision-hash": "7c9d8"}, rng, style,
                          tolerate_gpu=True, owner="DaemonSet"))
    count, group = len(names), 0
    while count < pods:
        roll = rng.random()
        if roll < 0.35 and budget > 0 and gpu_nodes:  # a running det-k8s group of 1-4 pods of 4 GPUs
            size = rng.choice([1, 1, 2, 2, 4])
            chosen = [n for n in rng.sample(gpu_nodes, min(len(gpu_nodes), size * 3)) if free_gpus[n] >= 4][:size]
            if len(chosen) < size:
                gpu_nodes = [n for n in gpu_nodes if free_gpus[n] >= 4]
                continue
            group_id = f"run-{group:05d}"
            group += 1
            user, priority = rng.choice(USERS), str(rng.choice([10, 30, 50, 50, 50, 70]))
            for rank, node_name in enumerate(chosen):
                free_gpus[node_name] -= 4
                budget -= 4
                labels = {"determined": group_id, "app.kubernetes.io/managed-by": "det-k8s",
                          "det-k8s.io/group": group_id, "det-k8s.io/experiment": f"exp-{group_id}",
                          "det-k8s.io/user": user, "det-k8s.io/priority": priority, "det-k8s.io/rank": str(rank),
                          "det-k8s.io/size": str(size)}
                items.append(_pod(f"{group_id}-{rank}", "research", node_name,
                                  {GPU: "4", "cpu": "8", "memory": "64Gi"}, labels, rng, style,
                                  tolerate_gpu=True, owner="Job"))
                count += 1
        elif roll < 0.45:  # finished pods still listed
            items.append(_pod(f"job-{count:06d}-x", "batch", rng.choice(names), {"cpu": "1"},
                              {"app": "job", "job-name": f"job-{count:06d}"}, rng, style,
                              phase="Succeeded", owner="Job"))
            count += 1
        else:  # ordinary services on CPU
            items.append(_pod(f"web-{count:06d}-x", "apps", rng.choice(names), {"cpu": "250m", "memory": "256Mi"},
                              {"app": "web", "pod-template-hash": "5d4f7"}, rng, style))
            count += 1
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


def experiment(index: int, rng: random.Random) -> str:
    """One experiment file: Determined's keys; slots 1-32 (4-GPU pods beyond 4), priorities 10-90."""
    slots = rng.choice([1, 2, 4, 4, 8, 8, 16, 32])
    priority = rng.choice([10, 30, 50, 50, 70, 90])
    return (f"name: bench-{index:04d}\n"
            f"description: generated for the det-k8s benchmarks\n"
            f"resources:\n  slots_per_trial: {slots}\n  priority: {priority}\n"
            f"environment:\n  image: determinedai/environments:cuda-11.3-pytorch-1.10-gpu\n"
            f"entrypoint: python3 train.py\n"
            f"hyperparameters:\n  lr: 0.01\n")


def write_snapshot(out: Path, nodes: int, pods: int, seed: int = 1, *, style: str = "lean") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"snapshot-{nodes}n-{pods}p-{style}-seed{seed}.json"
    if not path.exists():
        path.write_text(json.dumps(snapshot(nodes, pods, seed, style=style)))
    return path


def write_experiments(out: Path, count: int, seed: int = 1) -> list[Path]:
    rng = random.Random(seed + 1)
    directory = out / f"experiments-{count}"
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(count):
        path = directory / f"bench-{i:04d}.yaml"
        path.write_text(experiment(i, rng))
        files.append(path)
    return files


def write_settings(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "site.yaml"
    path.write_text(SETTINGS)
    return path


def write(out: Path, nodes: int, pods: int, experiments: int, seed: int = 1,
          style: str = "lean") -> tuple[Path, Path, list[Path]]:
    """The snapshot, the settings file and the experiment files, under `out`."""
    return (write_snapshot(out, nodes, pods, seed, style=style), write_settings(out),
            write_experiments(out, experiments, seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--experiments", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--style", choices=["lean", "kubectl"], default="lean")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/data"))
    args = parser.parse_args()
    snap, settings, files = write(args.out, args.nodes, args.pods, args.experiments, args.seed, args.style)
    print(f"{snap} ({snap.stat().st_size / 1e6:.1f} MB), {settings}, {len(files)} experiments in {files[0].parent}")


if __name__ == "__main__":
    main()
