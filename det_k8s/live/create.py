"""Act: `Create`, a placed group's pods created all or none, and the repair of a creation that was interrupted.

The intent is recorded in the group's queue entry before its first pod is created (`doomed.mark_intent`, with the
PodGroup it names); the creation that ends, succeeded or failed, replaces the record (`doomed.settle`). A process
killed in between leaves the record: whoever holds the scheduling Lease next (a pass of `experiment create`,
`scheduler run --once`, the loop) runs `recover` first of all, which deletes every pod of that attempt and keeps
the record as a failed creation's (`doomed.close_intents`), so a pod that lands later still goes on sight.
Commands without the Lease (`experiment list`, `doctor`) only report it (`doomed.unfinished`). Every state the
record can be left in, and what repairs it:

    intent, no pods            -> closed (nothing to delete); the group is planned again in the same pass
    intent, some or all pods   -> the pods deleted, then closed; the group waits for them to stop, then runs
    intent, a pod not deletable-> the record stays open, the pass says so; the next holder tries again
    settled, pods running      -> nothing to repair (the entry is running)
    settled as failed, pods    -> a failed creation's record: its pods go on sight, with or without the Lease
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import DetK8sError, GroupCreationFailed
from ..scheduling.groups import pin
from ..scheduling.lifecycle import next_attempt
from .creation_records import (
    Swept,
    close_intents,
    delete_doomed,
    mark_failed,
    mark_intent,
    new_attempt,
    settle,
    sweep_namespace,
    uncleared,
)
from .decide import QUOTA_BACKOFF, QUOTA_REFUSED, Create, Recover, attempts_text
from .native import VERSIONS, member, pod_group_manifest, pod_group_name
from .submit import create_group, pod_group_ref

if TYPE_CHECKING:
    from ..kube.api import KubeApi
    from .effects import Effects
    from .queue import QueueEntry
    from .scheduler import PassReport


def recover(fx: Effects, intent: Recover, entries: dict[str, QueueEntry], report: PassReport) -> None:
    """Act on a `Recover`, first of all under the Lease: the pods of interrupted and failed creations deleted, then
    the unfinished records whose pods are all gone closed as failed creations' (`entries`: every entry by id)."""
    swept = delete_doomed(fx.api, fx.namespace, intent.pods, intent.interrupted)
    report.problems.extend(x.message for x in swept)
    kept = {x.pod.group for x in swept if not x.deleted}
    for group in intent.close:
        if group not in kept:
            entries[group] = fx.write(close_intents(entries[group]), report)


def sweep_failed(api: KubeApi, namespace: str, entries: Sequence[QueueEntry]) -> list[Swept]:
    """Without the Lease (`experiment list`, `doctor`): the pods of failed creations deleted; an unfinished one's
    only reported by the caller, never touched (its creation may be in flight in another process)."""
    return sweep_namespace(api, namespace, entries)


def refused_by_quota(exc: GroupCreationFailed) -> bool:
    """The API server's ResourceQuota admission refused a pod (403 `exceeded quota: NAME, requested: ...`)."""
    return not exc.lasting and "exceeded quota" in exc.message


def pinned(manifest: Mapping[str, Any], nodes: Mapping[str, str]) -> dict[str, Any]:
    name = str((manifest.get("metadata") or {}).get("name"))
    return {**manifest, "spec": pin(manifest.get("spec") or {}, nodes[name])}


