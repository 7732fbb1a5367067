"""The Determined master's task pods as pod groups: the source adapter that puts them in det-k8s's one queue.

With `defaultScheduler: coscheduler` (or `preemption` before 0.36) every supported master names a scheduler
in its task pods (`schedulerName`) and labels them for the old coscheduling plugin; kube-scheduler leaves
them Pending. det-k8s serves that scheduler name: it reads the pods back into the same `PodGroup`s as its
own experiments, plans them in the same `schedule()` pass, and binds them (`det_k8s.live.binder`).

How pods become groups (facts in `det_k8s.determined.versions`, "task pods" rows):

- a pod with `pod-group.scheduling.sigs.k8s.io/min-available` > 0 belongs to the gang named by
  `pod-group.scheduling.sigs.k8s.io/name` *and* its `determined` allocation label: before 0.34 the gang
  name is the trial's (`exp12trial34`), the same for every attempt, so the allocation tells a restarted
  trial's new pods from its old, still-terminating ones; from 0.34 it is the Job's name;
- any other pod (no gang labels, min-available 0: CPU slots, commands, notebooks, TensorBoards) is a
  single-pod group of its own, still queued, prioritised and fair-shared like every group;
- a pod that belongs to another gang mechanism (a Kubernetes PodGroup, KAI, Volcano, coscheduling's
  `scheduling.x-k8s.io/pod-group`: `cluster.gangs`) is never the master's, whatever scheduler it names;
- a group is queued only once all of its pods exist (min-available of them pending); until then it waits
  for the master to create the rest; a group with a pod that still has scheduling gates (a queue
  controller such as Kueue holds it back) waits for them to be removed, as kube-scheduler waits;
- priority is the pod's resolved `spec.priority` (the master's per-task PriorityClass carries
  `resources.priority`); fair share goes by `determined.ai/user` where the master sets it (0.32+), else by
  experiment, else by the group;
- bound pods form running groups: they count for fair share and, when they are trials, may be preempted
  (gracefully, by the `determined-preemption` label). A group with a pod being deleted or already marked
  for preemption is leaving: never bound, never a victim again.
- a group with pods both bound and pending is *partly bound* (a binding that failed half-way, or an
  earlier det-k8s that crashed between bindings): the live scheduler deletes its bound pods so the
  master restarts the trial whole.

Placement constraints (selectors, affinity, tolerations, ...) and requests come from
`cluster.read.pod_from_object`, the one reading of a pod spec the whole scheduler shares.

Pure: objects in, frozen data out.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from itertools import compress
from typing import Any, cast

from ..cluster.gangs import foreign_gang
from ..cluster.model import AMD_GPU, GPU, Pod
from ..cluster.read import pod_from_object
from ..determined.versions import fact
from ..labels import PREEMPTED_AT
from .labels import determined_task, is_managed
from .model import PodGroup, PodRequest, RunningGroup, RunningPod

DEFAULT_SCHEDULER_NAME = "coscheduler"
GANG_NAME = str(fact("tasks.gang.name").value)
MIN_AVAILABLE = str(fact("tasks.gang.min_available").value)
ALLOCATION = str(fact("tasks.label.allocation").value)
USER = str(fact("tasks.label.user").value)
TASK_TYPE = str(fact("tasks.label.task_type").value)
EXPERIMENT_ID = str(fact("tasks.label.experiment").value)
JOB_NAME = tuple(str(label) for label in fact("tasks.label.job_name").value)
# the Job controller's labels holding its Job's uid, on every pod it makes (what an owner reference to the Job names)
JOB_UID = ("batch.kubernetes.io/controller-uid", "controller-uid")
PREEMPTION = str(fact("tasks.preemption_label").value)
UNSCHEDULABLE = "Unschedulable"  # reason of the PodScheduled=False condition det-k8s writes
_TRIAL_NAME = re.compile(r"(?:^|-)exp-([0-9]+)-trial-[0-9]+(?:-|$)")


@dataclass(frozen=True)
class MasterPod:
    """One task pod of the master, as the scheduler needs it."""

    pod: Pod  # requests, constraints, node, phase, labels (cluster.read.pod_from_object)
    uid: str
    resource_version: str
    priority: int
    scheduler: str
    waiting: str = ""  # message of the PodScheduled=False/Unschedulable condition (what det-k8s last wrote)
    waiting_since: str = ""  # that condition's lastTransitionTime
    started: str = ""  # when it was bound (PodScheduled=True's lastTransitionTime, else status.startTime)
    gates: tuple[str, ...] = ()  # spec.schedulingGates (a queue controller such as Kueue holds the pod back)
    preempted_at: str = ""  # when det-k8s marked it for preemption (its PREEMPTED_AT annotation, RFC 3339)

    @property
    def name(self) -> str:
        return self.pod.name

    @property
    def namespace(self) -> str:
        return self.pod.namespace

    @property
    def bound(self) -> bool:
        return self.pod.node_name is not None

    @property
    def preempting(self) -> bool:
        return PREEMPTION in self.pod.labels

    @property
    def job(self) -> str:
        """The batch/v1 Job it belongs to (masters from 0.34), else ""."""
        return next((self.pod.labels[k] for k in JOB_NAME if self.pod.labels.get(k)), "")

    @cached_property  # (the pod is frozen; a watch replaces the object when the pod changes)
    def key(self) -> tuple[str, str, str, int]:
        """(namespace, name, allocation, size) of the group it belongs to."""
        labels = self.pod.labels
        size = _int(labels.get(MIN_AVAILABLE))
        name = labels.get(GANG_NAME, "")
        if size > 0 and name:
            return self.namespace, name, labels.get(ALLOCATION, ""), size
        return self.namespace, self.name, "", 1


def master_pod(obj: Mapping[str, Any]) -> MasterPod:
    """Read one pod object (as the API returns it); MalformedObject, naming the field, for another shape."""
    pod = pod_from_object(obj)  # checks the shape of what is read below
    if not pod.node_name:  # pinned by its pod spec, it is still only where det-k8s binds it
        pod = replace(pod, bound_by_det_k8s=True)
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    priority = spec.get("priority")
    waiting, since, started = "", "", ""
    status = obj.get("status") or {}
    for condition in status.get("conditions") or ():
        if not isinstance(condition, Mapping) or condition.get("type") != "PodScheduled":
            continue
        if condition.get("status") == "False" and condition.get("reason") == UNSCHEDULABLE:
            waiting, since = str(condition.get("message") or ""), str(condition.get("lastTransitionTime") or "")
        elif condition.get("status") == "True" and pod.node_name:  # the API server sets it when binding
            started = str(condition.get("lastTransitionTime") or "")
    if pod.node_name and not started:
        started = str(status.get("startTime") or "")  # the kubelet's: when it took the pod
    gates = tuple(str(g.get("name") or "") for g in spec.get("schedulingGates") or () if isinstance(g, Mapping))
    annotations = meta.get("annotations")
    preempted_at = str(annotations.get(PREEMPTED_AT) or "") if isinstance(annotations, Mapping) else ""
    return MasterPod(pod, str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""),
                     priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
                     str(spec.get("schedulerName") or "default-scheduler"), waiting, since, started, gates,
                     preempted_at)


def served(obj: Mapping[str, Any], scheduler_name: str | None) -> bool:
    """A pod det-k8s binds: it names the served scheduler and is not one of det-k8s's own (those are pinned by
    node affinity and bound by their scheduler, whatever its name; never also bound or marked as the master's)."""
    spec = obj.get("spec")
    if not (scheduler_name and isinstance(spec, Mapping) and spec.get("schedulerName") == scheduler_name):
        return False
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    # another gang mechanism's pod naming this scheduler is not the master's: an ordinary pod (held once bound)
    return not (isinstance(labels, Mapping) and is_managed(labels)) and not foreign_gang(obj)


