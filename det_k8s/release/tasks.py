"""Task pods: the pods the Determined master starts for experiments, commands and notebooks.

Every task pod and its same-named ConfigMap carry the label `determined` (value: the
allocation ID), which is what `kubectl get pods -l=determined` in the documents selects. Pod
names start with the task's description: `exp-<id>-trial-<id>-...` for trials, `cmd-...` for
commands, notebooks, shells and TensorBoards, `gc-...` for checkpoint GC.

From Determined 0.34.0 (the version table's `tasks.jobs`) the master's unit is a batch/v1 Job per
allocation, `det-<clusterID[:8]>-<description>`, labelled `determined` like its pods and its
same-named ConfigMap; its pods are the Job controller's (`<job>-<5 chars>`, owned by the Job,
labelled `batch.kubernetes.io/job-name`). Such a pod is never deleted alone: the Job, deleted with
propagation, takes its pods with it (`units`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..labels import DETERMINED as TASK_LABEL
from ..labels import MANAGED_BY, MANAGER

# det-k8s's own gang-scheduled pods never carry `determined` (the 0.17 master deletes such pods when it starts;
# scheduling/labels.py), so this selector finds only the master's. The managed-by guard stays for pods an older
# det-k8s labelled `determined`: they belong to its queue, and `det-k8s experiment kill` is the way to stop them.
MASTER_TASKS = f"{TASK_LABEL},{MANAGED_BY}!={MANAGER}"
_TRIAL = re.compile(r"^(?:det-[0-9a-z]{1,8}-)?exp-(\d+)-trial-(\d+)")  # 0.34+: det-<clusterID[:8]>-exp-...
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")  # set by the Job controller (job-name before 1.27)


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
    name = re.sub(r"^det-[0-9a-z]{1,8}-", "", pod_name)
    if name.startswith("cmd-"):
        return "command, notebook, shell or TensorBoard"
    if name.startswith("gc-"):
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


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(_meta(obj).get("namespace") or ""), str(_meta(obj).get("name") or "")


def owning_job(pod: Mapping[str, Any]) -> str | None:
    """The name of the batch/v1 Job that controls `pod` (0.34+ task pods), or None for a bare pod."""
    for ref in _meta(pod).get("ownerReferences") or []:
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/") and ref.get("controller"):
            return str(ref.get("name") or "") or None
    labels = _meta(pod).get("labels") or {}
    return next((str(labels[k]) for k in JOB_NAME_LABELS if labels.get(k)), None)


def is_master_task(obj: Mapping[str, Any]) -> bool:
    """Labelled `determined` and not det-k8s's own (what MASTER_TASKS selects)."""
    labels = _meta(obj).get("labels") or {}
    return TASK_LABEL in labels and labels.get(MANAGED_BY) != MANAGER


@dataclass(frozen=True)
class TaskUnits:
    """The master's units of work and what deleting them takes: each Job with its pods (0.34+), the bare pods
    (before 0.34), the ConfigMaps named after either. `held`: pods whose Job is not deleted here (it could not be
    read, or is not the master's); they are never deleted alone, as the Job controller would replace them or fail
    the Job, and the Job and its ConfigMap would stay."""

    jobs: tuple[Mapping[str, Any], ...]
    job_pods: Mapping[tuple[str, str], tuple[str, ...]]  # (namespace, job) -> the pods it takes with it
    pods: tuple[Mapping[str, Any], ...]
    configmaps: tuple[Mapping[str, Any], ...]
    held: Mapping[tuple[str, str], tuple[str, ...]]  # (namespace, job) -> its pods, not deleted

    @property
    def empty(self) -> bool:
        return not (self.jobs or self.pods or self.configmaps)

    @property
    def pod_count(self) -> int:
        """Every pod that goes: the bare ones and those the Jobs take with them."""
        return len(self.pods) + sum(len(p) for p in self.job_pods.values())

    def lines(self) -> list[str]:
        """One line per object that goes (`Kind namespace/name`), a Job with the pods it takes."""
        out = []
        for job in self.jobs:
            pods = self.job_pods.get(_key(job), ())
            taken = f" with its {len(pods)} pod(s): {', '.join(pods)}" if pods else " (no pods left)"
            out.append(f"Job {'/'.join(_key(job))}{taken}")
        out += [f"Pod {'/'.join(_key(p))}" for p in self.pods]
        out += [f"ConfigMap {'/'.join(_key(c))}" for c in self.configmaps]
        return out

    def summary(self) -> str:
        """`2 Job(s) with their 3 pod(s), 1 pod(s) and 3 ConfigMap(s)`."""
        taken = sum(len(p) for p in self.job_pods.values())
        jobs = f"{len(self.jobs)} Job(s) with their {taken} pod(s), " if self.jobs else ""
        return f"{jobs}{len(self.pods)} pod(s) and {len(self.configmaps)} ConfigMap(s)"


def units(jobs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
          configmaps: Sequence[Mapping[str, Any]], all_pods: Sequence[Mapping[str, Any]] | None = None) -> TaskUnits:
    """What deleting the master's selected objects takes. `pods` are the selected task pods, `jobs` the selected
    Jobs plus the Job of every selected pod that has one (the caller fetches those), `all_pods` every task pod
    (to say which pods each Job takes; default `pods`). A selected pod whose Job is not the master's or not in
    `jobs` is `held`."""
    master_jobs = [j for j in jobs if is_master_task(j)]
    known = {_key(j) for j in master_jobs}
    taken: dict[tuple[str, str], list[str]] = {key: [] for key in known}
    for pod in all_pods if all_pods is not None else pods:
        job = owning_job(pod)
        if job is not None and (_key(pod)[0], job) in known:
            taken[(_key(pod)[0], job)].append(_key(pod)[1])
    bare: list[Mapping[str, Any]] = []
    held: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        job = owning_job(pod)
        if job is None:
            bare.append(pod)
        elif (_key(pod)[0], job) not in known:
            held.setdefault((_key(pod)[0], job), []).append(_key(pod)[1])
    names = known | {_key(p) for p in bare}
    maps = [c for c in configmaps if _key(c) in names]
    return TaskUnits(tuple(master_jobs), {k: tuple(sorted(set(v))) for k, v in taken.items()}, tuple(bare),
                     tuple(maps), {k: tuple(sorted(v)) for k, v in held.items()})
