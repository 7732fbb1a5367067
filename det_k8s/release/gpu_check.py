"""`det-k8s nodes check-gpu`: can a pod get an NVIDIA GPU and run nvidia-smi?

The PEDL document's support test ran `nvidia-smi` in a container; this does the same the
Kubernetes way: a pod that requests one `nvidia.com/gpu` (so the device plugin must be there),
optionally pinned to one node, tolerating the usual GPU taints. It is not labelled `determined`,
so neither the master nor `pods cleanup` ever touches it, and the caller always deletes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..labels import CHECK, MANAGED_BY, MANAGER

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
NAME_PREFIX = "det-k8s-gpu-check-"
GPU_TOLERATIONS = (
    {"key": "nvidia.com/gpu", "operator": "Exists"},
    {"key": "determined.ai/pedl-agent", "operator": "Exists"},
    {"key": "accelerator", "operator": "Exists"},
)


def gpu_check_pod(node: str | None = None, image: str = IMAGE) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "tolerations": [dict(t) for t in GPU_TOLERATIONS],
        "containers": [{
            "name": "nvidia-smi", "image": image, "command": ["nvidia-smi"],
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }],
    }
    if node:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": NAME_PREFIX,
                         "labels": {CHECK: "gpu", MANAGED_BY: MANAGER}},
            "spec": spec}


def scheduling_problem(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The scheduler's latest complaint about the pod, in the terms an admin acts on."""
    failed = [e for e in events if e.get("reason") == "FailedScheduling"]
    if not failed:
        return None
    message = str(failed[-1].get("message") or "")
    if "nvidia.com/gpu" in message:
        return f"no node offers nvidia.com/gpu to this pod ({message}); is the NVIDIA device plugin installed?"
    return message or "the scheduler cannot place the pod"


def container_waiting(pod: Mapping[str, Any]) -> str | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in ("ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                                     "CreateContainerError", "RunContainerError"):
            return f"{waiting['reason']}: {waiting.get('message') or ''}".strip(": ")
    return None
