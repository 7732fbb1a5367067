"""What the API server's admission adds to a pod before any scheduler sees it, where that moves it.

The ExtendedResourceToleration admission plugin gives every pod that requests an extended resource
(`nvidia.com/gpu`, any `domain/name` outside `kubernetes.io`) a toleration `{key: <resource>,
operator: Exists, effect: NoSchedule}`. Clouds taint GPU nodes with the resource's name
(GKE: `nvidia.com/gpu=present:NoSchedule`) and rely on it: without modelling it, every GPU group
would look as if no node could take it.

Whether the plugin runs cannot be read from the API. det-k8s decides, most certain first:

1. the policy's setting (`Policy.extended_resource_toleration`), when given;
2. a pod in the snapshot that requests an extended resource and does not tolerate a NoSchedule taint
   of that name: the plugin was not running when it was created, so it is off;
3. the cloud, from node labels: GKE, EKS (since Kubernetes 1.19) and AKS enable the plugin;
4. otherwise off (upstream kube-apiserver does not enable it by default).

(When no node carries a taint named after an extended resource, the plugin changes nothing: off.)

Pods that already exist went through admission, so adding the toleration again changes nothing;
det-k8s adds it to the pods it has yet to create.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import Constraints, Pod, Snapshot, Taint, Toleration

# node labels each managed Kubernetes service sets, and its name
PLATFORMS = (
    ("cloud.google.com/gke-nodepool", "GKE"),
    ("eks.amazonaws.com/nodegroup", "EKS"),
    ("eks.amazonaws.com/compute-type", "EKS"),
    ("kubernetes.azure.com/cluster", "AKS"),
    ("kubernetes.azure.com/agentpool", "AKS"),
)


def is_extended(resource: str) -> bool:
    """An extended resource: `domain/name` outside the kubernetes.io domains (not `requests.*`)."""
    if "/" not in resource or resource.startswith("requests."):
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def tolerations_for(resources: Iterable[str]) -> tuple[Toleration, ...]:
    """The tolerations the plugin adds to a pod requesting these resources."""
    return tuple(Toleration(name, "Exists", "", "NoSchedule") for name in sorted(set(resources)) if is_extended(name))


@dataclass(frozen=True)
class Admission:
    """Whether the plugin is taken as running, and how that was decided (for messages)."""

    extended_resource_toleration: bool
    why: str

    def admit(self, constraints: Constraints, resources: Iterable[str]) -> Constraints:
        """The constraints a pod asking for `resources` has once admitted."""
        if not self.extended_resource_toleration:
            return constraints
        return constraints.with_tolerations(tolerations_for(resources))


def _untolerating(pods: Iterable[Pod]) -> tuple[Pod, str] | None:
    for pod in pods:
        if pod.mirror:
            continue  # static pods do not go through admission
        for resource, amount in pod.requests.items():
            if "/" in resource and amount > 0 and is_extended(resource) and pod.constraints.untolerated(
                    (Taint(resource, "present", "NoSchedule"),)) is not None:
                return pod, resource
    return None


def detect(snapshot: Snapshot, setting: bool | None = None) -> Admission:
    """Decide whether the ExtendedResourceToleration plugin runs (see the module's docstring)."""
    if setting is not None:
        return Admission(setting, "set in the scheduling policy")
    if not any(is_extended(taint.key) for node in snapshot.nodes for taint in node.taints):
        return Admission(False, "no node is tainted with an extended resource's name: the plugin changes nothing")
    found = _untolerating(snapshot.pods)
    if found is not None:
        pod, resource = found
        return Admission(False, f"pod {pod.namespace}/{pod.name} requests {resource} without a toleration of "
                         f"{resource} taints, so the ExtendedResourceToleration admission plugin is off")
    for node in snapshot.nodes:
        for label, platform in PLATFORMS:
            if label in node.labels:
                return Admission(True, f"{platform} (node {node.name}) runs the ExtendedResourceToleration "
                                 "admission plugin")
    return Admission(False, "the ExtendedResourceToleration admission plugin is not known to run "
                     "(upstream Kubernetes does not enable it)")
