"""From an experiment to a pod group, and the Kubernetes objects that run it.

A task of N slots becomes N / maxSlotsPerPod pods (one pod when N <= maxSlotsPerPod), each asking
for its slots as `nvidia.com/gpu` (or `slotResourceRequests.cpu` x slots when slotType is cpu),
requests and limits alike, as the Determined master does. The group's requests and placement
constraints are computed from the very pod spec (and labels) the manifests are built from, so what
the scheduler counts is what Kubernetes will count. Manifests get stable DNS names through a
headless Service, so rank 0 is reachable as `<pod>.<service>.<namespace>.svc`.

Pods are pinned to the nodes the plan chose the way the DaemonSet controller pins its pods: a
required node affinity on the node's name (`pin`), not `spec.nodeName`. kube-scheduler then still
runs every filter and binds the pod, so volumes that wait for their first consumer are provisioned,
and a pod the plan got wrong stays Pending with reason Unschedulable instead of being refused by
the kubelet or starting without its volume (DEVELOPERS.md, "Pinning pods", has the trade-off).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..cluster.model import NAME_FIELD
from ..cluster.quota import facts_from_spec
from ..cluster.read import constraints_from_spec, effective_requests
from ..errors import Unschedulable
from ..quantity import format_cpu
from ..settings.model import Settings
from . import labels as L
from .experiments import Experiment
from .model import PodGroup, PodRequest
from .queues import POOL, WORKSPACE

CONTAINER = "determined-container"
CHIEF_PORT = 29500  # torch.distributed's default MASTER_PORT
PORT_NAME = "rendezvous"
SHORT_ID = 8
MAX_NAME = 63  # a pod's hostname is a DNS-1123 label


MAX_GROUP_PODS = 10_000  # twice Kubernetes' largest supported cluster (5,000 nodes): no gang is larger


def pods_for(slots: int, max_slots_per_pod: int | None) -> tuple[int, int]:
    """(pods, slots per pod) for a task of `slots` slots; raises Unschedulable when N does not divide.

    Answers at once however large `slots` is (no work proportional to it): a group of more than
    MAX_GROUP_PODS pods is refused before any pod is built.
    """
    if slots <= 1 or (max_slots_per_pod and slots <= max_slots_per_pod):
        return 1, slots
    if not max_slots_per_pod:
        raise Unschedulable(f"slots_per_trial {slots} needs maxSlotsPerPod to be set",
                            hint="set maxSlotsPerPod to the GPUs per node")
    pods = -(-slots // max_slots_per_pod)  # the pods it would take, a multiple or not
    if pods > MAX_GROUP_PODS:  # first: a multiple next to 99999999999 is no advice
        largest = MAX_GROUP_PODS * max_slots_per_pod
        raise Unschedulable(f"slots_per_trial {slots} would need {pods} pods of {max_slots_per_pod} slots; det-k8s "
                            f"starts at most {MAX_GROUP_PODS} pods as one group",
                            hint=f"no Kubernetes cluster can run it; use at most {largest} slots, a multiple of "
                                 f"{max_slots_per_pod}")
    if slots % max_slots_per_pod:
        lower = slots // max_slots_per_pod * max_slots_per_pod
        options = [n for n in (lower, lower + max_slots_per_pod) if 0 < n <= MAX_GROUP_PODS * max_slots_per_pod]
        raise Unschedulable(
            f"slots_per_trial {slots} is not a multiple of maxSlotsPerPod {max_slots_per_pod}",
            hint="use " + " or ".join(map(str, options)) + " slots")
    return pods, max_slots_per_pod


def dns_label(text: str, limit: int) -> str:
    """Lowercase letters, digits and '-', starting with a letter, at most `limit` characters."""
    cleaned = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")
    if not cleaned or not cleaned[0].isalpha():
        cleaned = f"exp-{cleaned}".rstrip("-")
    return cleaned[:limit].rstrip("-")


def short_id(group_id: str) -> str:
    cleaned = re.sub(r"[^a-z0-9]", "", group_id.lower())
    if len(cleaned) >= 4:
        return cleaned[:SHORT_ID]
    return hashlib.sha256(group_id.encode()).hexdigest()[:SHORT_ID]


def service_name(experiment: str, group_id: str, size: int) -> str:
    """`<experiment>-<short id>`, short enough that `<service>-<last rank>` is a valid hostname."""
    suffix = short_id(group_id)
    room = MAX_NAME - len(suffix) - 2 - len(str(max(size - 1, 0)))
    return f"{dns_label(experiment, room)}-{suffix}"


def group_service(group: PodGroup) -> str:
    return service_name(group.experiment, group.id, group.size)


def uses_gpu(experiment: Experiment, settings: Settings) -> bool:
    """GPU tasks use the GPU pod spec and image; 0-slot tasks and slotType cpu are CPU tasks."""
    return settings.slot_type != "cpu" and experiment.slots_per_trial > 0


def image_for(experiment: Experiment, settings: Settings) -> str:
    gpu = uses_gpu(experiment, settings)
    defaults = settings.task_defaults
    return (experiment.image(gpu) or (defaults.gpu_image if gpu else defaults.cpu_image)
            or settings.default_task_image(gpu))


def _slot_resources(settings: Settings, slots: int) -> dict[str, str]:
    if slots <= 0:
        return {}
    if settings.slot_type == "cpu":
        return {"cpu": format_cpu(settings.slot_request(slots)["cpu"])}
    return {settings.slot_resource: str(slots)}  # nvidia.com/gpu, or amd.com/gpu for slotType rocm


def _base_pod(experiment: Experiment, settings: Settings) -> dict[str, Any]:
    """The experiment's pod_spec, else the settings' default pod spec for its slot type (a copy)."""
    defaults = settings.task_defaults
    default = defaults.gpu_pod_spec if uses_gpu(experiment, settings) else defaults.cpu_pod_spec
    base = experiment.pod_spec or default
    return copy.deepcopy(dict(base)) if isinstance(base, Mapping) else {}


def pod_spec(experiment: Experiment, settings: Settings, slots: int) -> dict[str, Any]:
    """The pod spec of one task pod, before names, environment and placement are filled in."""
    spec = _base_pod(experiment, settings).get("spec")
    spec = dict(spec) if isinstance(spec, Mapping) else {}
    containers = [dict(c) for c in spec.get("containers") or () if isinstance(c, Mapping)]
    main = next((c for c in containers if c.get("name") == CONTAINER), None)
    if main is None:
        main = {"name": CONTAINER}
        containers.insert(0, main)
    resources = dict(main.get("resources") or {})
    slot = _slot_resources(settings, slots)
    resources["requests"] = {**(resources.get("requests") or {}), **slot}
    resources["limits"] = {**(resources.get("limits") or {}), **slot}
    main["resources"] = {k: v for k, v in resources.items() if v}
    main["image"] = image_for(experiment, settings)
    always = experiment.force_pull_image or settings.task_defaults.force_pull_image
    main["imagePullPolicy"] = "Always" if always else "IfNotPresent"
    if experiment.entrypoint:
        main["command"] = list(experiment.entrypoint)
        main.pop("args", None)
    ports = [p for p in main.get("ports") or ()
             if isinstance(p, Mapping) and p.get("containerPort") != CHIEF_PORT]
    main["ports"] = [*ports, {"name": PORT_NAME, "containerPort": CHIEF_PORT, "protocol": "TCP"}]
    spec["containers"] = containers
    spec["restartPolicy"] = "Never"
    return spec


def build_group(experiment: Experiment, settings: Settings, *, group_id: str, user: str, submitted_at: str,
                sequence: int, namespace: str = "default") -> PodGroup:
    """The queued form of an experiment's trial. Raises Unschedulable when its slots cannot be split.

    Its pods carry the labels and namespace their manifests will have, and the constraints of their
    spec: where it may run (a `nodeName` in the experiment's pod spec becomes a requirement on the
    node's name, as the pod is pinned by node affinity).
    """
    resources = experiment.config.get("resources") if isinstance(experiment.config, Mapping) else None
    pool = resources.get("resource_pool") if isinstance(resources, Mapping) else None
    count, per_pod = pods_for(experiment.slots_per_trial, settings.max_slots_per_pod_in(
        pool if isinstance(pool, str) and pool else None, experiment.slots_per_trial))
    spec = pod_spec(experiment, settings, per_pod)
    requests = effective_requests(spec, f"experiment {experiment.name}")
    service = service_name(experiment.name, group_id, count)
    unlabelled = PodGroup(group_id, experiment.name, user, experiment.priority, submitted_at, sequence,
                          tuple(PodRequest(f"{service}-{rank}", rank, requests) for rank in range(count)),
                          experiment.slots_per_trial)
    meta = _base_pod(experiment, settings).get("metadata")
    base_labels = _own_labels(meta.get("labels") if isinstance(meta, Mapping) else None)
    named = spec.get("nodeName")
    quota = facts_from_spec(spec, requests, f"experiment {experiment.name}")
    pods = []
    for pod in unlabelled.pods:
        labels = {**base_labels, **member_labels(experiment), **L.pod_labels(unlabelled, pod.rank)}
        constraints = constraints_from_spec(spec, namespace, labels)
        if named:
            constraints = constraints.on_node(str(named))
        pods.append(PodRequest(pod.name, pod.rank, requests, constraints, labels, namespace, quota=quota))
    return PodGroup(group_id, experiment.name, user, experiment.priority, submitted_at, sequence, tuple(pods),
                    experiment.slots_per_trial)


def pin(spec: Mapping[str, Any], node: str) -> dict[str, Any]:
    """The pod spec pinned to `node` as the DaemonSet controller pins: `metadata.name In [node]` in matchFields.

    The requirement is ANDed into every term of the pod's own required node affinity (or is its
    only term), so kube-scheduler checks both; `spec.nodeName` is dropped (it would skip the scheduler).
    """
    pinned = dict(spec)
    pinned.pop("nodeName", None)
    requirement = {"key": NAME_FIELD, "operator": "In", "values": [node]}
    affinity = dict(pinned.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if terms:
        new_terms = [{**term, "matchFields": [*(term.get("matchFields") or ()), requirement]}
                     for term in terms if isinstance(term, Mapping)]
    else:
        new_terms = [{"matchFields": [requirement]}]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        **(required if isinstance(required, Mapping) else {}), "nodeSelectorTerms": new_terms}
    affinity["nodeAffinity"] = node_affinity
    pinned["affinity"] = affinity
    return pinned


def _env(experiment: Experiment, settings: Settings, group: PodGroup, rank: int,
         namespace: str, existing: Sequence[Any]) -> list[dict[str, str]]:
    chief = f"{group.pods[0].name}.{group_service(group)}.{namespace}.svc"
    rendezvous = {
        "DET_K8S_WORLD_SIZE": str(group.size), "DET_K8S_RANK": str(rank),
        "DET_K8S_SLOTS_PER_POD": str(group.slots_per_pod), "DET_K8S_CHIEF_ADDR": chief,
        "DET_K8S_CHIEF_PORT": str(CHIEF_PORT), "DET_K8S_GROUP": group.id,
        "WORLD_SIZE": str(group.size), "RANK": str(rank),
        "MASTER_ADDR": chief, "MASTER_PORT": str(CHIEF_PORT),
    }
    ours = dict(experiment.environment_variables(uses_gpu(experiment, settings)))
    ours.update(rendezvous)
    kept = [dict(e) for e in existing if isinstance(e, Mapping) and e.get("name") not in ours]
    return kept + [{"name": name, "value": value} for name, value in ours.items()]


def member_labels(experiment: Experiment) -> dict[str, str]:
    """The experiment's `workspace` and `resources.resource_pool` as the master's pods carry them: what team queues
    name their members by (`queues.QueueTree.leaf_for`), for the group queued and for its pods once running."""
    found = {WORKSPACE: experiment.workspace, POOL: experiment.resource_pool}
    return {key: value for key, value in found.items() if value}


def _own_labels(labels: Any) -> dict[str, str]:
    """The base pod spec's labels a det-k8s pod carries: never one the master acts on (`labels.MASTER_LABELS`; the
    settings' default pod spec serves the master's pods too, where they are the master's business; an experiment's
    own pod_spec with one is refused when it is read)."""
    items = labels.items() if isinstance(labels, Mapping) else ()
    return {str(k): str(v) for k, v in items if str(k) not in L.MASTER_LABELS}


def pod_manifests(group: PodGroup, experiment: Experiment, settings: Settings,
                  placement: Mapping[str, str] | Sequence[tuple[str, str]],
                  namespace: str) -> list[dict[str, Any]]:
    """Complete Pod objects for every pod of the group, pinned to their nodes (`pin`; "" leaves a pod unpinned)."""
    nodes = dict(placement)
    missing = [pod.name for pod in group.pods if pod.name not in nodes]
    if missing:
        raise ValueError(f"no node for pods {', '.join(missing)}")
    base = _base_pod(experiment, settings)
    meta = base.get("metadata")
    base_meta: Mapping[str, Any] = meta if isinstance(meta, Mapping) else {}
    service = group_service(group)
    manifests = []
    for pod in group.pods:
        spec = pod_spec(experiment, settings, group.slots_per_pod)
        main = next(c for c in spec["containers"] if c.get("name") == CONTAINER)
        main["env"] = _env(experiment, settings, group, pod.rank, namespace, main.get("env") or ())
        spec.update(hostname=pod.name, subdomain=service)
        if nodes[pod.name]:
            spec = pin(spec, nodes[pod.name])
        manifests.append({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod.name,
                "namespace": namespace,
                "labels": {**_own_labels(base_meta.get("labels")), **member_labels(experiment),
                           **L.pod_labels(group, pod.rank)},
                "annotations": {**(base_meta.get("annotations") or {}), L.SUBMITTED_AT: group.submitted_at},
            },
            "spec": spec,
        })
    return manifests


def headless_service_manifest(group: PodGroup, namespace: str) -> dict[str, Any]:
    """The Service that gives the group's pods stable DNS names, ready or not."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": group_service(group), "namespace": namespace, "labels": L.group_labels(group)},
        "spec": {
            "clusterIP": "None",
            "selector": {L.GROUP: L.label_value(group.id)},
            "publishNotReadyAddresses": True,
            "ports": [{"name": PORT_NAME, "port": CHIEF_PORT, "targetPort": CHIEF_PORT, "protocol": "TCP"}],
        },
    }
