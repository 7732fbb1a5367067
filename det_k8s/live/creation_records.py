"""Pods of failed creations: marked in the queue entry, deleted on sight by any det-k8s command that sees them.

All or nothing has two ways to fail on its own: the rollback's deletions fail (the API answers
500, RBAC forbids delete), or a creation's answer is lost and the write lands later, after the
rollback found nothing to delete. Either way pods of a group that is not running may exist or
appear, holding GPUs. So every creation labels its pods with a fresh attempt id
(`det-k8s.io/attempt`), and when it fails with such pods the queue entry records the attempt and
the pod names (`QueueEntry.doomed`). Any command that reads the namespace's queue and sees a pod
carrying a recorded attempt deletes it (a scheduling pass, `experiment list`, `describe`,
`doctor`), and `doctor` reports what it found. A later attempt of the same group has another id,
so its pods are never mistaken for the failed one's.

Before its first pod is created, the creation is recorded the same way with `intent` set (`mark_intent`): an
intent record. A creation that ends, succeeded or failed, replaces it (`settle`); one whose process died (kill -9,
a lost node) leaves it, and the next holder of the scheduling Lease deletes its pods before anything else in its
pass (`sweep(..., intents=True)`), then keeps it as a plain failed-creation record so a pod landing later still
goes (`close_intents`). Commands without the Lease (`experiment list`, `doctor`) never delete a pod of an intent:
its creation may be in flight in another process; `doctor` reports it (`unfinished`).
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .. import labels as label_keys
from ..errors import DetK8sError, GroupCreationFailed
from ..kube.kinds import PODS

if TYPE_CHECKING:
    from ..kube.api import KubeApi
    from .queue import QueueEntry

ATTEMPT_LABEL = label_keys.ATTEMPT
GROUP_LABEL = label_keys.GROUP
INTENT_CREATE = "create"  # an intent record's `intent`: the creation of the recorded pods is under way
MAX_RECORDS = 10  # failed attempts remembered per entry (the oldest go first)
FORGET_AFTER = datetime.timedelta(days=1)  # a lost write lands within the API server's request timeout


def new_attempt() -> str:
    return secrets.token_hex(4)


@dataclass(frozen=True)
class Doomed:
    """A pod of a failed creation, found in the cluster."""

    name: str
    group: str
    attempt: str


def record(exc: GroupCreationFailed, now: datetime.datetime) -> dict[str, Any] | None:
    """What the queue entry keeps of a failed creation that may have left pods (None when none can remain)."""
    if not exc.attempt or not exc.remaining:
        return None
    return {"attempt": exc.attempt, "pods": list(exc.remaining), "at": _stamp(now)}


def mark_failed(entry: QueueEntry, exc: GroupCreationFailed, now: datetime.datetime) -> QueueEntry:
    """The entry with the failed creation recorded, so its pods are deleted wherever they are seen."""
    mark = record(exc, now)
    if mark is None:
        return entry
    kept = [r for r in entry.doomed if not _old(r, now)]
    return replace(entry, doomed=(*kept, mark)[-MAX_RECORDS:])


def mark_intent(entry: QueueEntry, attempt: str, pods: Sequence[str], now: datetime.datetime) -> QueueEntry:
    """The entry with the creation about to start recorded (see the module docstring)."""
    kept = [r for r in entry.doomed if not _old(r, now) and r.get("attempt") != attempt]
    mark = {"attempt": attempt, "pods": list(pods), "at": _stamp(now), "intent": INTENT_CREATE}
    return replace(entry, doomed=(*kept, mark)[-MAX_RECORDS:])


def settle(entry: QueueEntry, attempt: str) -> QueueEntry:
    """The entry without the intent record of `attempt` (its creation ended, and said what it left)."""
    return replace(entry, doomed=tuple(r for r in entry.doomed if r.get("attempt") != attempt))


def close_intents(entry: QueueEntry) -> QueueEntry:
    """The entry with its unfinished intents turned into failed-creation records (their pods were deleted)."""
    return replace(entry, doomed=tuple({k: v for k, v in r.items() if k != "intent"} for r in entry.doomed))


def unfinished(entries: Iterable[QueueEntry]) -> list[tuple[QueueEntry, Mapping[str, Any]]]:
    """(entry, intent record) for every creation that is in flight, or was when its process stopped."""
    return [(e, r) for e in entries for r in e.doomed if isinstance(r, Mapping) and r.get("intent")]


def doomed_pods(entries: Iterable[QueueEntry], pods: Iterable[tuple[str, Mapping[str, str]]],
                intents: bool = False) -> list[Doomed]:
    """The pods (name, labels) that carry an attempt some entry recorded as failed (`intents`: or as unfinished)."""
    failed = {(e.id, str(r.get("attempt"))) for e in entries for r in e.doomed
              if isinstance(r, Mapping) and (intents or not r.get("intent"))}
    if not failed:
        return []
    found = []
    for name, labels in pods:
        key = (labels.get(GROUP_LABEL, ""), labels.get(ATTEMPT_LABEL, ""))
        if key[1] and key in failed:
            found.append(Doomed(name, *key))
    return found


@dataclass(frozen=True)
class Swept:
    pod: Doomed
    deleted: bool
    message: str


def sweep(api: KubeApi, namespace: str, entries: Sequence[QueueEntry],
          pods: Iterable[tuple[str, Mapping[str, str]]], intents: bool = False) -> list[Swept]:
    """Delete every pod of a recorded failed creation among `pods` (of `namespace`), saying what happened.

    Safe without the scheduling Lease: such a pod never belongs to a running group. `intents` (only under the
    Lease: no other process can be creating them now) also deletes the pods of unfinished creations.
    """
    return delete_doomed(api, namespace, doomed_pods(entries, pods, intents), interrupted(entries))


def interrupted(entries: Iterable[QueueEntry]) -> frozenset[tuple[str, str]]:
    """(group, attempt) of every creation in flight, or that was when its process stopped."""
    return frozenset((e.id, str(r.get("attempt"))) for e, r in unfinished(entries))


def delete_doomed(api: KubeApi, namespace: str, doomed: Iterable[Doomed],
                  open_intents: Container[tuple[str, str]]) -> list[Swept]:
    """Delete the pods `doomed_pods` found, saying what happened (`open_intents`: the interrupted creations)."""
    out: list[Swept] = []
    for pod in doomed:
        what = "an interrupted" if (pod.group, pod.attempt) in open_intents else "a failed"
        try:
            api.delete(PODS, pod.name, namespace, grace_seconds=0, missing_ok=True)
        except DetK8sError as exc:
            out.append(Swept(pod, False, f"{pod.group}: pod {pod.name} of {what} creation (attempt {pod.attempt}) "
                                         f"is still there and could not be deleted: {exc.message}"))
            continue
        out.append(Swept(pod, True, f"{pod.group}: deleted pod {pod.name}, left by {what} creation "
                                    f"(attempt {pod.attempt})"))
    return out


def labelled(namespace: str, objects: Iterable[Mapping[str, Any]]) -> list[tuple[str, Mapping[str, str]]]:
    """(name, labels) of the pod objects of `namespace`, as the API returns them."""
    pairs: list[tuple[str, Mapping[str, str]]] = []
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        if (isinstance(meta, Mapping) and isinstance(meta.get("labels"), Mapping) and meta.get("name")
                and meta.get("namespace", namespace) == namespace):
            pairs.append((str(meta["name"]), {str(k): str(v) for k, v in meta["labels"].items()}))
    return pairs


def sweep_objects(api: KubeApi, namespace: str, entries: Sequence[QueueEntry],
                  objects: Iterable[Mapping[str, Any]], intents: bool = False) -> list[Swept]:
    """`sweep` over pod objects as the API returns them."""
    return sweep(api, namespace, entries, labelled(namespace, objects), intents)


def attempt_pods(api: KubeApi, namespace: str, entries: Sequence[QueueEntry],
                 intents: bool = False) -> list[tuple[str, Mapping[str, str]]]:
    """(name, labels) of the namespace's pods of a creation attempt; no request at all when no entry records a
    creation to clear (read only: `sweep` or the pass's recovery deletes what is doomed among them)."""
    if not any(r for e in entries for r in e.doomed if intents or not r.get("intent")):
        return []
    return labelled(namespace, api.list(PODS, namespace, label_selector=ATTEMPT_LABEL))


def sweep_namespace(api: KubeApi, namespace: str, entries: Sequence[QueueEntry], intents: bool = False) -> list[Swept]:
    """`sweep` over the namespace's labelled pods; no request at all when no entry records a creation to clear."""
    if not any(r for e in entries for r in e.doomed if intents or not r.get("intent")):
        return []
    return sweep(api, namespace, entries, attempt_pods(api, namespace, entries, intents), intents)


def uncleared(group_id: str, exc: GroupCreationFailed, namespace: str) -> str:
    """The message a command ends with when its group's creation could not be undone."""
    return (f"{group_id}: its pods could not all be created and the rollback is not complete: {exc.message}; "
            f"they are marked in its queue entry and deleted by the next det-k8s command that sees them in namespace "
            f"{namespace} (experiment list, scheduler run, doctor)")


def _stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _old(mark: Mapping[str, Any], now: datetime.datetime) -> bool:
    try:
        at = datetime.datetime.fromisoformat(str(mark.get("at", "")).replace("Z", "+00:00"))
    except ValueError:
        return True
    return now - at > FORGET_AFTER