@dataclass
class ServedReader:
    """Reads pod objects as a pass does (`kube/watch.read_cluster`): a served pod as the master's (`master_pod`: on no
    node until det-k8s binds it), kept in `served`; any other as an ordinary pod. `plan --snapshot` reads its file
    with it, so that its running groups and queue hold the master's as the live pass's do."""

    scheduler_name: str | None
    served: list[MasterPod] = field(default_factory=list)

    def __call__(self, obj: Mapping[str, Any]) -> Pod:
        if served(obj, self.scheduler_name):
            found = master_pod(obj)
            self.served.append(found)
            return found.pod
        return pod_from_object(obj)


class State(StrEnum):
    INCOMPLETE = "incomplete"  # not every pod exists yet: waits for the master to create the rest
    READY = "ready"  # every pod exists, none bound: queued
    RUNNING = "running"  # bound, none pending
    PARTIAL = "partial"  # some bound, the rest pending or missing: to be torn down whole
    LEAVING = "leaving"  # a pod is being deleted or marked for preemption
    GATED = "gated"  # a pending pod has scheduling gates: no scheduler may bind it until they are removed


@dataclass(frozen=True)
class MasterGroup:
    """The pods of one allocation of a master task (or one pod without gang labels)."""

    id: str  # "<namespace>/<name>", plus "#<allocation>" where the name is shared by a trial's attempts
    namespace: str
    name: str  # the gang name (trial name before 0.34, Job name from 0.34), or the pod's name
    allocation: str
    size: int  # min-available: pods that must all exist and run together (1 without gang labels)
    pods: tuple[MasterPod, ...]  # its pods that are not finished, by name
    user: str  # the fair-share key
    trial: bool  # only trials are preempted (they checkpoint); commands and notebooks never are
    finished: int = 0  # its pods that ended (Succeeded, Failed): gone from `pods`, but not missing

    @cached_property  # (these are read many times a pass; the group is frozen, `replace` makes a new one)
    def pending(self) -> tuple[MasterPod, ...]:
        return tuple(p for p in self.pods if not p.bound and not p.pod.deleting)

    @cached_property
    def bound(self) -> tuple[MasterPod, ...]:
        return tuple(p for p in self.pods if p.pod.active)

    @cached_property
    def bound_nodes(self) -> frozenset[str]:
        """The nodes its bound pods are on."""
        return frozenset(p.pod.node_name for p in self.bound if p.pod.node_name)

    @property
    def priority(self) -> int:
        return max((p.priority for p in self.pods), default=0)

    @cached_property
    def state(self) -> State:
        if any(p.pod.deleting or p.preempting for p in self.pods):
            return State.LEAVING
        bound, pending = len(self.bound), len(self.pending)
        missing = self.size - len(self.pods) - self.finished  # deleted, or never made: the group cannot run whole
        if bound and bound < self.size and (pending or missing > 0):
            return State.PARTIAL  # (bound by someone else, or a crash, with the rest pending or gone)
        if bound:
            return State.RUNNING  # (pods beyond min-available may still be pending: `extra`)
        if any(p.gates for p in self.pending):
            return State.GATED  # the API server refuses their binding (409): waiting, never bound part-way
        return State.READY if pending >= self.size else State.INCOMPLETE

    @property
    def extra(self) -> MasterGroup | None:
        """A running group's pods beyond min-available that are still pending (only with a min-available
        smaller than the pod count, which a user's pod spec can set): a group of their own, queued."""
        if self.state is not State.RUNNING or not self.pending or any(p.gates for p in self.pending):
            return None
        return MasterGroup(f"{self.id}+more", self.namespace, self.name, self.allocation, len(self.pending),
                           self.pending, self.user, self.trial)

    @property
    def created(self) -> str:
        return min((p.pod.created for p in self.pods if p.pod.created), default="")

    @property
    def preempted_since(self) -> str:
        """When det-k8s first marked one of its pods for preemption (RFC 3339), "" if it did not."""
        return min((p.preempted_at for p in self.pods if p.preempting and p.preempted_at), default="")

    @property
    def job(self) -> str:
        """The batch/v1 Job its pods belong to (masters from 0.34, `tasks.jobs`), "" for bare pods."""
        return next((p.job for p in self.pods if p.job), "")

    @cached_property
    def running(self) -> RunningGroup:
        """Its running form (`as_running_group`)."""
        return _running(self)


