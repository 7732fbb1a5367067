"""Kubernetes' own gang scheduling (KEP-4671) for det-k8s's own experiments: placement handed to kube-scheduler.

det-k8s keeps the queue: `schedule()` still decides *when* a group is released (priority, fair share, team
queues, ResourceQuotas, reservations, preemption). What changes is how a released group is placed. With the
placement `det-k8s` (the way before this module) each pod is pinned to the node the plan chose
(`groups.pin`). With `native`, det-k8s creates a `scheduling.k8s.io` PodGroup whose gang policy asks for every
pod of the group (`minCount` = the group's size) and pods that name it (`spec.schedulingGroup.podGroupName`),
unpinned: kube-scheduler places the whole group in one cycle or none of it, with every filter it owns (DRA
claims, volumes). `auto` is `native` where the cluster serves the PodGroup API, else `det-k8s`.

The API, read from the sources (k8s.io/api v0.36.3 and v0.37.2, k8s.io/kubernetes v1.36.3 and v1.37.2):
- 1.36: `scheduling.k8s.io/v1alpha2` PodGroup, `spec.schedulingPolicy.gang.minCount`, status condition
  `PodGroupScheduled`; feature gates `GenericWorkload` (kube-apiserver serves podgroups, kube-scheduler's v1alpha2
  informer) and `GangScheduling` (kube-scheduler's plugin; it requires GenericWorkload), both alpha and off; runtime
  config `scheduling.k8s.io/v1alpha2=true`.
- 1.37: `scheduling.k8s.io/v1beta1` (Beta, off by default) with the same spec fields; condition
  `PodGroupInitiallyScheduled` (reasons `Unschedulable`, `SchedulerError`). One gate, `GenericWorkload`, on
  kube-apiserver (it serves podgroups only with it), kube-scheduler (the GangScheduling plugin, a v1beta1
  informer) and kube-controller-manager (the podgroup-protection finalizer); `--runtime-config=
  scheduling.k8s.io/v1beta1=true` on kube-apiserver. 1.37 also serves `v1alpha3`, but its kube-scheduler
  watches only v1beta1, so v1alpha3 alone is not a working gang scheduler and is not used.
The pod field `spec.schedulingGroup` is dropped by an API server without the gate, so discovery (which lists
podgroups only with the gate on) is the test.

The master's pods keep det-k8s's binder (their spec is the master's, it cannot name a PodGroup).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..cluster.model import Pod
from ..errors import DetK8sError
from ..kube.api import KubeApi
from ..kube.kinds import pod_groups
from ..labels import GROUP, MANAGED_BY, MANAGER, PLANNED_NODE
from ..scheduling.model import PLACEMENTS

VERSIONS = ("v1beta1", "v1alpha2")  # preferred first
SCHEDULED_CONDITIONS = ("PodGroupInitiallyScheduled", "PodGroupScheduled")  # 1.37, 1.36


def served_version(api: KubeApi) -> str | None:
    """The newest scheduling.k8s.io version whose discovery document lists podgroups, or None (not served, or
    discovery failed: then det-k8s places the group itself, as it always could)."""
    for version in VERSIONS:
        try:
            document = api.request("GET", f"/apis/scheduling.k8s.io/{version}",
                                   what=f"discovery of scheduling.k8s.io/{version}")
        except DetK8sError:
            continue
        resources = document.get("resources") if isinstance(document, Mapping) else None
        if isinstance(resources, list) and any(isinstance(r, Mapping) and r.get("name") == "podgroups"
                                               for r in resources):
            return version
    return None


def check_placement(value: str, where: str) -> str:
    """`value` if it is a placement mode, else ValueError naming `where` and the choices."""
    if value not in PLACEMENTS:
        raise ValueError(f"{where} {value!r}: expected {', '.join(PLACEMENTS)}")
    return value


def pod_group_name(group_id: str) -> str:
    return f"det-k8s-{group_id}"


def pod_group_manifest(name: str, namespace: str, version: str, size: int, group_id: str,
                       owner: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The PodGroup of a det-k8s group: a gang of all its pods. `owner` (the queue entry's ConfigMap: name and
    uid) makes the garbage collector delete it with the experiment."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace,
                            "labels": {MANAGED_BY: MANAGER, GROUP: group_id}}
    if owner and owner.get("uid"):
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner["name"],
                                    "uid": owner["uid"]}]
    return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup", "metadata": meta,
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}}


def member(manifest: Mapping[str, Any], pod_group: str, planned_node: str) -> dict[str, Any]:
    """A pod manifest naming the PodGroup, unpinned. The planned node is only an annotation: the next pass counts
    the pod's resources there until kube-scheduler binds it (to that node or another one with the same room)."""
    meta = dict(manifest.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), PLANNED_NODE: planned_node}
    spec = dict(manifest.get("spec") or {})
    spec.pop("nodeName", None)
    spec["schedulingGroup"] = {"podGroupName": pod_group}
    return {**manifest, "metadata": meta, "spec": spec}


def why_unplaced(pod_group: Mapping[str, Any] | None, pods: Sequence[tuple[str, str]]) -> str:
    """Why kube-scheduler has not placed a released group yet, from the PodGroup's scheduled condition and the
    unbound pods' (name, PodScheduled=False message); "" when nothing says (kube-scheduler has not got to it)."""
    parts = []
    for condition in ((pod_group or {}).get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") in SCHEDULED_CONDITIONS \
                and condition.get("status") == "False":
            parts.append(f"pod group {condition.get('reason') or 'not scheduled'}: {condition.get('message') or ''}"
                         .rstrip(": "))
    seen: set[str] = set()
    for name, message in pods:
        if message and message not in seen:
            seen.add(message)
            parts.append(f"pod {name}: {message}")
    text = "; ".join(parts[:3])
    return f"waiting for kube-scheduler to place the whole group: {text}" if text else ""


def unplaced_reason(api: KubeApi, namespace: str, ref: str, unbound: Sequence[Pod]) -> str:
    """`why_unplaced` for a running group's unbound pods and its PodGroup ("<version>/<name>", read now)."""
    version, _, name = ref.partition("/")
    try:
        pod_group: Mapping[str, Any] | None = api.get(pod_groups(version), name, namespace)
    except DetK8sError:
        pod_group = None
    return why_unplaced(pod_group, [(p.name, p.unschedulable) for p in unbound])
