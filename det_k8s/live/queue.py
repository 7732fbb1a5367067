"""The experiment queue, kept in the cluster: one ConfigMap per submitted group.

Keeping the queue in the namespace means nothing is lost when a client exits, several users
share one queue, and `kubectl get configmaps -l det-k8s.io/queue-entry` shows it without
det-k8s. Each entry is self-contained: besides the experiment text it stores the pod group and
the pod manifests built at submission time, so a scheduling pass needs no settings files.
Changes go through optimistic concurrency (the entry's resourceVersion), so two clients never
overwrite each other's state transitions silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InputError, NotFound, UsageError
from ..kube.api import KubeApi
from ..kube.kinds import CONFIGMAPS
from ..labels import GROUP, MANAGED_BY, MANAGER, QUEUE_ENTRY, QUEUE_STATE, SUBMITTED_AT, USER
from ..safe_read import load_json
from ..scheduling.serialize import group_from_dict

PREFIX = "det-k8s-queue-"

QUEUED, RUNNING, PAUSED, COMPLETED, FAILED, KILLED = "queued", "running", "paused", "completed", "failed", "killed"
ACTIVE_STATES = (QUEUED, RUNNING, PAUSED)
MAX_EVENTS = 20


@dataclass(frozen=True)
class QueueEntry:
    """One submitted experiment and its scheduling state."""

    id: str
    experiment: str
    user: str
    priority: int
    submitted_at: str
    sequence: int
    state: str = QUEUED
    attempts: int = 0
    rejections: int = 0  # kubelet admission rejections (not the job's fault; free up to a limit)
    reason: str = ""
    experiment_text: str = ""
    group: Mapping[str, Any] = field(default_factory=dict)
    pods: tuple[Mapping[str, Any], ...] = ()
    service: Mapping[str, Any] | None = None
    placement: Mapping[str, str] = field(default_factory=dict)
    events: tuple[str, ...] = ()
    resource_version: str = ""
    doomed: tuple[Mapping[str, Any], ...] = ()  # failed or unfinished creations that may have left pods (creation_records)
    placement_mode: str = ""  # auto, native or det-k8s as `experiment create --placement` chose ("": the policy's)
    pod_group: str = ""  # "<version>/<name>" of the PodGroup its pods name while kube-scheduler places them
    uid: str = ""  # the ConfigMap's, for owner references (the PodGroup goes with the entry)

    @property
    def configmap_name(self) -> str:
        return PREFIX + self.id

    def with_event(self, text: str, **changes: Any) -> QueueEntry:
        """A copy with `changes` applied and `text` appended to the entry's short history."""
        events = (*self.events, text)[-MAX_EVENTS:]
        return replace(self, events=events, **changes)


def to_configmap(entry: QueueEntry, namespace: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": entry.configmap_name,
        "namespace": namespace,
        "labels": {
            QUEUE_ENTRY: "true",
            QUEUE_STATE: entry.state,
            GROUP: entry.id,
            USER: _label_value(entry.user),
            MANAGED_BY: MANAGER,
        },
        "annotations": {SUBMITTED_AT: entry.submitted_at},
    }
    if entry.resource_version:
        meta["resourceVersion"] = entry.resource_version
    status = {"state": entry.state, "attempts": entry.attempts, "rejections": entry.rejections, "reason": entry.reason,
              "placement": dict(entry.placement), "events": list(entry.events)}
    if entry.doomed:
        status["doomed"] = [dict(mark) for mark in entry.doomed]
    if entry.pod_group:
        status["podGroup"] = entry.pod_group
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {
            "entry.json": json.dumps({"id": entry.id, "experiment": entry.experiment, "user": entry.user,
                                      "priority": entry.priority, "submitted_at": entry.submitted_at,
                                      "sequence": entry.sequence,
                                      **({"placement": entry.placement_mode} if entry.placement_mode else {})},
                                     sort_keys=True),
            "status.json": json.dumps(status, sort_keys=True),
            "experiment.yaml": entry.experiment_text,
            "group.json": json.dumps(entry.group, sort_keys=True),
            "pods.json": json.dumps(list(entry.pods)),
            "service.json": json.dumps(entry.service),
        },
    }


def _checked_payload(group: Any, pods: Any, service: Any) -> None:
    """Raise ValueError unless the stored group, pods and service have the shape a pass relies on."""
    if not isinstance(pods, list) or not all(
            isinstance(p, dict) and isinstance((p.get("metadata") or {}).get("name"), str)
            and isinstance(p.get("spec"), dict) for p in pods):
        raise ValueError("pods.json is not a list of pod manifests")
    if service is not None and not isinstance(service, dict):
        raise ValueError("service.json is not a Service manifest")
    if not isinstance(group, dict):
        raise ValueError("group.json is not a pod group")
    try:
        decoded = group_from_dict(group)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"group.json is not a pod group ({exc!r})") from exc
    if sorted(p.name for p in decoded.pods) != sorted(p["metadata"]["name"] for p in pods):
        raise ValueError("group.json and pods.json name different pods")


UNREADABLE = (InputError, ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError)
"""What reading a hand-edited, truncated or hostile entry may raise: the entry is then quarantined."""


def _field(data: Mapping[str, Any], key: str, default: str, expected: type) -> Any:
    """One JSON value of the ConfigMap, bounded (size, depth) and of the expected type."""
    value = load_json(str(data.get(key) or default), key)
    if not isinstance(value, expected):
        raise ValueError(f"{key} is not a JSON {'object' if expected is dict else 'list'}")
    return value


