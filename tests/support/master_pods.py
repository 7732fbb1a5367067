"""Task pods exactly as each supported Determined master creates them, for the scheduling tests.

Every shape here comes from the facts document (`../shared/research/determined-versions.md`, section 6,
"Task pods the master creates", read from Determined's source at 0.17.15, 0.26.2 and v0.38.1) through the
version table (`det_k8s.determined.versions`, the "task pods" rows), so a fact changes in one place:

- 0.17.15 and 0.26.2 create one bare Pod per pod, named `<Description>-<rank>-<allocationID>-<petname>`
  (trials: Description `exp-<E>-trial-<T>`), labelled only `determined=<allocationID>` (plus the gang labels);
  0.17.15 adds the Fluent Bit sidecar, 0.26.2 the node-disable affinity `determined.ai/cluster-id-<id>
  DoesNotExist`.
- v0.38.1 creates one batch/v1 Job per allocation (`det-<clusterID[:8]>-exp-<E>-trial-<T>-attempt-<run>`,
  parallelism = completions = pods, backoffLimit 0, ttlSecondsAfterFinished 900); the Job controller creates
  the pods as `<job>-<5 chars>` with the template's labels (`determined`, `determined.ai/*`) plus its own
  (`batch.kubernetes.io/job-name`, `job-name`, controller uid) and an owner reference to the Job.
- With `default_scheduler: coscheduler` (or `preemption` before 0.36), `schedulerName` names that scheduler
  and the pods carry `pod-group.scheduling.sigs.k8s.io/name` (the first four dash fields of the pod name
  before 0.34, e.g. `exp12trial34`; the Job name from 0.34) and `/min-available` = ceil(slots_per_trial /
  slots per pod) for CUDA slots, 0 for CPU slots.
- A PriorityClass `<id>-priorityclass` (value = resources.priority, preemptionPolicy Never; id = the
  container id before 0.34, the allocation id from 0.34) is created first and named by the pod, whose
  `spec.priority` the API server's priority admission then resolves.
- Every pod has the init container `determined-init-container` and the container `determined-container`
  requesting (and limited to) `nvidia.com/gpu: <slots per pod>`, or `cpu: slots x slot cpu` for CPU slots.

`create_task(api, task)` sends the objects through the real `kubernetes` client, as the master does (the
Job controller's part included for Jobs), so the emulator's admission and schema checks apply.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from det_k8s.determined.versions import Version, fact, has, v
from det_k8s.kube.api import KubeApi
from det_k8s.kube.kinds import PODS, Kind

PRIORITY_CLASSES = Kind("priority class", "/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False)
JOBS = Kind("job", "/apis/batch/v1", "jobs")

VERSIONS = ("0.17.15", "0.26.2", "0.38.1")
GANG_NAME = "pod-group.scheduling.sigs.k8s.io/name"
MIN_AVAILABLE = fact("tasks.gang.min_available").value
ALLOCATION = fact("tasks.label.allocation").value  # "determined"
PETNAMES = ("able-ant", "brave-bee", "calm-cat", "deft-doe", "eager-elk", "fair-fox", "glad-gnu", "hale-hen")


@dataclass
class MasterTask:
    """One allocation of a task as the master submits it: its PriorityClasses, its Job (0.34+) and its pods."""

    version: Version
    namespace: str
    allocation: str
    description: str
    pods: list[dict[str, Any]]
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    job: dict[str, Any] | None = None
    user: str = ""
    min_available: int = 0

    @property
    def names(self) -> list[str]:
        return [p["metadata"]["name"] for p in self.pods]

    @property
    def group_name(self) -> str:
        return str(self.pods[0]["metadata"]["labels"].get(GANG_NAME, ""))


def master_task(version: str, *, experiment: int = 1, trial: int = 1, slots_per_trial: int = 4,
                max_slots_per_pod: int = 4, priority: int | None = 50, user: str = "alice",
                namespace: str = "default", scheduler: str | None = "coscheduler", slot_type: str = "cuda",
                slot_cpu: float = 1.0, run: int = 1, task_type: str = "TRIAL", cluster_id: str | None = None,
                image: str = "determinedai/pytorch-ngc:0.38.1") -> MasterTask:
    """The objects the master of `version` creates for one allocation of a trial (or, with task_type, another task).

    `scheduler` is resource_manager.default_scheduler as the chart wrote it (None: unset, so no gang labels and
    kube-scheduler's default). Pods per task: slots_per_trial / max_slots_per_pod when it divides, else one pod.
    """
    ver = v(version)
    cluster = cluster_id or str(uuid.uuid5(uuid.NAMESPACE_DNS, "det.example.com"))  # one cluster id per master
    if slots_per_trial > max_slots_per_pod > 0:
        if slots_per_trial % max_slots_per_pod:
            raise ValueError("the master rejects (0.34+) or never schedules a non-multiple")
        count, per_pod = slots_per_trial // max_slots_per_pod, max_slots_per_pod
    else:
        count, per_pod = 1, slots_per_trial
    trial_task = task_type == "TRIAL"
    task_id = f"{experiment}.{uuid.uuid4()}" if trial_task else str(uuid.uuid4())
    allocation = f"{task_id}.{run}"
    if trial_task:
        description = f"exp-{experiment}-trial-{trial}"
    else:
        description = f"cmd-{task_id}" if has("tasks.description.cmd_suffix", ver) else "cmd"
    gang = scheduler in ("coscheduler", "preemption") and (trial_task or has("tasks.description.cmd_suffix", ver))
    min_available = math.ceil(slots_per_trial / per_pod) if slot_type == "cuda" and per_pod > 0 else 0
    jobs = has("tasks.jobs", ver)
    job_name = f"det-{cluster[:8]}-{description}" + (f"-attempt-{run}" if trial_task else "")
    labels: dict[str, str] = {ALLOCATION: allocation}
    if has("tasks.label.user", ver):
        labels.update({fact("tasks.label.user").value: user, fact("tasks.label.task_type").value: task_type,
                       "determined.ai/workspace": "Uncategorized", "determined.ai/resource_pool": "default",
                       "determined.ai/task_id": task_id, "determined.ai/container_id": allocation})
        if trial_task:
            labels.update({fact("tasks.label.experiment").value: str(experiment), "determined.ai/trial_id": str(trial)})
    if has("tasks.label.allocation_id", ver):
        labels[fact("tasks.label.allocation_id").value] = allocation
    classes: list[dict[str, Any]] = []
    pods = []
    for rank in range(1 if jobs else count):
        container_id = allocation if jobs else str(uuid.uuid4())
        class_name = None
        if priority is not None and (trial_task or has("tasks.description.cmd_suffix", ver)):
            class_name = f"{container_id}-priorityclass"
            classes.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                            "metadata": {"name": class_name}, "value": priority, "globalDefault": False,
                            "description": "temporary priorityClass for determined", "preemptionPolicy": "Never"})
        name = job_name if jobs else f"{description}-{rank}-{allocation}-{PETNAMES[(rank + experiment) % 8]}"
        pod_labels = dict(labels)
        if gang:
            pod_labels[GANG_NAME] = job_name if jobs else "".join(name.split("-")[:4])
            pod_labels[MIN_AVAILABLE] = str(min_available)
        pods.append(_pod(ver, name, namespace, pod_labels, per_pod, slot_type, slot_cpu, scheduler if gang else None,
                         class_name, image, cluster, count))
    task = MasterTask(ver, namespace, allocation, description, pods, classes, user=user, min_available=min_available)
    if jobs:
        template = pods[0]
        template["metadata"]["labels"]["determined-queue-position"] = "0"
        task.job = {"apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": job_name, "namespace": namespace, "labels": dict(labels)},
                    "spec": {"parallelism": count, "completions": count, "backoffLimit": 0,
                             "ttlSecondsAfterFinished": 900,
                             "template": {"metadata": {"labels": template["metadata"]["labels"]},
                                          "spec": template["spec"]}}}
        task.pods = []  # the Job controller creates them (create_task)
        task.min_available = min_available
        task.pods = [_job_pod(task.job, i) for i in range(count)]
    return task


def _pod(ver: Version, name: str, namespace: str, labels: dict[str, str], per_pod: int, slot_type: str,
         slot_cpu: float, scheduler: str | None, class_name: str | None, image: str, cluster: str,
         count: int) -> dict[str, Any]:
    if slot_type == "cpu":
        amount = {"cpu": f"{int(slot_cpu * per_pod * 1000)}m"}
    elif slot_type == "rocm":  # 0.36+: `amd.com/gpu` (facts, section 7), never gang-labelled (min-available 0)
        amount = {"amd.com/gpu": str(per_pod)}
    elif per_pod > 0 or not has("tasks.node_disable_affinity", ver):  # 0.17.x asks for `nvidia.com/gpu: 0` too
        amount = {"nvidia.com/gpu": str(per_pod)}
    else:
        amount = {}
    env = [{"name": "DET_MASTER", "value": "determined-master-service-det.default.svc.cluster.local:8080"},
           {"name": "DET_SLOT_IDS", "value": "[" + ",".join(map(str, range(per_pod))) + "]"}]
    if has("tasks.jobs", ver):
        env += [{"name": "DET_KUBERNETES_JOB_PARALLELISM", "value": str(count)},
                {"name": "DET_AGENT_ID", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    else:
        env.append({"name": "DET_AGENT_ID", "value": "k8agent"})
    containers: list[dict[str, Any]] = [{
        "name": "determined-container", "image": image, "command": ["/run/determined/temp/entrypoint.sh"],
        "env": env, "resources": {"requests": dict(amount), "limits": dict(amount)},
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}]
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                                     {"name": "det-archives", "configMap": {"name": name}}]
    if has("tasks.fluent_sidecar", ver):
        containers.insert(0, {"name": fact("tasks.fluent_sidecar").value, "image": "fluent/fluent-bit:1.6",
                              "volumeMounts": [{"name": "det-logs", "mountPath": "/run/determined/fluent"}]})
        volumes.append({"name": "det-logs", "emptyDir": {"medium": "Memory"}})
    spec: dict[str, Any] = {
        "initContainers": [{"name": "determined-init-container", "image": image,
                            "command": ["/run/determined/temp/k8_init_container_entrypoint.sh", "1",
                                        "/run/determined/temp/tar/src", "/run/determined/temp/tar/dst"]}],
        "containers": containers, "volumes": volumes, "restartPolicy": "Never", "hostNetwork": False,
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    if class_name:
        spec["priorityClassName"] = class_name
    if has("tasks.node_disable_affinity", ver):
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": f"determined.ai/cluster-id-{cluster}", "operator": "DoesNotExist"}]}]}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec}


def _job_pod(job: dict[str, Any], index: int) -> dict[str, Any]:
    """A pod as the Job controller creates it from the Job's template."""
    name = job["metadata"]["name"]
    suffix = "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
    labels = {**job["spec"]["template"]["metadata"]["labels"]}
    for key in fact("tasks.label.job_name").value:
        labels[key] = name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{suffix}", "namespace": job["metadata"]["namespace"], "labels": labels,
                         "finalizers": ["batch.kubernetes.io/job-tracking"]},
            "spec": {**job["spec"]["template"]["spec"]}}


