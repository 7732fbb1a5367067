"""Kubernetes Events from det-k8s on the pods it schedules, with core/v1's count conventions.

Why core/v1 and not events.k8s.io/v1: the Determined master (client-go 0.20 in 0.17-0.26, 0.28 in 0.38)
watches core/v1 Events to copy a pod's events into the trial log, every kubectl prints core/v1
`count`/`lastTimestamp` in `kubectl describe`, and every RBAC role that grants events grants the
core group. (The API server stores both versions as one object, so events.k8s.io clients see them too.)

An event is identified by its pod, reason and message: the name is `<pod>.<hash of reason and
message>`, so the same event a second time (by this process or another det-k8s after a fail-over)
is found again and counted, as client-go's event correlator does: `count` + 1 and a new
`lastTimestamp` instead of a new object. Callers write events only when a group's reason changes,
so there is no event storm. Messages never contain the phrases the master rewrites before its trial
log (facts: versions row `tasks.events.rewrite`), and are cut to the 1024 bytes the API allows.
"""

from __future__ import annotations

import datetime
import hashlib
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ..determined.versions import fact
from ..errors import Conflict, DetK8sError, NotFound
from .api import KubeApi
from .kinds import EVENTS

COMPONENT = "det-k8s"
ACTION = "Scheduling"
MAX_MESSAGE = 1024
_REWRITTEN = tuple(str(phrase) for phrase in fact("tasks.events.rewrite").value)
_EDGES = re.compile(r"[^a-z0-9]+$")

Clock = Callable[[], datetime.datetime]


_REWORDED = {"nodes are available": "nodes available", "successfully assigned": "assigned",
             "pod triggered scale-up": "pod asked for a scale-up",
             "skip schedule deleting pod": "not scheduling a pod that is being deleted"}


def safe_message(text: str) -> str:
    """The text reworded so that none of the phrases the master replaces by its own text remains, within
    the API's limit (a node or group name cannot hold a space, so only det-k8s's own words could match)."""
    for phrase in _REWRITTEN:
        text = re.sub(re.escape(phrase), _REWORDED.get(phrase.lower(), ""), text, flags=re.IGNORECASE)
    encoded = text.encode()
    if len(encoded) > MAX_MESSAGE:
        text = encoded[:MAX_MESSAGE - 3].decode(errors="ignore") + "..."
    return text


def event_name(pod: str, reason: str, message: str) -> str:
    digest = hashlib.sha256(f"{reason}\0{message}".encode()).hexdigest()[:16]
    return f"{_EDGES.sub('', pod[:236])}.{digest}"


def _time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class EventRecorder:
    """Writes det-k8s's events. `asynchronous` (the scheduler loop): on two background threads, so a pass
    does not wait for them; failures then collect in `problems`. `flush()` waits for what is queued."""

    api: KubeApi
    instance: str  # reportingInstance: which det-k8s process
    clock: Clock = field(default=lambda: datetime.datetime.now(datetime.UTC))
    written: int = 0  # events created or counted by this recorder (for the pass report)
    asynchronous: bool = False
    problems: list[str] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)
    _pending: set[Future[Any]] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, namespace: str, pod: str, uid: str, reason: str, message: str, *,
               warning: bool = False, verbatim: bool = False) -> dict[str, Any] | None:
        """Create the event, or count it once more if it exists; raises DetK8sError when neither works
        (asynchronously: returns None at once, and a failure goes to `problems`).

        `verbatim` keeps a message the master is meant to rewrite (kube-scheduler's "Successfully assigned").
        """
        if not self.asynchronous:
            return self._record(namespace, pod, uid, reason, message, warning, verbatim)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="det-k8s-events")
            future = self._pool.submit(self._record, namespace, pod, uid, reason, message, warning, verbatim)
            self._pending.add(future)
        future.add_done_callback(self._done)
        return None

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)
        error = future.exception()
        if error is not None:
            text = error.message if isinstance(error, DetK8sError) else repr(error)
            self.problems.append(f"could not record an event: {text}")

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until every queued event is written (or `timeout`)."""
        with self._lock:
            pending = set(self._pending)
        if pending:
            wait(pending, timeout=timeout)

    def _record(self, namespace: str, pod: str, uid: str, reason: str, message: str, warning: bool,
                verbatim: bool) -> dict[str, Any]:
        message = message[:MAX_MESSAGE] if verbatim else safe_message(message)
        name = event_name(pod, reason, message)
        now = _time(self.clock())
        involved: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": namespace}
        if uid:
            involved["uid"] = uid
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved, "reason": reason, "message": message,
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": self.instance[:128], "action": ACTION,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            created = self.api.create(EVENTS, body, namespace)
        except Conflict:
            created = self._count(namespace, name, now, body)
        self.written += 1
        return created

    def _count(self, namespace: str, name: str, now: str, body: dict[str, Any]) -> dict[str, Any]:
        """The same event again: count + 1 (conditional on the version read, retried once on a race)."""
        for _ in range(2):
            try:
                current = self.api.get(EVENTS, name, namespace)
            except NotFound:  # expired (events live an hour) between the create and now
                return self.api.create(EVENTS, body, namespace)
            count = int(current.get("count") or 1) + 1
            patch = {"metadata": {"resourceVersion": (current.get("metadata") or {}).get("resourceVersion")},
                     "count": count, "lastTimestamp": now}
            try:
                return self.api.patch(EVENTS, name, patch, namespace)
            except Conflict:
                continue
        raise DetK8sError(f"event {namespace}/{name} kept changing; not counted")