def from_configmap(obj: Mapping[str, Any]) -> QueueEntry:
    """An entry from its ConfigMap; one of UNREADABLE when it is not a readable one."""
    data = obj.get("data") or {}
    meta = obj.get("metadata") or {}
    if not isinstance(data, dict) or not isinstance(meta, dict):
        raise ValueError("its data or metadata is not a mapping")
    head = _field(data, "entry.json", "{}", dict)
    status = _field(data, "status.json", "{}", dict)
    group = load_json(str(data.get("group.json") or "{}"), "group.json")
    pods = load_json(str(data.get("pods.json") or "[]"), "pods.json")
    service = load_json(str(data.get("service.json") or "null"), "service.json")
    _checked_payload(group, pods, service)
    return QueueEntry(
        id=str(head.get("id") or str(meta.get("name", "")).removeprefix(PREFIX)),
        experiment=str(head.get("experiment", "")),
        user=str(head.get("user", "")),
        priority=int(head.get("priority", 50)),
        submitted_at=str(head.get("submitted_at", "")),
        sequence=int(head.get("sequence", 0)),
        state=str(status.get("state", QUEUED)),
        attempts=int(status.get("attempts", 0)),
        rejections=int(status.get("rejections", 0)),
        reason=str(status.get("reason", "")),
        experiment_text=str(data.get("experiment.yaml", "")),
        group=group,
        pods=tuple(pods),
        service=service,
        placement={str(k): str(v) for k, v in (status.get("placement") or {}).items()},
        events=tuple(str(e) for e in status.get("events") or ()),
        resource_version=str(meta.get("resourceVersion", "")),
        doomed=_doomed(status.get("doomed")),
        placement_mode=str(head.get("placement") or ""),
        pod_group=str(status.get("podGroup") or ""),
        uid=str(meta.get("uid") or ""),
    )


def _doomed(raw: Any) -> tuple[Mapping[str, Any], ...]:
    """The recorded failed creations: each {attempt, pods, at}, and `intent` while a creation is (or was, when its
    process died) in flight; anything else is unreadable."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(
            isinstance(m, dict) and isinstance(m.get("attempt"), str) and isinstance(m.get("pods"), list)
            and all(isinstance(p, str) for p in m["pods"]) for m in raw):
        raise ValueError("status.json's doomed is not a list of failed creations")
    return tuple({"attempt": m["attempt"], "pods": list(m["pods"]), "at": str(m.get("at", "")),
                  **({"intent": str(m["intent"])} if m.get("intent") else {})} for m in raw)


def _reason(exc: BaseException) -> str:
    text = exc.message if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else text[:197] + "..."


def _label_value(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_." else "-" for c in text)[:63].strip("-_.")
    return cleaned or "unknown"


@dataclass
class QueueStore:
    api: KubeApi
    namespace: str
    skipped: list[str] = field(default_factory=list)  # entries that could not be read, one message each

    def add(self, entry: QueueEntry) -> QueueEntry:
        return from_configmap(self.api.create(CONFIGMAPS, to_configmap(entry, self.namespace), self.namespace))

    def entries(self, states: Sequence[str] | None = None) -> list[QueueEntry]:
        """Entries in submission order, optionally only those in `states`."""
        selector = QUEUE_ENTRY
        if states:
            selector += f",{QUEUE_STATE} in ({','.join(states)})"
        found = []
        for obj in self.api.list(CONFIGMAPS, self.namespace, label_selector=selector):
            try:
                found.append(from_configmap(obj))
            except UNREADABLE as exc:  # hand-edited, truncated or hostile: quarantined, never blocking the queue
                meta = obj.get("metadata") if isinstance(obj, dict) else None
                name = str(meta.get("name", "?")) if isinstance(meta, dict) else "?"
                self.skipped.append(f"configmap {self.namespace}/{name} is not a readable queue entry "
                                    f"({_reason(exc)}); it is ignored: fix or delete it")
        return sorted(found, key=lambda e: (e.sequence, e.id))

    def get(self, entry_id: str) -> QueueEntry:
        try:
            obj = self.api.get(CONFIGMAPS, PREFIX + entry_id, self.namespace)
        except NotFound as exc:
            raise UsageError(f"no experiment {entry_id} in namespace {self.namespace}",
                             hint="`det-k8s experiment list` shows the ids") from exc
        try:
            return from_configmap(obj)
        except UNREADABLE as exc:
            raise InputError(f"configmap {self.namespace}/{PREFIX}{entry_id} is not a readable queue entry: "
                             f"{_reason(exc)}", hint="fix or delete that ConfigMap") from exc

    def find(self, prefix: str) -> QueueEntry:
        """An entry by id or unique id prefix (like a git hash) of at least 4 characters."""
        if len(prefix) < 4:
            exact = [e for e in self.entries() if e.id == prefix]
            if not exact:
                raise UsageError(f"experiment id {prefix!r} is too short", hint="give at least 4 characters of the id")
            return exact[0]
        matches = [e for e in self.entries() if e.id == prefix] or [e for e in self.entries() if e.id.startswith(prefix)]
        if not matches:
            raise UsageError(f"no experiment {prefix} in namespace {self.namespace}",
                             hint="`det-k8s experiment list --all` shows the ids")
        if len(matches) > 1:
            raise UsageError(f"{prefix!r} matches {len(matches)} experiments: "
                             f"{', '.join(e.id for e in matches[:5])}", hint="give more of the id")
        return matches[0]

    def update(self, entry: QueueEntry) -> QueueEntry:
        """Write the entry back; a concurrent change since it was read is a Conflict."""
        body = to_configmap(entry, self.namespace)
        return from_configmap(self.api.replace(CONFIGMAPS, entry.configmap_name, body, self.namespace))

    def delete(self, entry: QueueEntry) -> None:
        self.api.delete(CONFIGMAPS, entry.configmap_name, self.namespace, missing_ok=True)
