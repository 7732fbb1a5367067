"""A group's labels on det-k8s task pods, and reading running groups back from them (the keys: det_k8s/labels.py).

det-k8s's pods carry det-k8s.io/* labels that let any det-k8s process rebuild the running groups
(who, what priority, which rank of how many) from a pod list alone, and `app.kubernetes.io/managed-by:
det-k8s`; `kubectl get pods -l det-k8s.io/group` lists them.

They never carry a label the Determined master acts on (`MASTER_LABELS`): the 0.17 master deletes every
Pod and ConfigMap labelled `determined` in its namespace each time it starts (0.17.15
master/internal/resourcemanagers/kubernetes/pods.go, deleteExistingKubernetesResources), subtracts the
CPU requests of `determined-system` pods from its CPU slots, and checkpoints and stops a task whose pods
get `determined-preemption`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..cluster.model import Pod
from ..labels import (  # the keys' one home; re-exported for the readers of `labels as L`
    DETERMINED as DETERMINED,
)
from ..labels import (
    EXPERIMENT as EXPERIMENT,
)
from ..labels import (
    GROUP as GROUP,
)
from ..labels import (
    MANAGED_BY as MANAGED_BY,
)
from ..labels import (
    MANAGER as MANAGER,
)
from ..labels import (
    MASTER_LABELS as MASTER_LABELS,
)
from ..labels import (
    PREEMPTED_AT as PREEMPTED_AT,
)
from ..labels import (
    PREEMPTION_NOTICE as PREEMPTION_NOTICE,
)
from ..labels import (
    PRIORITY as PRIORITY,
)
from ..labels import (
    RANK as RANK,
)
from ..labels import (
    SIZE as SIZE,
)
from ..labels import (
    SUBMITTED_AT as SUBMITTED_AT,
)
from ..labels import (
    USER as USER,
)
from .model import DEFAULT_PRIORITY, PodGroup, RunningGroup, RunningPod

_INVALID = re.compile(r"[^A-Za-z0-9._-]+")
_EDGES = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def label_value(text: str) -> str:
    """`text` as a valid label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends."""
    cleaned = _EDGES.sub("", _INVALID.sub("-", text))
    return _EDGES.sub("", cleaned[:63])


def group_labels(group: PodGroup) -> dict[str, str]:
    """Labels every pod (and the Service) of a group carries."""
    return {
        MANAGED_BY: MANAGER,
        GROUP: label_value(group.id),
        EXPERIMENT: label_value(group.experiment),
        USER: label_value(group.user),
        PRIORITY: str(group.priority),
        SIZE: str(group.size),
    }


def pod_labels(group: PodGroup, rank: int) -> dict[str, str]:
    return {**group_labels(group), RANK: str(rank)}


def is_managed(labels: Mapping[str, str]) -> bool:
    """True for pods det-k8s created (the only pods it may ever evict)."""
    return labels.get(MANAGED_BY) == MANAGER and bool(labels.get(GROUP))


_TRIAL = re.compile(r"exp-(\d+)-trial-(\d+)")


def determined_task(pod: Pod) -> str | None:
    """How a pod the Determined master created is known to its users (`exp 12 trial 34`, `command <id>`, else its
    allocation), or None for any other pod (det-k8s's own never carry the `determined` label)."""
    labels = pod.labels
    allocation = labels.get(DETERMINED)
    if allocation is None or is_managed(labels):
        return None
    experiment, trial = labels.get("determined.ai/experiment_id"), labels.get("determined.ai/trial_id")
    if experiment and trial:
        return f"exp {experiment} trial {trial}"
    if match := _TRIAL.search(pod.name):
        return f"exp {match[1]} trial {match[2]}"
    task_type = labels.get("determined.ai/task_type")
    if task_type:
        return f"{task_type.lower()} {labels.get('determined.ai/task_id', '')}".strip()
    return allocation


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def running_groups(pods: Iterable[Pod]) -> tuple[RunningGroup, ...]:
    """The det-k8s groups whose pods hold resources now, sorted by id.

    Only active pods (bound, not finished) count; a group whose pods all finished is not running.
    A group with a pod being deleted is marked terminating: it is already on its way out.
    """
    found: dict[str, list[Pod]] = {}
    for pod in pods:
        if is_managed(pod.labels):
            found.setdefault(pod.labels[GROUP], []).append(pod)
    groups = []
    for group_id in sorted(found):
        members = found[group_id]
        active = sorted((p for p in members if p.active), key=lambda p: (_int(p.labels.get(RANK), 0), p.name))
        if not active:
            continue
        first = active[0].labels
        groups.append(RunningGroup(
            id=group_id,
            experiment=first.get(EXPERIMENT, group_id),
            user=first.get(USER, ""),
            priority=_int(first.get(PRIORITY), DEFAULT_PRIORITY),
            pods=tuple(RunningPod(p.name, p.node or "", p.requests) for p in active),
            started_at=min((p.created for p in members if p.created), default=""),
            terminating=any(p.deleting for p in members),
            size=_int(first.get(SIZE), len(active)),
        ))
    return tuple(groups)
