"""Pods that belong to another gang mechanism than det-k8s's: whatever scheduler they name, det-k8s never binds them.

A pod's `schedulerName` says who places it; a gang mechanism says with whom. Where a pod names det-k8s's scheduler
name but belongs to another mechanism's group, binding it would start that group in part behind the mechanism's
back, so det-k8s leaves it alone (its resources count as held once someone binds it). The marks, each read from
the mechanism's own sources:

- Kubernetes' own gang scheduling (KEP-4671): `spec.schedulingGroup.podGroupName` (1.36+, core/v1 types.go
  `PodSchedulingGroup`; 1.35's `spec.workloadRef` was replaced by it and is read too);
- KAI-Scheduler: the `pod-group-name` annotation its pod-grouper sets (pkg/common/constants), or its queue label
  `kai.scheduler/queue`;
- Volcano: the `scheduling.k8s.io/group-name` or `scheduling.volcano.sh/group-name` annotation
  (volcano.sh/apis scheduling/v1beta1 `KubeGroupNameAnnotationKey`, `VolcanoGroupNameAnnotationKey`);
- scheduler-plugins' coscheduling: the `scheduling.x-k8s.io/pod-group` label (the old 1.18 plugin's
  `pod-group.scheduling.sigs.k8s.io/*` labels are the Determined master's own, and det-k8s serves them);
- YuniKorn: the `yunikorn.apache.org/task-group-name` annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KAI_ANNOTATION = "pod-group-name"
KAI_QUEUE = "kai.scheduler/queue"
VOLCANO_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
YUNIKORN_ANNOTATION = "yunikorn.apache.org/task-group-name"
ANNOTATION_KEYS = frozenset({KAI_ANNOTATION, *VOLCANO_ANNOTATIONS, YUNIKORN_ANNOTATION})
LABEL_KEYS = frozenset({KAI_QUEUE, COSCHEDULING_LABEL})
SPEC_KEYS = frozenset({"schedulingGroup", "workloadRef"})


def may_belong(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
    """A cheap test before `foreign_gang`: does the pod carry any of the keys at all (most pods carry none)?"""
    annotations, labels = meta.get("annotations"), meta.get("labels")
    return bool((isinstance(annotations, Mapping) and not ANNOTATION_KEYS.isdisjoint(annotations))
                or (isinstance(labels, Mapping) and not LABEL_KEYS.isdisjoint(labels))
                or (isinstance(spec, Mapping) and not SPEC_KEYS.isdisjoint(spec)))


def _text(mapping: Any, key: str) -> str:
    value = mapping.get(key) if isinstance(mapping, Mapping) else None
    return value if isinstance(value, str) else ""


def foreign_gang(obj: Mapping[str, Any]) -> str:
    """The other gang mechanism a pod object belongs to, as a phrase (`Volcano pod group train-1`), or ""."""
    raw_spec, raw_meta = obj.get("spec"), obj.get("metadata")
    spec: Mapping[str, Any] = raw_spec if isinstance(raw_spec, Mapping) else {}
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    group = spec.get("schedulingGroup")
    if isinstance(group, Mapping) and group:
        return f"Kubernetes PodGroup {_text(group, 'podGroupName') or '(unnamed)'}"
    ref = spec.get("workloadRef")
    if isinstance(ref, Mapping) and ref:
        return f"Kubernetes Workload {_text(ref, 'name') or '(unnamed)'}"
    annotations, labels = meta.get("annotations"), meta.get("labels")
    for key in VOLCANO_ANNOTATIONS:
        if _text(annotations, key):
            return f"Volcano pod group {_text(annotations, key)}"
    if _text(annotations, KAI_ANNOTATION):
        return f"KAI pod group {_text(annotations, KAI_ANNOTATION)}"
    if _text(labels, KAI_QUEUE):
        return f"KAI queue {_text(labels, KAI_QUEUE)}"
    if _text(labels, COSCHEDULING_LABEL):
        return f"coscheduling pod group {_text(labels, COSCHEDULING_LABEL)}"
    if _text(annotations, YUNIKORN_ANNOTATION):
        return f"YuniKorn task group {_text(annotations, YUNIKORN_ANNOTATION)}"
    return ""


def mechanism(gang: str) -> str:
    """The mechanism's name of a `foreign_gang` phrase (`Volcano`, `KAI`, `Kubernetes`, ...)."""
    return gang.split(" ", 1)[0]