def create(fx: Effects, intent: Create, entry: QueueEntry, report: PassReport) -> QueueEntry:
    placement = intent.placement
    nodes = dict(placement)
    mode, version = fx.placement_of(entry)
    pod_group = None
    if mode == "native" and version is None:
        why = ("placement native, but the cluster serves no PodGroup API (scheduling.k8s.io "
               f"{' or '.join(VERSIONS)} podgroups: feature gate GenericWorkload and --runtime-config); it waits "
               "(`det-k8s scheduler policy --placement auto` places it with det-k8s where the API is missing)")
        report.waiting[entry.id] = why
        return fx.note(entry, why, report)
    if version is not None:
        name = pod_group_name(entry.id)
        pod_group = pod_group_manifest(name, fx.namespace, version, len(entry.pods), entry.id,
                                       {"name": entry.configmap_name, "uid": entry.uid})
        manifests = [member(m, name, nodes[str(m["metadata"]["name"])]) for m in entry.pods]
    else:
        manifests = [pinned(m, nodes) for m in entry.pods]
    fx.still_ours()
    attempt = new_attempt()
    try:  # the intent first: a successor finishes what a killed process leaves (`recover`)
        # (with the PodGroup it names: an interrupted creation's teardown or a kill then deletes it too)
        entry = fx.record(replace(
            mark_intent(entry, attempt, [str(m["metadata"]["name"]) for m in manifests], fx.now()),
            pod_group=pod_group_ref(pod_group) if pod_group is not None else entry.pod_group))
    except DetK8sError as exc:
        report.problems.append(f"{entry.id}: could not record its creation before starting it, so it was not "
                               f"started: {exc.message}; the next pass tries again")
        return entry
    try:
        try:
            create_group(fx.api, fx.namespace, manifests, entry.service, workers=fx.workers,
                         attempt=attempt, pod_group=pod_group)
        except GroupCreationFailed as exc:
            if not (mode == "auto" and pod_group is not None and exc.pod_group_denied):
                raise
            # auto never makes a group wait for native placement: det-k8s places it itself, as without the API
            report.problems.append(f"{entry.id}: placement auto: {exc.message}; det-k8s places it itself (grant "
                                   "get, create and delete on podgroups.scheduling.k8s.io, as `det-k8s scheduler "
                                   "manifest` does, for kube-scheduler's gang scheduling)")
            pod_group = None
            entry = replace(entry, pod_group="")  # none was created: nothing of it to delete later
            manifests = [pinned(m, nodes) for m in entry.pods]
            create_group(fx.api, fx.namespace, manifests, entry.service, workers=fx.workers, attempt=attempt)
    except GroupCreationFailed as exc:
        return failed(fx, entry, attempt, exc, report)
    if fx.view is not None:  # the next pass must see them before the watch brings them
        for manifest in manifests:
            fx.view.assume_created({**manifest, "metadata": {**manifest["metadata"], "namespace": fx.namespace}})
    report.placed[entry.id] = tuple(placement)
    where = ", ".join(f"{pod} on {node}" for pod, node in placement)
    entry = settle(entry, attempt)
    if pod_group is not None:
        report.native[entry.id] = pod_group_ref(pod_group)
        return fx.write(entry.with_event(
            f"{fx.stamp()} released to kube-scheduler as pod group {pod_group['metadata']['name']} (gang of "
            f"{len(manifests)}; planned: {where})", state="running", reason="", placement=nodes,
            pod_group=pod_group_ref(pod_group)), report)
    return fx.write(entry.with_event(f"{fx.stamp()} placed: {where}", state="running", reason="",
                                     placement=nodes, pod_group=""), report)


def failed(fx: Effects, entry: QueueEntry, attempt: str, exc: GroupCreationFailed,
           report: PassReport) -> QueueEntry:
    """A creation that failed and was undone (or could not be, wholly): its record settled as a failed one's, the
    loss charged (a transient failure and a quota's first refusal are free)."""
    entry = mark_failed(settle(entry, attempt), exc, fx.now())  # its pods, if any remain, go on sight
    if exc.remaining:
        report.uncleared[entry.id] = uncleared(entry.id, exc, fx.namespace)
    if exc.leftovers:
        report.problems.append(f"{entry.id}: could not delete {', '.join(exc.leftovers)}")
    left = "nothing was left running" if not exc.remaining else "some of its pods may remain"
    message, lasting = exc.message, exc.lasting
    if refused_by_quota(exc):
        if QUOTA_REFUSED in entry.reason:  # its one free retry was refused too: counted from now on
            message, lasting = f"{message}; {QUOTA_REFUSED} again{fx.quota_hint()}", True
        else:  # the quota changed since the pass read it (or it cannot be read): once more, after a pause
            why = (f"creating its pods failed, {left}: {message}; {QUOTA_REFUSED}: trying again once in "
                   f"{QUOTA_BACKOFF:.0f} s (not counted as an attempt){fx.quota_hint()}")
            report.requeued[entry.id] = why
            return fx.write(entry.with_event(f"{fx.stamp()} {why}", reason=why), report)
    if not lasting:  # a timeout, a 5xx: may well pass next time, so not the group's fault
        why = f"creating its pods failed, {left}: {message}; trying again (not counted as an attempt)"
        report.requeued[entry.id] = why
        if entry.reason == why:  # the same failure as last pass: no new event (the intent record goes)
            return fx.write(entry, report)
        return fx.write(entry.with_event(f"{fx.stamp()} {why}", reason=why), report)
    attempts, again = next_attempt(entry.attempts, fx.max_attempts)
    if again:
        why = f"creating its pods failed, {left}: {message} (attempt {attempts + 1} of {fx.max_attempts})"
        report.requeued[entry.id] = why
    else:
        why = f"creating its pods failed, {left}: {message}; gave up after {attempts_text(attempts)}"
        report.failed[entry.id] = why
    return fx.write(entry.with_event(f"{fx.stamp()} {why}", attempts=attempts, reason=why,
                                     state="queued" if again else "failed"), report)


