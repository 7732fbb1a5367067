"""Carrying out a plan for the master's pods: bind a group all or none, mark victims, say why groups wait.

The pods already exist (the master created them); det-k8s only chooses their nodes, through the
`pods/binding` subresource, as kube-scheduler does. Kubernetes has no transaction for "these N
bindings", so:

- a group is bound only as a whole plan (every pod has a node, and the plan fits);
- if a binding fails part-way (the pod vanished, 409 because it is bound already or being deleted,
  a lost answer), no more are sent, and every pod that is or may be bound is deleted at once: the
  master sees its pods go and restarts the trial whole, instead of a partly started trial holding
  GPUs idle. The failure is recorded as a Warning event on every pod of the group (and so in the trial
  log), and `det-k8s doctor` lists it;
- a signal (SIGTERM on a rollout, Ctrl-C; det_k8s/stopping.py) during the bindings sends no more, waits at most
  `IN_FLIGHT_WAIT` for the answers on their way, and deletes every pod of a begun group that is or may be bound,
  as above, before det-k8s exits; what it could not delete, the next pass finds partly bound and repairs;
- a victim of preemption gets the label `determined-preemption` on every pod: the master asks the
  trial to checkpoint and stop, and its pods go away; the preemptor is bound in a later pass, once
  they are gone (never a partial group, never a victim of equal or higher priority: `schedule()`).
  A master from 0.34 (Jobs) looks a labelled pod up among its Job names, so det-k8s also creates a
  notice, a pod named as the victim's Job; a victim still there after the grace, or whose notice
  cannot be made, has its pods deleted (`stop_overdue`: Determined restarts it from its checkpoint);
- a waiting group's pending pods get the condition PodScheduled=False (reason Unschedulable) holding
  det-k8s's one-line reason, and an Event, written only when the reason's headline (the text before
  the first "; ") changes, so numbers that change every pass cause no writes.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from .. import stopping
from ..errors import Conflict, DetK8sError, Forbidden, NotFound, Rejected
from ..kube.api import KubeApi
from ..kube.events import EventRecorder, safe_message
from ..kube.kinds import PODS
from ..labels import MANAGED_BY, MANAGER, PREEMPTED_AT, PREEMPTION_NOTICE, PURPOSE
from ..scheduling.labels import label_value
from ..scheduling.master import JOB_UID, PREEMPTION, UNSCHEDULABLE, MasterGroup, MasterPod

# Event reasons (CamelCase, as Kubernetes' own: FailedScheduling, Preempted, Scheduled)
WAITING = "GangWaiting"
INCOMPLETE = "GangIncomplete"
RESERVING = "GangReserving"
PREEMPTING = "GangPreempting"
UNSCHEDULABLE_EVENT = "GangUnschedulable"
NEEDS_DRA = "GangNeedsDRA"  # a claim allocation det-k8s does not perform (a Warning: the admin has to act)
BINDING_FAILED = "GangBindingFailed"
PARTLY_BOUND = "GangPartlyBound"
NODE_LOST = "GangNodeLost"  # bound to a node that no longer exists
PREEMPTED = "Preempted"
PREEMPTION_OVERDUE = "PreemptionOverdue"  # a victim that did not stop within the grace: its pods deleted
SCHEDULED = "Scheduled"
FAILURE_REASONS = (BINDING_FAILED, PARTLY_BOUND, NODE_LOST, PREEMPTION_OVERDUE)  # what `doctor` reports
IN_FLIGHT_WAIT = 2.0  # seconds an interrupted binding waits for the answers already on their way
NOTICE_SCHEDULER = "det-k8s-preemption-notice"  # served by nobody: a notice is never bound
# The notice's pod spec: never bound (no scheduler serves its name), so its image is never pulled; it requests the
# least a ResourceQuota that demands requests accepts, and passes the restricted Pod Security level.
NOTICE_SPEC: dict[str, object] = {
    "schedulerName": NOTICE_SCHEDULER, "restartPolicy": "Never", "automountServiceAccountToken": False,
    "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "notice", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}, "limits": {"cpu": "1m", "memory": "1Mi"}},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}]}


def headline(message: str) -> str:
    """The part of a reason that counts as a change: the text before the first "; "."""
    return message.split("; ", 1)[0]


def binding(pod: MasterPod, node: str) -> dict[str, object]:
    """A Binding of the pod (preconditioned on its uid, as kube-scheduler sends it) to the node."""
    meta: dict[str, object] = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    return {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


@dataclass(frozen=True)
class BindResult:
    bound: tuple[str, ...]
    failure: str = ""  # empty when every pod was bound
    removed: tuple[str, ...] = ()  # pods deleted again because the group could not be bound whole
    leftovers: tuple[str, ...] = ()  # pods that could not be deleted (the next pass finds the group partly bound)


def _pods(count: int) -> str:
    return f"{count} pod" + ("s" if count != 1 else "")


def _ambiguous(error: DetK8sError) -> bool:
    """A failure after which the binding may still have happened: anything but a definite refusal
    (a lost answer, a timeout, a 5xx)."""
    return not isinstance(error, (Conflict, NotFound, Rejected, Forbidden))


def delete_pods(api: KubeApi, pods: Sequence[MasterPod]) -> list[str]:
    """Delete (gracefully: their GPUs count as used until kubelet has stopped them); returns what failed."""
    leftovers = []
    for pod in pods:
        try:
            api.delete(PODS, pod.name, pod.namespace, missing_ok=True)
        except DetK8sError:
            leftovers.append(pod.name)
    return leftovers


@dataclass
class Binder:
    api: KubeApi
    recorder: EventRecorder
    workers: int = 8
    scheduled_events: bool = True  # a Scheduled event per bound pod, as kube-scheduler writes
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    # det-k8s's own namespace (`-n`), the only one its shipped RBAC lets it create pods in: a notice goes only there
    # ("": wherever the victim is)
    own_namespace: str = ""
    problems: list[str] = field(default_factory=list)  # events that could not be written (the caller drains it)
    # pods whose condition was refused: the headline their event last said (so it is not said again every pass)
    _told: dict[tuple[str, str, str], str] = field(default_factory=dict, repr=False)
    # the binding threads, kept from call to call: a gang's bindings go out at once, not each after a thread start
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)

    def bind(self, group: MasterGroup, placement: Sequence[tuple[str, str]],
             before: Callable[[], None] = lambda: None) -> BindResult:
        """Bind every pod of the group to its planned node, or leave none bound (see the module docstring)."""
        return self.bind_all([(group, placement)], before)[group.id]

    def bind_all(self, plans: Sequence[tuple[MasterGroup, Sequence[tuple[str, str]]]],
                 before: Callable[[], None] = lambda: None) -> dict[str, BindResult]:
        """Bind several groups, each all or none, their bindings interleaved on one pool of `workers` threads.

        The plan placed the groups on disjoint capacity, so they are independent: a failing group stops only
        its own bindings and deletes only its own bound pods. `before` runs ahead of the first write (the
        Lease renewal: it raises when the Lease was lost).
        """
        results: dict[str, BindResult] = {}
        work: list[tuple[MasterGroup, MasterPod, str]] = []
        for group, placement in plans:
            pods = {p.name: p for p in group.pending}
            missing = [name for name, _ in placement if name not in pods]
            if missing or len(placement) != len(pods):
                results[group.id] = BindResult((), "the plan does not match the group's pods "
                                               f"({', '.join(missing) or 'count'})")
                continue
            work += [(group, pods[name], node) for name, node in placement]
        if not work:
            return results
        before()
        bound: dict[str, list[str]] = {}
        maybe: dict[str, list[str]] = {}
        failures: dict[str, list[tuple[str, DetK8sError]]] = {}

        started: dict[str, list[str]] = {}
        halted: list[bool] = []  # a signal (or any exception) stopped the binding: send no more

        def one(item: tuple[MasterGroup, MasterPod, str]) -> None:
            group, pod, node = item
            if failures.get(group.id) or halted:
                return  # the group is failing: binding more of it would only mean more to delete
            started.setdefault(group.id, []).append(pod.name)
            try:
                self.api.create_subresource(PODS, pod.name, "binding", binding(pod, node), pod.namespace)
            except DetK8sError as exc:
                failures.setdefault(group.id, []).append((pod.name, exc))
                if _ambiguous(exc):
                    maybe.setdefault(group.id, []).append(pod.name)
                return
            bound.setdefault(group.id, []).append(pod.name)

        pool = None if self.workers <= 1 or len(work) == 1 else self._threads()
        futures: list[Future[None]] = []
        try:
            if pool is None:
                for item in work:
                    one(item)
            else:
                for item in work:
                    futures.append(pool.submit(one, item))
                for future in futures:
                    future.result()
        except BaseException:  # a signal (det_k8s/stopping.py), Ctrl-C: undo every group begun, without waiting long
            halted.append(True)
            if pool is not None:
                for future in futures:
                    future.cancel()  # (not begun: never sent; `halted` stops any that begins meanwhile)
                pending = [f for f in futures if not f.done()]
                if pending:  # answers on their way say which pods are bound; not waited for past the grace
                    wait(pending, timeout=min(IN_FLIGHT_WAIT, stopping.remaining()))
            self._undo_interrupted(plans, started, failures)
            raise
        for group, placement in plans:
            if group.id in results:
                continue
            done = bound.get(group.id, [])
            if not failures.get(group.id):
                results[group.id] = BindResult(tuple(done))
                if self.scheduled_events:
                    nodes = dict(placement)
                    for pod in group.pending:
                        self._event(pod, SCHEDULED, f"Successfully assigned {pod.namespace}/{pod.name} to "
                                    f"{nodes[pod.name]}", verbatim=True)
                continue
            results[group.id] = self._undo(group, done + maybe.get(group.id, []), failures[group.id][0], done)
        return results

    def _threads(self) -> ThreadPoolExecutor:
        """The binding threads (`workers` of them, started as first needed and kept: the loop binds gang after gang)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="det-k8s-bind")
        return self._pool

    def _undo_interrupted(self, plans: Sequence[tuple[MasterGroup, Sequence[tuple[str, str]]]],
                          started: dict[str, list[str]], failures: dict[str, list[tuple[str, DetK8sError]]]) -> None:
        """Bindings cut off by a signal: every pod of a begun group that is or may be bound is deleted (as the
        partial-binding repair does), so the master restarts the task whole; what could not be, the next pass repairs."""
        for group, _ in plans:
            refused = {name for name, error in failures.get(group.id, ()) if not _ambiguous(error)}
            names = [n for n in started.get(group.id, ()) if n not in refused]
            if not names:
                continue
            by_name = {p.name: p for p in group.pods}
            leftovers = delete_pods(self.api, [by_name[n] for n in names if n in by_name])
            removed = [n for n in names if n not in leftovers]
            if removed:
                stopping.note(f"gang {group.name}: deleted the {len(removed)} pod(s) whose binding had begun "
                              f"({', '.join(removed)}), so Determined restarts the task whole")
            if leftovers:
                stopping.note(f"gang {group.name}: {', '.join(leftovers)} may be bound: the next det-k8s pass finds the "
                              "gang partly bound and deletes them (det-k8s scheduler run, or doctor shows it)")

    def _undo(self, group: MasterGroup, doomed_names: Sequence[str], first: tuple[str, DetK8sError],
              bound: Sequence[str]) -> BindResult:
        """A group whose binding failed part-way: delete every pod that is or may be bound, and say so."""
        by_name = {p.name: p for p in group.pods}
        doomed = [by_name[n] for n in doomed_names]
        leftovers = delete_pods(self.api, doomed)
        removed = tuple(p.name for p in doomed if p.name not in leftovers)
        name, error = first
        why = f"binding {name} failed: {error.message}"
        sure = [n for n in removed if n in bound]
        maybe = [n for n in removed if n not in bound]
        parts = ([f"the {_pods(len(sure))} already bound"] if sure else []) + (
            [f"{'the ' if not sure else ''}{_pods(len(maybe))} whose binding may have landed"] if maybe else [])
        text = (f"det-k8s: could not bind gang {group.name} whole ({why}); "
                + (f"deleted {' and '.join(parts)}, so Determined restarts the task whole" if removed
                   else "no pod was bound"))
        if leftovers:
            text += f"; could not delete {', '.join(leftovers)} (the next pass tries again)"
        for pod in group.pods:
            self._event(pod, BINDING_FAILED, text, warning=True)
        return BindResult(tuple(bound), why, removed, tuple(leftovers))

    def repair(self, group: MasterGroup, before: Callable[[], None] = lambda: None, *,
               lost: Sequence[str] = ()) -> BindResult:
        """A group found partly bound (or bound to `lost`, nodes that no longer exist): delete its bound pods so
        the master restarts it whole. Only the nodes in `lost` are named as gone: the group's other pods may sit
        on nodes that are still there."""
        before()
        doomed = list(group.bound)
        leftovers = delete_pods(self.api, doomed)
        removed = tuple(p.name for p in doomed if p.name not in leftovers)
        if lost:
            gone = sorted(set(lost))
            text = (f"det-k8s: gang {group.name} is bound to a node that no longer exists ({', '.join(gone)}: removed "
                    "between plan and binding, or since); deleted its bound pods so Determined restarts the task whole")
        else:
            text = (f"det-k8s: found gang {group.name} partly bound ({len(doomed)} of {len(group.pods)} pods on "
                    "nodes: a binding that failed half-way, or a scheduler that stopped between bindings); deleted "
                    "the bound pods so Determined restarts the task whole")
        if leftovers:
            text += f"; could not delete {', '.join(leftovers)} (the next pass tries again)"
        for pod in group.pods:
            self._event(pod, NODE_LOST if lost else PARTLY_BOUND, text, warning=True)
        return BindResult((), "node lost" if lost else "partly bound", removed, tuple(leftovers))

    def preempt(self, group: MasterGroup, by: str, priority: int,
                before: Callable[[], None] = lambda: None) -> list[str]:
        """Mark every pod of a victim for preemption, in the way its master hears it (the label; from 0.34 also the
        notice, `_notice`); returns the pods that could not be marked."""
        before()
        failed = []
        at = self._now()
        notice = ""
        if group.job:  # a master from 0.34 hears the label only on a pod named as the Job: the notice
            notice = self._notice(group) if not self.own_namespace or group.namespace == self.own_namespace else (
                f"det-k8s creates pods only in its own namespace {self.own_namespace}, and the notice goes in the "
                f"victim's, {group.namespace}")
        for pod in group.pods:
            try:
                self.api.patch(PODS, pod.name, {"metadata": {"labels": {PREEMPTION: "true"},
                                                             "annotations": {PREEMPTED_AT: at}}}, pod.namespace)
            except NotFound:
                continue  # already gone: what preemption wants
            except DetK8sError:
                failed.append(pod.name)
                continue
            if not notice:
                how = (f"preemption notice {group.namespace}/{group.job} sent" if group.job else
                       f"label {PREEMPTION} set")
                self._event(pod, PREEMPTED, f"det-k8s: preempted by {by} (priority {priority} > {group.priority}; "
                            f"{how}); Determined checkpoints the trial and stops it, and it waits in the queue again")
        if notice:  # the master cannot be told: its pods are deleted now, as after the grace
            self.stop_overdue(group, f"its preemption notice could not be created ({notice})")
        return failed

    def _notice(self, group: MasterGroup) -> str:
        """The preemption notice of a Job-based master (`tasks.preemption_lookup.job_name`): a pod named as the
        victim's Job, labelled `determined-preemption`, which the master's lookup by Job name finds. It names a
        scheduler nobody serves, so it is never bound and holds nothing; it is owned by the Job, so it goes with it.
        Returns "" once it exists, else why it could not be made."""
        job_uid = next((p.pod.labels.get(k, "") for p in group.pods for k in JOB_UID if p.pod.labels.get(k)), "")
        meta: dict[str, object] = {
            "name": group.job, "namespace": group.namespace,
            "labels": {PREEMPTION: "true", PREEMPTION_NOTICE: label_value(group.allocation or group.name),
                       MANAGED_BY: MANAGER},
            "annotations": {PURPOSE: "tells the Determined master to preempt the trial of this Job: "
                                                  "it finds a labelled pod by the Job's name"}}
        if job_uid:
            meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": group.job, "uid": job_uid}]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": NOTICE_SPEC}
        try:
            self.api.create(PODS, body, group.namespace)
        except Conflict:
            return ""  # made by an earlier pass
        except DetK8sError as exc:
            return str(exc)
        return ""

    def stop_overdue(self, group: MasterGroup, why: str) -> list[str]:
        """A victim that did not stop (or cannot be told to): its pods deleted, so Determined restarts the trial from
        its latest checkpoint (one of its max_restarts). Returns the pods that could not be deleted."""
        leftovers = delete_pods(self.api, [p for p in group.pods if not p.pod.deleting])
        if group.job:  # its notice, if one was made, is no longer needed (the Job's deletion would take it too)
            with contextlib.suppress(DetK8sError):
                self.api.delete(PODS, group.job, group.namespace, missing_ok=True)
        text = (f"det-k8s: preempted trial {group.name} {why}; deleted its pods: Determined restarts it from its "
                "latest checkpoint, which counts as one of its max_restarts")
        if leftovers:
            text += f"; could not delete {', '.join(leftovers)} (the next pass tries again)"
        for pod in group.pods:
            self._event(pod, PREEMPTION_OVERDUE, text, warning=True)
        return leftovers

    def report_waiting(self, group: MasterGroup, reason: str, message: str, *, warning: bool = False,
                       before: Callable[[], None] = lambda: None) -> int:
        """Condition and event on each pending pod whose reason's headline changed; returns the pods written."""
        message = safe_message(message)
        written = 0
        for pod in group.pending:
            if pod.waiting and headline(pod.waiting) == headline(message):
                continue
            if not written:
                before()
            since = pod.waiting_since if pod.waiting else self._now()
            condition = {"type": "PodScheduled", "status": "False", "reason": UNSCHEDULABLE, "message": message,
                         "lastTransitionTime": since or self._now()}
            try:  # conditional on the pod as read: never turns a pod someone just bound back to unscheduled
                self.api.patch_subresource(PODS, pod.name, "status", {
                    "metadata": {"resourceVersion": pod.resource_version}, "status": {"conditions": [condition]}},
                    pod.namespace)
            except (Conflict, NotFound):
                continue  # it changed or went meanwhile: the next pass looks again
            except DetK8sError as exc:  # refused (RBAC without pods/status, a webhook): the reason still goes out
                # as an event, once per headline (remembered here, since the pod cannot carry it), and the pass
                # goes on: a refused condition must never cost the bindings and reasons still to come
                key = (pod.namespace, pod.name, pod.uid)
                if self._told.get(key) == headline(message):
                    continue
                if len(self._told) >= 50_000:  # pods come and go: forgetting costs one event said again
                    self._told.clear()
                self._told[key] = headline(message)
                self.problems.append(f"could not set the PodScheduled condition on pod {pod.namespace}/{pod.name}: "
                                     f"{exc.message}")
            self._event(pod, reason, message, warning=warning)
            written += 1
        return written

    def _event(self, pod: MasterPod, reason: str, message: str, *, warning: bool = False,
               verbatim: bool = False) -> None:
        try:
            self.recorder.record(pod.namespace, pod.name, pod.uid, reason, message, warning=warning,
                                 verbatim=verbatim)
        except DetK8sError as exc:  # an event is information: the decision it reports stands without it
            self.problems.append(f"could not record event {reason} on pod {pod.namespace}/{pod.name}: {exc.message}")

    def _now(self) -> str:
        return self.clock().astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