def _int(text: str | None) -> int:
    try:
        return int(text or "0")
    except ValueError:
        return 0


def _experiment(pod: Pod) -> str:
    found = pod.labels.get(EXPERIMENT_ID)
    if found:
        return found
    match = _TRIAL_NAME.search(pod.name) or _TRIAL_NAME.search(pod.labels.get(GANG_NAME, ""))
    return match.group(1) if match else ""


def _is_trial(pod: Pod) -> bool:
    task_type = pod.labels.get(TASK_TYPE)
    if task_type is not None:
        return task_type.upper() == "TRIAL"
    return bool(_TRIAL_NAME.search(pod.name))


Key = tuple[str, str, str, int]  # (namespace, name, allocation, size): `MasterPod.key`
Sorted = tuple[Key, bool] | None  # a pod's group and whether the pod ended; None: not one of the served groups


def _sort(pod: MasterPod, scheduler_name: str) -> Sorted:
    """Which group the pod belongs to (None: it names another scheduler, is det-k8s's own or another gang's)."""
    if pod.scheduler != scheduler_name or not pod.pod.name:
        return None
    if is_managed(pod.pod.labels):
        return None  # det-k8s's own pod whose pod spec names this scheduler: its group is det-k8s's, never the master's
    if pod.pod.gang:
        return None  # another gang mechanism's pod (cluster/gangs.py): binding it would start that group in part
    return pod.key, pod.pod.phase in ("Succeeded", "Failed")


