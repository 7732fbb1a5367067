"""Task pods: the pods the Determined master starts for experiments, commands and notebooks.

Every task pod and its same-named ConfigMap carry the label `determined` (value: the
allocation ID), which is what `kubectl get pods -l=determined` in the documents selects. Pod
names start with the task's description: `exp-<id>-trial-<id>-...` for trials, `cmd-...` for
commands, notebooks, shells and TensorBoards, `gc-...` for checkpoint GC.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TASK_LABEL = "determined"
# det-k8s's own gang-scheduled pods never carry `determined` (the 0.17 master deletes such pods when it starts;
# scheduling/labels.py), so this selector finds only the master's. The managed-by guard stays for pods an older
# det-k8s labelled `determined`: they belong to its queue, and `det-k8s experiment kill` is the way to stop them.
MASTER_TASKS = f"{TASK_LABEL},app.kubernetes.io/managed-by!=det-k8s"
_TRIAL = re.compile(r"^exp-(\d+)-trial-(\d+)")


def only_task_pods(selector: str | None) -> str:
    """A selector that never reaches beyond the master's task pods: the user's selector AND MASTER_TASKS."""
    parts = [p.strip() for p in (selector or "").split(",") if p.strip()]
    return ",".join([MASTER_TASKS, *(p for p in parts if p != TASK_LABEL)])


def is_live(pod: Mapping[str, Any]) -> bool:
    """Not finished and not already being deleted."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not meta.get("deletionTimestamp")


@dataclass(frozen=True)
class TaskGroup:
    """The pods of one allocation (one trial run, one command...)."""

    allocation: str
    description: str
    namespace: str
    pods: tuple[str, ...]


def describe_task(pod_name: str) -> str:
    match = _TRIAL.match(pod_name)
    if match:
        return f"experiment {match.group(1)}, trial {match.group(2)}"
    if pod_name.startswith("cmd-"):
        return "command, notebook, shell or TensorBoard"
    if pod_name.startswith("gc-"):
        return "checkpoint garbage collection"
    return "task"


def group_tasks(pods: Sequence[Mapping[str, Any]]) -> list[TaskGroup]:
    groups: dict[tuple[str, str], list[str]] = {}
    descriptions: dict[tuple[str, str], str] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str((meta.get("labels") or {}).get(TASK_LABEL) or ""))
        groups.setdefault(key, []).append(str(meta.get("name") or ""))
        descriptions.setdefault(key, describe_task(str(meta.get("name") or "")))
    return [TaskGroup(alloc, descriptions[(ns, alloc)], ns, tuple(sorted(names)))
            for (ns, alloc), names in sorted(groups.items())]


def age(created: str, now: datetime.datetime | None = None) -> str:
    """kubectl-style age: 45s, 12m, 5h, 3d."""
    if not created:
        return ""
    try:
        then = datetime.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        return ""
    seconds = max(int(((now or datetime.datetime.now(datetime.UTC)) - then).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
