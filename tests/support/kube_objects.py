"""Raw Kubernetes objects for placement tests, and planning them with det-k8s.

The objects are what the API returns (plain dicts), so a test reads them through det-k8s's own
reading (`cluster.read`) and can hand the very same objects to the independent model
(`tests/support/kube_model.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
from det_k8s.scheduling.model import Plan, PodGroup, PodRequest, Policy
from det_k8s.scheduling.plan import running_in, schedule

GPU = "nvidia.com/gpu"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NS = "research"


def node(name: str, gpus: int = 0, *, cpu: str = "16", memory: str = "64Gi", pods: str = "110",
         labels: Mapping[str, str] | None = None, taints: Sequence[Mapping[str, str]] = (), ready: bool = True,
         cordoned: bool = False, zone: str | None = None, conditions: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpus:
        allocatable[GPU] = str(gpus)
    meta_labels = {HOST: name, "kubernetes.io/os": "linux", **(labels or {})}
    if zone:
        meta_labels[ZONE] = zone
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints]}
    if cordoned:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": meta_labels}, "spec": spec,
            "status": {"allocatable": allocatable, "capacity": dict(allocatable),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}, *conditions]}}


def spec(gpus: int = 0, cpu: str = "1", *, memory: str = "1Gi", **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["limits"] = {GPU: str(gpus)}
    return {"containers": [{"name": "main", "image": "x", "resources": resources}], **extra}


def pod(name: str, namespace: str = "default", node_name: str | None = None, *, gpus: int = 0, cpu: str = "1",
        labels: Mapping[str, str] | None = None, owner: str = "", deleting: bool = False, created: str = "",
        phase: str = "Running", **extra: Any) -> dict[str, Any]:
    body = spec(gpus, cpu, **extra)
    if node_name:
        body["nodeName"] = node_name
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                            "creationTimestamp": created or "2024-01-01T00:00:00Z"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": name.rsplit("-", 1)[0],
                                    "uid": "0", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2024-01-02T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body, "status": {"phase": phase}}


def running(group: str, nodes: Sequence[str], *, gpus: int = 0, cpu: str = "1", priority: int = 50,
            namespace: str = NS, deleting: bool = False, created: str = "2024-01-01T00:00:00Z") -> list[dict[str, Any]]:
    """A running det-k8s group: one pod per entry of `nodes`, labelled as det-k8s labels them."""
    return [pod(f"{group}-{rank}", namespace, where, gpus=gpus, cpu=cpu, deleting=deleting, created=created,
                labels={"determined": group, "app.kubernetes.io/managed-by": "det-k8s", "det-k8s.io/group": group,
                        "det-k8s.io/experiment": group, "det-k8s.io/user": "bob",
                        "det-k8s.io/priority": str(priority), "det-k8s.io/size": str(len(nodes)),
                        "det-k8s.io/rank": str(rank)},
                tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}] if gpus else [])
            for rank, where in enumerate(nodes)]


def queued(group: str, pods: int, body: Mapping[str, Any], *, priority: int = 50,
           labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The pod objects a queued group's pods will be (the spec det-k8s creates them from)."""
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{group}-{rank}", "namespace": NS,
                          "labels": {"det-k8s.io/group": group, "det-k8s.io/rank": str(rank), **(labels or {})}},
             "spec": dict(body), "priority": priority}
            for rank in range(pods)]


def group_of(name: str, objects: Sequence[Mapping[str, Any]], sequence: int = 0,
             submitted: str = "2024-01-01T00:00:00Z") -> PodGroup:
    pods = tuple(PodRequest(o["metadata"]["name"], rank, effective_requests(o["spec"]),
                            constraints_from_spec(o["spec"], NS, o["metadata"]["labels"]), o["metadata"]["labels"], NS)
                 for rank, o in enumerate(objects))
    return PodGroup(name, name, "alice", int(objects[0].get("priority", 50)), submitted, sequence, pods)


def plan(objects: Sequence[Mapping[str, Any]], groups: Mapping[str, Sequence[Mapping[str, Any]]],
         policy: Policy | None = None, **times: Any) -> Plan:
    """det-k8s's plan for the queued groups (in this order) on the cluster the objects describe."""
    snapshot = snapshot_from_objects([{"kind": "List", "items": list(objects)}])
    queue = [group_of(name, pods, i, times.get(name, "2024-01-01T00:00:00Z")) for i, (name, pods) in
             enumerate(groups.items())]
    return schedule(snapshot, queue, policy or Policy(), running_in(snapshot, NS), now=times.get("now"))