@dataclass(eq=False)
class _Grouping:
    """The groups of one call's pods, kept so that the next call's pods, most of them the very same objects (a
    watch keeps a pod's object until the pod changes), are grouped by what changed alone (`master_groups`)."""

    scheduler_name: str
    objects: tuple[MasterPod, ...] = ()  # (held: the ids below stay theirs while it lives)
    ids: set[int] = field(default_factory=set)
    sorts: dict[int, Sorted] = field(default_factory=dict)
    live: dict[Key, dict[int, MasterPod]] = field(default_factory=dict)  # a group's unfinished pods
    ended: dict[Key, int] = field(default_factory=dict)  # a group's finished pods, counted
    named: dict[tuple[str, str], set[Key]] = field(default_factory=dict)  # live groups by (namespace, name)
    groups: dict[Key, MasterGroup] = field(default_factory=dict)
    order: list[Key] = field(default_factory=list)  # the groups' keys in the order of their ids
    answer: tuple[MasterGroup, ...] = ()

    def add(self, pod: MasterPod) -> set[Key]:
        """Count the pod in; the groups it changes."""
        found = self.sorts[id(pod)] = _sort(pod, self.scheduler_name)
        if found is None:
            return set()
        key, ended = found
        if ended:
            self.ended[key] = self.ended.get(key, 0) + 1
            return {key}
        members = self.live.get(key)
        if members is None:
            members = self.live[key] = {}
            named = self.named.setdefault(key[:2], set())
            named.add(key)
            members[id(pod)] = pod
            return set(named)  # (a name that more groups share changes their ids: `_made`)
        members[id(pod)] = pod
        return {key}

    def drop(self, ident: int) -> set[Key]:
        """Count the pod with this id out; the groups it changes."""
        found = self.sorts.pop(ident)
        if found is None:
            return set()
        key, ended = found
        if ended:
            left = self.ended[key] - 1
            if left:
                self.ended[key] = left
            else:
                del self.ended[key]
            return {key}
        members = self.live[key]
        del members[ident]
        if members:
            return {key}
        del self.live[key]
        named = self.named[key[:2]]
        named.discard(key)
        if not named:
            del self.named[key[:2]]
        return {key, *named}

    def make(self, keys: Iterable[Key], previous: Mapping[Key, MasterGroup]) -> None:
        """Make the groups of `keys` again (one whose pods are the same objects as before is kept) and the answer."""
        groups, reorder = self.groups, not self.order
        for key in keys:
            members = self.live.get(key)
            before = groups.get(key)
            if members is None:
                if before is not None:
                    del groups[key]
                    reorder = True
                continue
            group = groups[key] = _made(key, members.values(), self.ended.get(key, 0), len(self.named[key[:2]]),
                                        previous.get(key))
            reorder = reorder or before is None or before.id != group.id
        if reorder:  # (by id, then key: groups whose ids are alike, a gang named like a pod, in no order of history)
            self.order = sorted(groups, key=lambda key: (groups[key].id, key))
        self.answer = tuple(map(groups.__getitem__, self.order))