def create_task(api: KubeApi, task: MasterTask, *, pods: int | None = None, job_controller: bool = False
                ) -> MasterTask:
    """Create the task's objects through the API as the master (and the Job controller) would.

    `pods` creates only the first N pods (a master still creating them); `create_pods` adds the rest.
    `job_controller`: the cluster runs the real Job controller (tests/support/realkube), which creates a Job's pods itself:
    only the Job is created, and `task.pods` become the pods the controller made.
    """
    from det_k8s.errors import Conflict

    for priority_class in task.priority_classes:
        with contextlib.suppress(Conflict):  # one class per priority value may already exist
            api.create(PRIORITY_CLASSES, priority_class)
    if task.job is not None and job_controller:
        created = api.create(JOBS, task.job, task.namespace)
        want, uid = len(task.pods), created["metadata"]["uid"]
        deadline = time.monotonic() + 60
        while True:
            made = [p for p in api.list(PODS, task.namespace, label_selector=f"batch.kubernetes.io/controller-uid={uid}")]
            if len(made) >= want:
                task.pods = sorted(made, key=lambda p: p["metadata"]["name"])
                return task
            if time.monotonic() > deadline:
                raise AssertionError(f"the Job controller made {len(made)} of {want} pods of {task.job['metadata']['name']}")
            time.sleep(0.1)
    if task.job is not None:
        created = api.create(JOBS, task.job, task.namespace)
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": created["metadata"]["name"],
                 "uid": created["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        for pod in task.pods:
            pod["metadata"]["ownerReferences"] = [owner]
            for key in ("controller-uid", "batch.kubernetes.io/controller-uid"):
                pod["metadata"]["labels"][key] = created["metadata"]["uid"]
    create_pods(api, task, task.pods[:pods])
    return task


def create_task_on(cluster: Any, task: MasterTask, **kwargs: Any) -> MasterTask:
    """`create_task` as `cluster`'s admin (the emulator's or the real control plane's, tests/conftest.py `cluster`): on
    the real one the real Job controller makes a Job's pods, as it does for the master."""
    return create_task(cluster.connect(), task, job_controller=getattr(cluster, "real", False), **kwargs)


def create_pods(api: KubeApi, task: MasterTask, which: list[dict[str, Any]] | None = None) -> None:
    from det_k8s.errors import Conflict, Forbidden

    for pod in task.pods if which is None else which:
        for attempt in range(50):
            try:
                with contextlib.suppress(Conflict):  # created already
                    api.create(PODS, pod, task.namespace)
                break
            except Forbidden as exc:
                # A real API server's Priority admission reads PriorityClasses from an informer: one created a moment
                # ago may not be in it yet ("no PriorityClass with name ... was found"); the master retries too.
                if "no PriorityClass" not in exc.message or attempt == 49:
                    raise
                time.sleep(0.1)


def honour_preemption(emulator: Any, namespace: str = "default") -> list[str]:
    """What the master does with pods labelled determined-preemption: the task its lookup finds checkpoints and
    stops, so every pod of that allocation goes away (facts section 6, "Preemption"). The lookup is the real one
    (`tasks.preemption_lookup.*`): before 0.34 a labelled task pod's own name; from 0.34 the labelled pod's name
    among the master's Job names, so only a pod named as the Job (det-k8s's notice) is heard. Returns the
    allocations stopped."""
    label = fact("tasks.preemption_label").value
    pods = emulator.items("pods", namespace)
    job_by_name = {j["metadata"]["name"]: j for j in (emulator.items("jobs", namespace) if _has_jobs(emulator) else ())}
    stopped_set = set()
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if label not in labels:
            continue
        job = job_by_name.get(pod["metadata"]["name"])
        if job is not None:  # 0.34+: jobNameToJobHandler[pod.Name]
            stopped_set.add((job["spec"]["template"]["metadata"].get("labels") or {}).get(ALLOCATION, ""))
        elif ALLOCATION in labels and not _job_owned(pod):  # before 0.34: podNameToPodHandler[pod.Name]
            stopped_set.add(labels[ALLOCATION])
    stopped = sorted(stopped_set - {""})
    doomed = [p for p in pods if (p["metadata"].get("labels") or {}).get(ALLOCATION) in stopped]
    jobs = {o["name"] for p in doomed for o in p["metadata"].get("ownerReferences") or () if o.get("kind") == "Job"}
    for job in sorted(jobs):  # from 0.34 the master deletes the task's Job, or the Job controller would replace the pods
        emulator.remove("jobs", job, namespace)
    if not hasattr(emulator, "plane"):  # the garbage collector's part: what the Jobs owned (det-k8s's notice) goes too
        doomed += [p for p in pods if p not in doomed and any(
            o.get("kind") == "Job" and o.get("name") in jobs for o in p["metadata"].get("ownerReferences") or ())]
    for pod in doomed:
        emulator.remove("pods", pod["metadata"]["name"], namespace)
    if hasattr(emulator, "plane"):  # the real API server: the pods go once the Job controller drops its finalizer
        names = {p["metadata"]["name"] for p in doomed}
        emulator.plane.wait_for("the preempted pods to be gone", lambda: not names & {
            p["metadata"]["name"] for p in emulator.items("pods", namespace)})
    return stopped


def _has_jobs(emulator: Any) -> bool:
    try:
        emulator.items("jobs", "default")
    except Exception:  # noqa: BLE001  (an emulator without batch/v1 Jobs: masters before 0.34 only)
        return False
    return True


def _job_owned(pod: Mapping[str, Any]) -> bool:
    return any(o.get("kind") == "Job" for o in pod["metadata"].get("ownerReferences") or ())