def _pod_order(pod: MasterPod) -> tuple[str, str, str]:
    """A group's pods by name (two objects of one name, which no watch holds, by uid and revision)."""
    return pod.name, pod.uid, pod.resource_version


def _made(key: Key, members: Iterable[MasterPod], finished: int, sharing: int,
          previous: MasterGroup | None) -> MasterGroup:
    """The group of `key`'s live pods (`sharing`: how many live groups have its namespace and name)."""
    namespace, name, allocation, size = key
    pods = sorted(members, key=_pod_order)
    first = pods[0].pod
    job = any(first.labels.get(label) for label in JOB_NAME)
    shared = allocation and (sharing > 1 or not job)  # attempts of a trial share the name
    group_id = f"{namespace}/{name}" + (f"#{allocation}" if shared else "")
    if (previous is not None and previous.id == group_id and previous.finished == finished
            and len(previous.pods) == len(pods) and all(a is b for a, b in zip(previous.pods, pods, strict=True))):
        return previous
    experiment = _experiment(first)
    user = first.labels.get(USER) or (f"experiment {experiment}" if experiment else f"{namespace}/{name}")
    return MasterGroup(group_id, namespace, name, allocation, size, tuple(pods), user, _is_trial(first), finished)


_LAST: _Grouping | None = None  # the last call's grouping of watched pods (MasterPod objects)
_LOCK = threading.Lock()
CHANGED_SHARE = 4  # a call whose pods differ from the last call's in more than 1/CHANGED_SHARE of them: grouped anew


def master_groups(objects: Iterable[Mapping[str, Any] | MasterPod],
                  scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> tuple[MasterGroup, ...]:
    """The groups of the pods that name `scheduler_name` (finished pods are left out), sorted by id.

    The loop groups every served pod on every change (issue 24), and a watch keeps a pod's object until the pod
    changes: so pods given as MasterPod objects are grouped from the last such call's grouping, by the pods that
    appeared and went since (told by their ids: the grouping holds the last call's objects, so none of their ids is
    another object's), and a group whose pods are the very objects it had is that call's group again, with what it
    has worked out already (`state`, its running form). The very tuple of the last call is answered as then at once.
    Pods given as objects read from the API (dicts, which may change) are grouped afresh and leave that grouping
    alone. Whatever the path, the answer is the one a first call gives (tests/unit/scheduling/test_master_groups.py).
    """
    global _LAST
    with _LOCK:
        last = _LAST
        if last is not None and last.objects is objects and last.scheduler_name == scheduler_name:
            return last.answer
        items = tuple(objects)
        ids = set(map(id, items))  # (these, and what follows, at C speed: a loop's thousands of pods, on every change)
        if last is not None and last.scheduler_name == scheduler_name:
            added = ids - last.ids
            gone = last.ids - ids
            new = list(compress(items, map(added.__contains__, map(id, items)))) if added else []
            if (len(added) + len(gone)) * CHANGED_SHARE <= len(ids) and all(isinstance(p, MasterPod) for p in new):
                _LAST = None  # (until the update is whole: never a half-updated grouping for the next call)
                changed: set[Key] = set()
                for ident in gone:
                    changed |= last.drop(ident)
                seen: set[int] = set()
                for pod in cast(list[MasterPod], new):
                    if id(pod) not in seen:  # (an object given twice counts once)
                        seen.add(id(pod))
                        changed |= last.add(pod)
                last.objects, last.ids = cast(tuple[MasterPod, ...], items), ids
                last.make(changed, last.groups)
                _LAST = last
                return last.answer
        if not all(isinstance(item, MasterPod) for item in items):
            fresh = _Grouping(scheduler_name)
            for item in items:
                if isinstance(item, MasterPod) and id(item) in fresh.sorts:
                    continue  # (an object given twice counts once, as below)
                fresh.add(item if isinstance(item, MasterPod) else master_pod(item))
            fresh.make(list(fresh.live), {})
            return fresh.answer
        grouping = _Grouping(scheduler_name, cast(tuple[MasterPod, ...], items), ids)
        for pod in grouping.objects:
            if id(pod) not in grouping.sorts:  # (an object given twice counts once)
                grouping.add(pod)
        grouping.make(list(grouping.live), last.groups if last is not None else {})
        _LAST = grouping
        return grouping.answer


def _micros(timestamp: str) -> int:
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1_000_000)


def as_pod_group(group: MasterGroup) -> PodGroup:
    """The queued form of a ready group: its pending pods, all or none (det-k8s groups' sequence is
    microseconds since the epoch at submission, so creation time orders both kinds alike)."""
    # with their labels and namespace: other pods' anti-affinity and spread match them, the group's own
    # rules judge its pods against each other, and their claims are the claims of their namespace
    pods = tuple(PodRequest.from_pod(p.pod, rank) for rank, p in enumerate(group.pending))
    gpus = sum(p.requests.get(GPU, 0) + p.requests.get(AMD_GPU, 0) for p in pods) // 1000  # slotType rocm: AMD
    return PodGroup(group.id, _known_as(group), group.user, group.priority, group.created, _micros(group.created),
                    pods, slots=gpus)


def _known_as(group: MasterGroup) -> str:
    """How users know the task (`exp 12 trial 34`, as the map names it), for why-pending's "ahead" and "held by"."""
    return (determined_task(group.pods[0].pod) if group.pods else None) or group.name


def as_running_group(group: MasterGroup) -> RunningGroup:
    """The running form of a group with bound pods: fair-share usage, and a victim only if it is a trial.

    It started when it was bound, not when the master created its pods (it may have waited in the queue for
    hours): the victim rule's "newest first" compares how much work each group would lose, and det-k8s's own
    groups start when their pods are created."""
    return group.running


def _running(group: MasterGroup) -> RunningGroup:
    pods = tuple(RunningPod(p.name, p.pod.node_name or "", p.pod.requests) for p in group.bound)
    started = min((p.started for p in group.bound if p.started), default="") or group.created
    return RunningGroup(group.id, _known_as(group), group.user, group.priority, pods, started_at=started,
                        terminating=group.state is State.LEAVING, size=group.size, preemptible=group.trial)


def planned_forms(groups: Iterable[MasterGroup]) -> tuple[list[PodGroup], list[RunningGroup]]:
    """What the pass that serves these groups queues (ready groups, and pods beyond a smaller min-available) and
    counts as running (bound groups); a partly bound group is neither, that pass tears it down. For plans made
    without binding (`experiment list`, `describe`, `nodes map`), so that they answer as the next pass will."""
    queue: list[PodGroup] = []
    running: list[RunningGroup] = []
    for group in groups:
        if group.state is State.READY:
            queue.append(as_pod_group(group))
        elif group.state is not State.PARTIAL and group.bound:
            running.append(as_running_group(group))
            if group.extra is not None:
                queue.append(as_pod_group(group.extra))
    return queue, running

