"""A Kubernetes API emulator on 127.0.0.1 for tests: kmock's scaffold plus the semantics we rely on.

kmock parses Kubernetes URLs, serves discovery and renders `Status` errors; its own stateful
emulator is deliberately thin (no selectors, no resourceVersion). This subclass keeps objects
itself and adds what det-k8s depends on, the way a real API server behaves:

- create: 409 AlreadyExists; uid, creationTimestamp, resourceVersion, namespace and
  generateName filled in; pods start in phase Pending; a Secret's stringData is stored base64-encoded in
  data (and never returned);
- PUT and merge PATCH: 404 when missing; 409 Conflict when the body carries a stale
  metadata.resourceVersion (optimistic concurrency, e.g. two clients racing for a Lease);
- list: labelSelector (=, ==, !=, in, notin, exists, !exists), fieldSelector (metadata.name,
  metadata.namespace, spec.nodeName, status.phase, involvedObject.name), limit/continue paging;
- delete: 404 when missing; optionally graceful for pods (deletionTimestamp set, the object stays
  until `finish_deletions()`), as kubelet-managed pods take time to go away, unless
  gracePeriodSeconds is 0 (a force deletion); dependents (metadata.ownerReferences naming the
  deleted object's uid) are deleted too with propagationPolicy Background or Foreground (the
  garbage collector, done at once here) and orphaned (the reference removed) with Orphan, the
  default for batch/v1 Jobs as for the real API server; every DELETE's options are in `deletions`;
- pods/<name>/log from `pod_logs`;
- fault injection: `fail("POST", "pods", 403, "...")` answers the next matching request with a
  Status error (403, 409, 500...), without touching the stored state; `after_write=True` does the
  write first (the answer is lost), `late_write=True` does it only after `delay` seconds, when a
  client with a shorter read timeout has given up and rolled back (a write landing after a timeout).
- a held request: `pause("POST", "pods", after=1)` holds the second pod creation; `reached` is set when it
  arrives, `release()` serves it then (if its client still waits), `drop()` answers 503 (the kill harness).
- (scheduling the master's pods) the `pods/binding` subresource (sets spec.nodeName and the
  PodScheduled condition; 400 for a name mismatch, 404 for a missing pod, 409 when the pod is already
  bound, being deleted or not the uid the binding names, 422 for an invalid target), the `pods/status`
  subresource (GET, PUT, PATCH), strategic merge patches (lists of conditions merged by `type`),
  core/v1 Events (checked like the API server's legacy event validation), priority admission
  (`spec.priority` resolved from the PriorityClass, 403 when it is missing), ResourceQuota admission (a pod a
  quota of its namespace would exceed is refused with 403 `exceeded quota: NAME, requested: ..., used: ...,
  limited: ...`; status.used follows the namespace's unfinished pods, as the quota controller keeps it;
  `tests/support/quota_admission.py`), and watch: from a
  resourceVersion (or from now, with the existing objects first as ADDED), label and field selectors
  (an object leaving the selection is DELETED), `timeoutSeconds`, BOOKMARK events every
  `bookmark_interval` seconds with allowWatchBookmarks, and 410 Gone for a resourceVersion older than
  the `watch_window` events kept (or mid-stream, after `expire_watches()`);
- schema validation: every object a client writes (created, replaced, the result of a patch, a
  Binding) is checked against the Kubernetes OpenAPI schema kubernetes-validate carries (strict: an
  unknown field fails) and refused with 422 Invalid, as a real API server refuses it.

The real `kubernetes` client and det-k8s's adapter talk to it over HTTP; nothing in det-k8s is
patched.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import parsing as kmock_parsing

from tests.support import quota_admission

Key = tuple[str, str | None, str]  # (plural, namespace, name)
BINDING = ("v1", "Binding")

# kmock 0.8 cannot parse the Namespace collection itself: it reads /api/v1/namespaces as the start of a namespace
# prefix with no name and fails every request there (500). A real API server lists and watches Namespaces there.
_kmock_parse_path = kmock_parsing.parse_path


def _parse_path(path: str) -> kmock_parsing.ParsedPath:
    if re.fullmatch(r"/api/v1/namespaces/?", path):
        return kmock_parsing.ParsedPath("", "v1", "namespaces")
    return _kmock_parse_path(path)


kmock_parsing.parse_path = _parse_path

CLUSTER_SCOPED = {"nodes", "namespaces", "storageclasses", "priorityclasses", "persistentvolumes", "deviceclasses",
                  "resourceslices"}
KINDS = {
    "pods": ("v1", "Pod"), "nodes": ("v1", "Node"), "services": ("v1", "Service"),
    "configmaps": ("v1", "ConfigMap"), "secrets": ("v1", "Secret"), "events": ("v1", "Event"),
    "namespaces": ("v1", "Namespace"), "persistentvolumeclaims": ("v1", "PersistentVolumeClaim"),
    "persistentvolumes": ("v1", "PersistentVolume"),
    "deployments": ("apps/v1", "Deployment"), "leases": ("coordination.k8s.io/v1", "Lease"),
    "storageclasses": ("storage.k8s.io/v1", "StorageClass"),
    "priorityclasses": ("scheduling.k8s.io/v1", "PriorityClass"), "jobs": ("batch/v1", "Job"),
    "resourcequotas": ("v1", "ResourceQuota"),
    "deviceclasses": ("resource.k8s.io/v1", "DeviceClass"), "resourceslices": ("resource.k8s.io/v1", "ResourceSlice"),
}
# The registry's default garbage-collection policy is orphan for batch/v1 Jobs (kept for compatibility: the API
# server warns "child pods are preserved by default when jobs are deleted"), background for everything else.
ORPHAN_BY_DEFAULT = {"jobs"}


def _status(code: int, reason: str, message: str) -> aiohttp.web.Response:
    return aiohttp.web.json_response({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
                                      "code": code, "reason": reason, "message": message}, status=code)


def _store_string_data(secret: dict[str, Any]) -> None:
    """As the API server stores a Secret: stringData merged into data, base64-encoded; stringData never kept."""
    data = secret.get("data") or {}
    for key, value in (secret.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        secret["data"] = data


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


_REQ = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|\s+(in|notin)\s*\(([^)]*)\))?\s*$")


def _split_selector(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return parts


def label_selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    for requirement in _split_selector(selector):
        match = _REQ.match(requirement)
        if not match:
            raise ValueError(f"unable to parse requirement: {requirement!r}")
        negate, key, op, value, set_op, values = match.groups()
        if op in ("=", "=="):
            ok = labels.get(key) == value
        elif op == "!=":
            ok = labels.get(key) != value
        elif set_op == "in":
            ok = labels.get(key) in {v.strip() for v in values.split(",")}
        elif set_op == "notin":
            ok = labels.get(key) not in {v.strip() for v in values.split(",")}
        else:
            ok = (key in labels) != bool(negate)
        if not ok:
            return False
    return True


FIELDS = {
    "metadata.name": lambda o: (o.get("metadata") or {}).get("name"),
    "metadata.namespace": lambda o: (o.get("metadata") or {}).get("namespace"),
    "spec.nodeName": lambda o: (o.get("spec") or {}).get("nodeName") or "",
    "status.phase": lambda o: (o.get("status") or {}).get("phase"),
    "involvedObject.name": lambda o: (o.get("involvedObject") or {}).get("name"),
    "involvedObject.kind": lambda o: (o.get("involvedObject") or {}).get("kind"),
    "involvedObject.namespace": lambda o: (o.get("involvedObject") or {}).get("namespace"),
    "involvedObject.uid": lambda o: (o.get("involvedObject") or {}).get("uid"),
    "reason": lambda o: o.get("reason"),
    "type": lambda o: o.get("type"),
    "source": lambda o: (o.get("source") or {}).get("component"),
    "reportingComponent": lambda o: o.get("reportingComponent"),
    "spec.schedulerName": lambda o: (o.get("spec") or {}).get("schedulerName") or "default-scheduler",
}


def field_selector_matches(selector: str, obj: Mapping[str, Any]) -> bool:
    for requirement in selector.split(","):
        if not requirement.strip():
            continue
        negate = "!=" in requirement
        name, value = re.split(r"!=|==|=", requirement, maxsplit=1)
        getter = FIELDS.get(name.strip())
        if getter is None:
            raise ValueError(f'field label not supported: {name.strip()}')
        if (getter(obj) == value.strip()) == negate:
            return False
    return True


@dataclass
class Fault:
    method: str
    plural: str
    status: int
    message: str
    name: str | None = None
    times: int = 1
    reason: str = ""
    after_write: bool = False  # do the write, then answer with the error (the client never learns it worked)
    delay: float = 0.0  # seconds to wait before answering (beyond a client's read timeout: a lost answer)
    late_write: bool = False  # do the write after `delay`, not before: it lands after the client gave up
    after: int = 0  # let this many matching requests through first ("the 3rd pod creation fails")
    retry_after: str = "1"  # a 429's Retry-After header, as API Priority and Fairness sends it


@dataclass
class Pause:
    """A request held before it is served (`ApiEmulator.pause`): `reached` is set when it arrives; `release()` lets
    it through (it is then served as usual, however long ago its client gave up); `drop()` answers 503 unserved."""

    method: str
    plural: str
    name: str | None = None
    after: int = 0  # let this many matching requests through first
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    dropped: bool = False
    served: bool = False  # the held request was carried out after its release
    finished: threading.Event = field(default_factory=threading.Event)  # answered, dropped, or its client hung up

    def release(self) -> None:
        self.released.set()

    def drop(self) -> None:
        self.dropped = True
        self.released.set()


@attrs.define(kw_only=True)
class ApiEmulator(kmock.KubernetesScaffold):
    """Stateful Kubernetes API: see the module docstring."""

    objects: dict[Key, dict[str, Any]] = attrs.field(factory=dict)
    pod_logs: dict[tuple[str, str], str] = attrs.field(factory=dict)
    graceful_pods: bool = False
    calls: list[tuple[str, str, dict[str, str]]] = attrs.field(factory=list)
    deletions: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)  # (path, DeleteOptions body)
    faults: list[Fault] = attrs.field(factory=list)
    pauses: list[Pause] = attrs.field(factory=list)
    version: dict[str, str] = attrs.field(factory=lambda: {"major": "1", "minor": "31", "gitVersion": "v1.31.4"})
    version_forbidden: bool = False  # /version answers 403, as where RBAC removes system:public-info-viewer
    _lock: threading.RLock = attrs.field(factory=threading.RLock)
    _rv: Iterator[int] = attrs.field(factory=lambda: itertools.count(1000))
    # scheduling the master's pods (see the module docstring)
    validate: bool = True  # check every written object against the Kubernetes OpenAPI schema
    watch_window: int = 100_000  # change events kept for watches; older resourceVersions get 410 Gone
    bookmark_interval: float = 1.0  # seconds between BOOKMARK events on watches that allow them
    watch_delay: float = 0.0  # seconds every change takes to reach the watches (a loaded API server's lag)
    watch_delays: dict[str, float] = attrs.field(factory=dict)  # per bearer token: one client's watches lag more
    bindings: list[tuple[str, str, str, float]] = attrs.field(factory=list)  # (namespace, pod, node, time.time())
    # a test's observation, not an API server's check (a real one accepts the binding; kubelet then rejects the
    # pod): with observe_overcommits, every binding that leaves its node's GPU requests above its allocatable GPUs
    observe_overcommits: bool = False
    overcommits: list[tuple[str, str, int, int]] = attrs.field(factory=list)  # (pod, node, GPUs requested, allocatable)
    _history: list[Change] = attrs.field(factory=list)
    _history_base: int = 0  # sequence number of _history[0]
    _expired: int = 0  # bumped by expire_watches(): open watches end with a 410 ERROR event
    _oldest_rv: int = 0  # a watch from an older resourceVersion than this gets 410 Gone
    _discovery: bool = False  # serve_discovery() was called
    _has_quotas: bool = False  # a ResourceQuota was ever stored (pod writes skip quota work until then)

    # -- state helpers usable from test code (any thread) ------------------------------------

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store an object as if created through the API (fills metadata)."""
        kind = obj["kind"]
        plural = next(p for p, (_, k) in KINDS.items() if k == kind)
        meta = obj.get("metadata") or {}
        namespace = None if plural in CLUSTER_SCOPED else meta.get("namespace", "default")
        with self._lock:
            stored = self._fill(plural, namespace, copy.deepcopy(dict(obj)))
            key = (plural, namespace, stored["metadata"]["name"])
            self._record("MODIFIED" if key in self.objects else "ADDED", key, stored, self.objects.get(key))
            self.objects[key] = stored
            self._sync_quotas(plural, namespace)
            return copy.deepcopy(self.objects[key])

    def get(self, plural: str, name: str, namespace: str | None = "default") -> dict[str, Any] | None:
        with self._lock:
            key = (plural, None if plural in CLUSTER_SCOPED else namespace, name)
            obj = self.objects.get(key)
            return copy.deepcopy(obj) if obj is not None else None

    def items(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(o) for (p, ns, _), o in sorted(self.objects.items(), key=lambda kv: kv[0][2])
                    if p == plural and (namespace is None or ns == namespace)]

    def update(self, plural: str, name: str, patch: Mapping[str, Any], namespace: str | None = "default") -> None:
        """Change an object behind the clients' backs (a kubelet updating status, a pod failing)."""
        with self._lock:
            key = (plural, None if plural in CLUSTER_SCOPED else namespace, name)
            before = self.objects[key]
            self.objects[key] = merge_patch(self.objects[key], dict(patch))
            self.objects[key]["metadata"]["resourceVersion"] = str(next(self._rv))
            self._record("MODIFIED", key, self.objects[key], before)
            self._sync_quotas(plural, key[1])

    def remove(self, plural: str, name: str, namespace: str | None = "default") -> None:
        with self._lock:
            key = (plural, None if plural in CLUSTER_SCOPED else namespace, name)
            gone = self.objects.pop(key, None)
            if gone is not None:
                self._record_deleted(key, gone)

    def finish_deletions(self) -> int:
        """Let gracefully deleted pods go, as kubelet would after they terminate."""
        with self._lock:
            gone = [k for k, o in self.objects.items() if (o.get("metadata") or {}).get("deletionTimestamp")]
            for key in gone:
                self._record_deleted(key, self.objects.pop(key))
            return len(gone)

    def fail(self, method: str, plural: str, status: int, message: str, *, name: str | None = None,
             times: int = 1, reason: str = "", after_write: bool = False, delay: float = 0.0,
             late_write: bool = False, after: int = 0, retry_after: str = "1") -> None:
        with self._lock:
            self.faults.append(Fault(method.upper(), plural, status, message, name, times, reason, after_write, delay,
                                     late_write, after, retry_after))

    def pause(self, method: str, plural: str, *, name: str | None = None, after: int = 0) -> Pause:
        """Hold the next matching request (after `after` of them went through) until the test releases it."""
        held = Pause(method.upper(), plural, name, after)
        with self._lock:
            self.pauses.append(held)
        return held

    def _take_pause(self, method: str, plural: str, name: str | None) -> Pause | None:
        for held in self.pauses:
            if held.method == method and held.plural == plural and (held.name is None or held.name == name):
                if held.after > 0:
                    held.after -= 1
                    continue
                self.pauses.remove(held)
                return held
        return None

    def count(self, method: str, plural: str | None = None) -> int:
        with self._lock:
            return sum(1 for m, path, _ in self.calls if m == method.upper() and (plural is None or f"/{plural}" in path))

    # -- serving ----------------------------------------------------------------------------

    def _fill(self, plural: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        api_version, kind = KINDS.get(plural, ("v1", plural.capitalize()))
        obj.setdefault("apiVersion", api_version)
        obj.setdefault("kind", kind)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if namespace is not None:
            meta["namespace"] = namespace
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        meta["resourceVersion"] = str(next(self._rv))
        if plural == "pods":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        if plural == "secrets":
            _store_string_data(obj)
        return obj

    @staticmethod
    def _plural(request: kmock.Request) -> str | None:
        resource = request.resource
        return resource.plural if resource is not None and isinstance(resource.plural, str) else None

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        path = request.url.path
        if path == "/version":
            if self.version_forbidden:
                return _status(403, "Forbidden", 'forbidden: User "system:anonymous" cannot get path "/version"')
            return aiohttp.web.json_response(self.version)
        if path == "/api/v1" and self._discovery:  # kmock names the core group version "/v1"; kubectl wants "v1"
            response = await super()._handle(request)
            body = json.loads(getattr(response, "body", b"") or b"{}")
            return aiohttp.web.json_response({**body, "groupVersion": "v1"}, status=response.status)
        # kmock reads /api/v1/namespaces/<name> as a namespace prefix, not as the Namespace object itself
        namespace_object = re.fullmatch(r"/api/v1/namespaces(?:/([^/]+))?", path)
        plural = "namespaces" if namespace_object else self._plural(request)
        if plural is None:
            return await super()._handle(request)
        name = namespace_object.group(1) if namespace_object else request.name
        method = str(request.method.value if hasattr(request.method, "value") else request.method).upper()
        body_name = (request.data.get("metadata") or {}).get("name") if isinstance(request.data, dict) else None
        watching = method == "GET" and str(request.params.get("watch", "")).lower() in ("true", "1")
        with self._lock:
            held = None if watching else self._take_pause(method, plural, name or body_name)
        if held is not None:  # served on release, unless its client hung up meanwhile (aiohttp cancels the handler)
            held.reached.set()
            try:
                while not held.released.is_set():
                    await asyncio.sleep(0.01)
                if held.dropped:
                    return _status(503, "ServiceUnavailable", "dropped by the test")
                with self._lock:
                    self.calls.append((method, path, dict(request.params)))
                    held.served = True
                    return self._serve(method, plural, request, name)
            finally:
                held.finished.set()
        with self._lock:
            self.calls.append((method, path, dict(request.params)))
            fault = self._take_fault(method, plural, name or body_name)
            if fault is None and not watching:
                return self._serve(method, plural, request, name)
            if fault is not None and fault.after_write:
                self._serve(method, plural, request, name)
        if fault is None:
            return await self._watch(plural, request)
        if fault.late_write:  # scheduled apart from this request: the client hanging up must not cancel it
            asyncio.get_running_loop().call_later(fault.delay, self._write_late, method, plural, request, name)
        if fault.delay:
            await asyncio.sleep(fault.delay)
        reasons = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid", 429: "TooManyRequests",
                   500: "InternalError"}
        answer = _status(fault.status, fault.reason or reasons.get(fault.status, "Failure"), fault.message)
        if fault.status == 429:
            answer.headers["Retry-After"] = fault.retry_after
        return answer

    def _write_late(self, method: str, plural: str, request: kmock.Request, name: str | None) -> None:
        with self._lock:
            self._serve(method, plural, request, name)

    def _take_fault(self, method: str, plural: str, name: str | None) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.plural == plural and (fault.name is None or fault.name == name):
                if fault.after > 0:
                    fault.after -= 1
                    continue
                fault.times -= 1
                if fault.times <= 0:
                    self.faults.remove(fault)
                return fault
        return None

    def _serve(self, method: str, plural: str, request: kmock.Request, name: str | None) -> aiohttp.web.StreamResponse:
        namespace = None if plural in CLUSTER_SCOPED else request.namespace
        key: Key = (plural, namespace, name or "")
        kind_name = KINDS.get(plural, ("v1", plural))[1].lower()
        if plural == "pods" and request.subresource in ("binding", "status"):
            return self._serve_pod_subresource(method, request, key)
        if method == "GET" and name is None:
            return self._list(plural, namespace, request.params)
        if method == "GET" and request.subresource == "log":
            if key not in self.objects:
                return _status(404, "NotFound", f'pods "{name}" not found')
            return aiohttp.web.Response(text=self.pod_logs.get((namespace or "", name or ""), ""))
        if method == "GET":
            obj = self.objects.get(key)
            if obj is None:
                return _status(404, "NotFound", f'{plural} "{name}" not found')
            return aiohttp.web.json_response(obj)
        if method == "POST":
            body = request.data if isinstance(request.data, dict) else {}
            if namespace is None and plural not in CLUSTER_SCOPED:
                namespace = (body.get("metadata") or {}).get("namespace") or "default"
            obj = self._fill(plural, namespace, copy.deepcopy(body))
            new_key = (plural, namespace, obj["metadata"]["name"])
            if new_key in self.objects:
                return _status(409, "AlreadyExists", f'{plural} "{new_key[2]}" already exists')
            refused = self._admit(plural, obj) or self._invalid(plural, obj)
            if refused is not None:
                return refused
            self.objects[new_key] = obj
            self._record("ADDED", new_key, obj, None)
            self._sync_quotas(plural, namespace)
            return aiohttp.web.json_response(obj, status=201)
        if method in ("PUT", "PATCH"):
            current = self.objects.get(key)
            if current is None:
                return _status(404, "NotFound", f'{plural} "{name}" not found')
            body = request.data if isinstance(request.data, dict) else {}
            wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                return _status(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{name}": the object has '
                               "been modified; please apply your changes to the latest version and try again")
            if method == "PUT":
                updated = copy.deepcopy(body)
                meta = updated.setdefault("metadata", {})
                for keep in ("uid", "creationTimestamp", "namespace", "name"):
                    meta[keep] = current["metadata"].get(keep)
                updated.setdefault("apiVersion", current.get("apiVersion"))
                updated.setdefault("kind", current.get("kind"))
            else:
                updated = self._patched(current, body, request)
            refused = self._invalid(plural, updated)
            if refused is not None:
                return refused
            updated["metadata"]["resourceVersion"] = str(next(self._rv))
            if plural == "secrets":
                _store_string_data(updated)
            self.objects[key] = updated
            self._record("MODIFIED", key, updated, current)
            return aiohttp.web.json_response(updated)
        if method == "DELETE" and name is None:
            doomed = [k for k, o in self.objects.items() if k[0] == plural and (namespace is None or k[1] == namespace)
                      and self._selected(o, request.params)]
            for doomed_key in doomed:
                self._record_deleted(doomed_key, self.objects.pop(doomed_key))
            return aiohttp.web.json_response({"kind": "Status", "status": "Success"})
        if method == "DELETE":
            obj = self.objects.get(key)
            if obj is None:
                return _status(404, "NotFound", f'{plural} "{name}" not found')
            options = request.data if isinstance(request.data, dict) else {}
            self.deletions.append((request.url.path, dict(options)))
            grace = options.get("gracePeriodSeconds", request.params.get("gracePeriodSeconds"))
            policy = options.get("propagationPolicy") or request.params.get("propagationPolicy") or (
                "Orphan" if plural in ORPHAN_BY_DEFAULT else "Background")
            result = self._remove(key, grace)
            self._collect_dependents(obj["metadata"].get("uid"), policy)
            return aiohttp.web.json_response(result)
        return _status(405, "MethodNotAllowed", f"{method} is not supported on {kind_name}")

    def _remove(self, key: Key, grace: Any) -> dict[str, Any]:
        obj = self.objects[key]
        # As the API server does: grace 0 removes a pod at once (what `kubectl delete --force` sends).
        if key[0] == "pods" and self.graceful_pods and str(grace) != "0":
            if not obj["metadata"].get("deletionTimestamp"):
                before = copy.deepcopy(obj)
                obj["metadata"]["deletionTimestamp"] = datetime.datetime.now(datetime.UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ")
                obj["metadata"]["resourceVersion"] = str(next(self._rv))
                self._record("MODIFIED", key, obj, before)
            return obj
        del self.objects[key]
        return self._record_deleted(key, obj)

    def _collect_dependents(self, uid: str | None, policy: str) -> None:
        """The garbage collector: dependents of a deleted owner go (Background, Foreground) or lose the reference
        (Orphan)."""
        if not uid:
            return
        for key, obj in list(self.objects.items()):
            refs = (obj.get("metadata") or {}).get("ownerReferences") or []
            if key not in self.objects or not any(ref.get("uid") == uid for ref in refs):
                continue
            if policy == "Orphan":
                before = copy.deepcopy(obj)
                obj["metadata"]["ownerReferences"] = [ref for ref in refs if ref.get("uid") != uid]
                obj["metadata"]["resourceVersion"] = str(next(self._rv))
                self._record("MODIFIED", key, obj, before)
            else:
                self._remove(key, None)
                self._collect_dependents(obj["metadata"].get("uid"), "Background")

    def _selected(self, obj: Mapping[str, Any], params: Mapping[str, str]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if params.get("labelSelector") and not label_selector_matches(params["labelSelector"], labels):
            return False
        return not (params.get("fieldSelector") and not field_selector_matches(params["fieldSelector"], obj))

    def _list(self, plural: str, namespace: str | None, params: Mapping[str, str]) -> aiohttp.web.StreamResponse:
        try:
            items = [o for (p, ns, _), o in sorted(self.objects.items(), key=lambda kv: (kv[0][1] or "", kv[0][2]))
                     if p == plural and (namespace is None or ns == namespace) and self._selected(o, params)]
        except ValueError as exc:
            return _status(400, "BadRequest", str(exc))
        start = int(params.get("continue") or 0)
        limit = int(params.get("limit") or 0) or len(items)
        page = items[start:start + limit]
        meta: dict[str, Any] = {"resourceVersion": str(next(self._rv))}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        api_version, kind = KINDS.get(plural, ("v1", plural.capitalize()))
        return aiohttp.web.json_response({"apiVersion": api_version, "kind": f"{kind}List", "metadata": meta,
                                          "items": [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                                                    for o in page]})

    # -- scheduling the master's pods: subresources, admission, validation, watch ---------------
    #    (see the module docstring; real-server behaviour cited from kubernetes/kubernetes
    #    pkg/registry/core/pod/storage/storage.go (BindingREST), pkg/apis/core/validation/events.go
    #    (legacyValidateEvent) and plugin/pkg/admission/priority)

    def serve_discovery(self) -> None:
        """Announce the kinds in KINDS through API discovery, so the real kubectl can talk to the emulator
        (`kubectl describe pod` shows what a user sees: the PodScheduled condition and the pod's Events)."""
        self._discovery = True
        verbs = {"get", "list", "watch", "create", "update", "patch", "delete"}
        for plural, (api_version, kind) in KINDS.items():
            group, _, version = api_version.rpartition("/")
            self.resources[f"{group}/{version}/{plural}" if group else f"{version}/{plural}"] = kmock.ResourceInfo(
                kind=kind, singular=kind.lower(), namespaced=plural not in CLUSTER_SCOPED, verbs=verbs,
                shortnames={"po"} if plural == "pods" else set(),
                subresources={"status", "binding", "log"} if plural == "pods" else set())

    def expire_watches(self) -> None:
        """End every open watch with an ERROR event carrying 410 Gone, as after an etcd compaction."""
        with self._lock:
            self._expired += 1

    def compact(self) -> None:
        """Forget every change so far: a watch from an older resourceVersion gets 410 Gone."""
        with self._lock:
            self._history_base += len(self._history)
            self._history = []
            self._oldest_rv = int(next(self._rv))

    def _record(self, kind: str, key: Key, obj: Mapping[str, Any], before: Mapping[str, Any] | None) -> None:
        self._history.append(Change(int(str(obj["metadata"]["resourceVersion"])), kind, key, copy.deepcopy(dict(obj)),
                                    copy.deepcopy(dict(before)) if before is not None else None))
        if len(self._history) > 2 * self.watch_window:
            drop = len(self._history) - self.watch_window
            self._oldest_rv = self._history[drop - 1].rv
            del self._history[:drop]
            self._history_base += drop

    def _record_deleted(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(next(self._rv))  # the deletion's own revision
        self._record("DELETED", key, gone, obj)
        self._sync_quotas(key[0], key[1])
        return gone  # what DELETE answers: etcd3's store decodes the object at the deletion's revision

    def _sync_quotas(self, plural: str, namespace: str | None) -> None:
        """The quota controller: status.hard from spec.hard, status.used from the namespace's unfinished pods."""
        if plural == "resourcequotas":
            self._has_quotas = True
        if not self._has_quotas or plural not in ("pods", "resourcequotas"):
            return
        pods = [o for k, o in self.objects.items() if k[0] == "pods" and k[1] == namespace]
        for key, quota in list(self.objects.items()):
            if key[0] != "resourcequotas" or key[1] != namespace:
                continue
            status = {"hard": dict((quota.get("spec") or {}).get("hard") or {}),
                      "used": quota_admission.used_by(quota, pods)}
            if quota.get("status") != status:
                before = copy.deepcopy(quota)
                quota["status"] = status
                quota["metadata"]["resourceVersion"] = str(next(self._rv))
                self._record("MODIFIED", key, quota, before)

    def _invalid(self, plural: str, obj: Mapping[str, Any]) -> aiohttp.web.Response | None:
        """422 Invalid when the object breaks the Kubernetes OpenAPI schema (or a rule the server adds)."""
        if not self.validate:
            return None
        from tests.support.k8s_schema import problems

        api_version, kind = KINDS.get(plural, BINDING if plural == "bindings" else ("v1", plural))
        found = problems({"apiVersion": api_version, "kind": kind, **obj},
                         f"{self.version['major']}.{self.version['minor']}")
        found += _semantic_problems(plural, obj)
        if not found:
            return None
        kind = str(obj.get("kind") or KINDS.get(plural, ("v1", plural))[1])
        name = str((obj.get("metadata") or {}).get("name") or "")
        return _status(422, "Invalid", f'{kind} "{name}" is invalid: {"; ".join(found)}')

    def _admit(self, plural: str, obj: dict[str, Any]) -> aiohttp.web.Response | None:
        """Admission on create: the Priority plugin resolves a pod's priority from its PriorityClass."""
        if plural != "pods":
            return None
        spec = obj.setdefault("spec", {})
        name = obj["metadata"]["name"]
        class_name = spec.get("priorityClassName")
        classes = {k[2]: o for k, o in self.objects.items() if k[0] == "priorityclasses"}
        if class_name:
            found = classes.get(class_name)
            if found is None:
                return _status(403, "Forbidden", f'pods "{name}" is forbidden: no PriorityClass with name '
                               f"{class_name} was found")
        else:
            found = next((c for c in classes.values() if c.get("globalDefault")), None)
        value = int(found.get("value", 0)) if found else 0
        if spec.get("priority") is not None and spec["priority"] != value:
            return _status(403, "Forbidden", f'pods "{name}" is forbidden: the integer value of priority '
                           f"({spec['priority']}) must not be provided in pod spec; priority admission controller "
                           f"computed {value} from the given PriorityClass name")
        spec["priority"] = value
        if found is not None:
            spec.setdefault("preemptionPolicy", found.get("preemptionPolicy") or "PreemptLowerPriority")
        namespace = obj["metadata"].get("namespace") or "default"
        quotas = [o for k, o in self.objects.items() if k[0] == "resourcequotas" and k[1] == namespace
                  ] if self._has_quotas else []
        refused = quota_admission.refusal(quotas, obj)  # the ResourceQuota admission plugin
        return _status(403, "Forbidden", refused) if refused else None

    def _patched(self, current: Mapping[str, Any], body: Any, request: kmock.Request) -> Any:
        content_type = str(request.headers.get("Content-Type", "")).split(";")[0].strip()
        if content_type == "application/strategic-merge-patch+json":
            return strategic_merge_patch(current, body)
        return merge_patch(current, body)

    def _serve_pod_subresource(self, method: str, request: kmock.Request, key: Key) -> aiohttp.web.StreamResponse:
        name = key[2]
        current = self.objects.get(key)
        if request.subresource == "binding":
            if method != "POST":
                return _status(405, "MethodNotAllowed", f"{method} is not supported on pods/binding")
            return self._bind(request, key, current)
        if current is None:
            return _status(404, "NotFound", f'pods "{name}" not found')
        if method == "GET":
            return aiohttp.web.json_response(current)
        if method not in ("PUT", "PATCH"):
            return _status(405, "MethodNotAllowed", f"{method} is not supported on pods/status")
        body = request.data if isinstance(request.data, dict) else {}
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", f'Operation cannot be fulfilled on pods "{name}": the object has been '
                           "modified; please apply your changes to the latest version and try again")
        changed = body if method == "PUT" else self._patched(current, body, request)
        updated = copy.deepcopy(dict(current))
        updated["status"] = copy.deepcopy((changed or {}).get("status") or {})  # only status changes through /status
        refused = self._invalid("pods", updated)
        if refused is not None:
            return refused
        updated["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = updated
        self._record("MODIFIED", key, updated, current)
        return aiohttp.web.json_response(updated)

    def _bind(self, request: kmock.Request, key: Key, pod: dict[str, Any] | None) -> aiohttp.web.StreamResponse:
        """POST pods/<name>/binding, as BindingREST.Create and setPodHostAndAnnotations answer it."""
        name = key[2]
        binding = request.data if isinstance(request.data, dict) else {}
        meta = binding.get("metadata") or {}
        if meta.get("name") != name:
            return _status(400, "BadRequest", "name in URL does not match name in Binding object")
        refused = self._invalid("bindings", binding)
        if refused is not None:
            return refused
        target = binding.get("target") or {}
        if target.get("kind") not in (None, "", "Node"):
            return _status(422, "Invalid", f'Binding "{name}" is invalid: target.kind: Invalid value: '
                           f'"{target.get("kind")}": must be empty or \'Node\'')
        if not target.get("name"):
            return _status(422, "Invalid", f'Binding "{name}" is invalid: target.name: Required value')
        if pod is None:
            return _status(404, "NotFound", f'pods "{name}" not found')

        def conflict(why: str) -> aiohttp.web.Response:
            return _status(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": {why}')

        if meta.get("uid") and meta["uid"] != pod["metadata"].get("uid"):
            return conflict(f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: "
                            f"{pod['metadata'].get('uid')}")
        if pod["metadata"].get("deletionTimestamp"):
            return conflict(f"pod {name} is being deleted, cannot be assigned to a host")
        if (pod.get("spec") or {}).get("nodeName"):
            return conflict(f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        if (pod.get("spec") or {}).get("schedulingGates"):
            return conflict(f"pod {name} has non-empty .spec.schedulingGates")
        bound = copy.deepcopy(pod)
        bound["spec"]["nodeName"] = target["name"]
        if meta.get("annotations"):
            bound["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        status = bound.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        previous = next((c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"), None)
        scheduled: dict[str, Any] = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                     "lastTransitionTime": _now()}
        if previous is not None and previous.get("status") == "True":
            scheduled["lastTransitionTime"] = previous.get("lastTransitionTime")
        status["conditions"] = [*conditions, scheduled]
        bound["metadata"]["resourceVersion"] = str(next(self._rv))
        self.objects[key] = bound
        self._record("MODIFIED", key, bound, pod)
        self.bindings.append((key[1] or "", name, target["name"], time.time()))
        if self.observe_overcommits:
            requested, allocatable = self._gpus_on(target["name"])
            if requested > allocatable:
                self.overcommits.append((name, target["name"], requested, allocatable))
        return aiohttp.web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                          "code": 201}, status=201)

    def _gpus_on(self, node_name: str) -> tuple[int, int]:
        """GPUs requested by the node's bound, not finished pods (deleting ones still hold theirs), and allocatable."""
        requested = 0
        for (plural, _, _), obj in self.objects.items():
            if plural != "pods" or (obj.get("spec") or {}).get("nodeName") != node_name:
                continue
            if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for container in obj["spec"].get("containers") or ():
                requested += int(((container.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0))
        found = self.objects.get(("nodes", None, node_name)) or {}
        allocatable = int(((found.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", 0))
        return requested, allocatable

    def _matches(self, plural: str, namespace: str | None, obj: Mapping[str, Any] | None,
                 params: Mapping[str, str]) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if namespace is not None and plural not in CLUSTER_SCOPED and meta.get("namespace") != namespace:
            return False
        return self._selected(obj, params)

    async def _watch(self, plural: str, request: kmock.Request) -> aiohttp.web.StreamResponse:
        """A watch stream: JSON lines of {type, object}, from a resourceVersion or from now."""

        namespace = None if plural in CLUSTER_SCOPED else request.namespace
        params = dict(request.params)
        try:
            self._selected({}, params)  # malformed selectors answer 400 before the stream starts
        except ValueError as exc:
            return _status(400, "BadRequest", str(exc))
        since = str(params.get("resourceVersion") or "")
        bookmarks = str(params.get("allowWatchBookmarks", "")).lower() in ("true", "1")
        token = str(request.headers.get("Authorization", "")).removeprefix("Bearer ").strip()
        delay = self.watch_delays.get(token, self.watch_delay)
        timeout = float(params.get("timeoutSeconds") or 1800)
        initial: list[dict[str, Any]] = []
        with self._lock:
            expired = self._expired
            if since in ("", "0"):  # from now: the existing objects first, as ADDED
                position = self._history_base + len(self._history)
                initial = [{"type": "ADDED", "object": copy.deepcopy(o)} for (p, _, _), o in sorted(
                    self.objects.items(), key=lambda kv: (kv[0][1] or "", kv[0][2]))
                    if p == plural and self._matches(plural, namespace, o, params)]
            else:
                try:
                    wanted = int(since)
                except ValueError:
                    return _status(400, "BadRequest", f"invalid resource version {since!r}")
                if wanted < self._oldest_rv:
                    return _status(410, "Expired", f"too old resource version: {wanted} ({self._oldest_rv})")
                position = self._history_base + next(
                    (i for i, change in enumerate(self._history) if change.rv > wanted), len(self._history))
        raw = request._raw_request
        assert raw is not None
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(raw)

        async def send(event: Mapping[str, Any]) -> None:
            await response.write(json.dumps(event).encode() + b"\n")

        try:
            for event in initial:
                await send(event)
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self.bookmark_interval
            while time.monotonic() < deadline:
                with self._lock:
                    if self._expired != expired or position < self._history_base:
                        gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                            "status": "Failure", "reason": "Expired", "code": 410,
                                                            "message": "too old resource version"}}
                        events: list[dict[str, Any]] = [gone]
                    else:
                        events = []
                        delay = self.watch_delays.get(token, self.watch_delay)  # read each round: a test may change it
                        ripe = time.monotonic() - delay
                        for change in self._history[position - self._history_base:]:
                            if change.at > ripe:
                                break
                            position += 1
                            event = change.event_for(plural, namespace, params, self._matches)
                            if event is not None:
                                events.append(event)
                    bookmark = bookmarks and time.monotonic() >= next_bookmark
                    if position < self._history_base + len(self._history):  # changes still on their way
                        bookmark = False
                    current_rv = str(next(self._rv)) if bookmark else ""  # every later change is newer
                for event in events:
                    await send(event)
                if events and events[0]["type"] == "ERROR":
                    break
                if bookmark:
                    api_version, kind = KINDS.get(plural, ("v1", plural.capitalize()))
                    await send({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version,
                                                               "metadata": {"resourceVersion": current_rv}}})
                    next_bookmark = time.monotonic() + self.bookmark_interval
                await asyncio.sleep(0.005 if events else 0.02)
        except (ConnectionResetError, asyncio.CancelledError):
            return response
        await response.write_eof()
        return response


@dataclass(frozen=True)
class Change:
    """One change to a stored object, kept for watches: its revision, type, key, the object after and before."""

    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: Key
    obj: dict[str, Any]
    before: dict[str, Any] | None
    at: float = field(default_factory=time.monotonic)  # when it happened

    def event_for(self, plural: str, namespace: str | None, params: Mapping[str, str],
                  matches: Any) -> dict[str, Any] | None:
        """The event a watch with these selectors sees: an object entering the selection is ADDED, leaving it DELETED."""
        if self.key[0] != plural:
            return None
        now = self.type != "DELETED" and matches(plural, namespace, self.obj, params)
        was = self.type != "ADDED" and matches(plural, namespace, self.before, params)
        if now and was:
            return {"type": "MODIFIED", "object": self.obj}
        if now:
            return {"type": "ADDED", "object": self.obj}
        if was:
            return {"type": "DELETED", "object": self.obj}
        return None


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch as the API server applies it to the fields det-k8s patches: maps merge, null
    removes, and lists with a merge key (conditions by `type`) merge element by element; other lists replace."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # directives ($patch, $setElementOrder, ...) are not needed here
        if value is None:
            result.pop(key, None)
        elif key == "conditions" and isinstance(value, list):
            merged = [copy.deepcopy(c) for c in result.get(key) or [] if isinstance(c, dict)]
            for item in value:
                kind = item.get("type") if isinstance(item, dict) else None
                at = next((i for i, c in enumerate(merged) if c.get("type") == kind), None)
                if at is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[at] = merge_patch(merged[at], item)
            result[key] = merged
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CONDITION_STATUS = ("True", "False", "Unknown")


def _semantic_problems(plural: str, obj: Mapping[str, Any]) -> list[str]:
    """Rules the API server checks beyond the schema, for the kinds det-k8s writes when it schedules."""
    found = []
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    if plural in ("events", "pods", "bindings") and (len(name) > 253 or not _DNS_SUBDOMAIN.match(name)):
        found.append(f"metadata.name: Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of lower "
                     "case alphanumeric characters, '-' or '.'")
    if plural == "events":  # pkg/apis/core/validation/events.go, legacyValidateEvent (core/v1 requests)
        involved = obj.get("involvedObject") or {}
        if not obj.get("eventTime"):
            if involved.get("namespace") and involved.get("namespace") != meta.get("namespace"):
                found.append(f"involvedObject.namespace: Invalid value: {involved.get('namespace')!r}: does not "
                             "match event.namespace")
        else:
            for field_name in ("reportingComponent", "reportingInstance", "action", "reason"):
                if not obj.get(field_name):
                    found.append(f"{field_name}: Required value")
            if len(str(obj.get("message") or "")) > 1024:
                found.append("message: Too long: must have at most 1024 bytes")
    if plural == "pods":
        # pkg/apis/core/validation: validateResourceRequirements: an extended resource (a name with a domain, not
        # kubernetes.io's) may not be overcommitted: it needs a limit, equal to its request
        spec = obj.get("spec") or {}
        for kind in ("initContainers", "containers"):
            for i, container in enumerate(spec.get(kind) or ()):
                res = (container or {}).get("resources") or {}
                requests, limits = res.get("requests") or {}, res.get("limits") or {}
                for resource, amount in requests.items():
                    if "/" in resource and not resource.startswith(("kubernetes.io/", "hugepages-")):
                        if resource not in limits:
                            found.append(f"spec.{kind}[{i}].resources.limits: Required value: Limit must be set for "
                                         "non overcommitable resources")
                        elif str(limits[resource]) != str(amount):
                            found.append(f"spec.{kind}[{i}].resources.requests: Invalid value: {amount!r}: must be "
                                         "equal to " + f"{resource} limit of {limits[resource]}")
        for i, condition in enumerate((obj.get("status") or {}).get("conditions") or ()):
            if isinstance(condition, dict) and condition.get("status") not in _CONDITION_STATUS:
                found.append(f"status.conditions[{i}].status: Unsupported value: {condition.get('status')!r}: "
                             f"supported values: {', '.join(map(repr, _CONDITION_STATUS))}")
    return found


@dataclass
class RunningEmulator:
    """An ApiEmulator served on 127.0.0.1 from a background event loop."""

    emulator: ApiEmulator = field(default_factory=ApiEmulator)
    url: str = ""
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stop: asyncio.Event | None = None

    def start(self) -> RunningEmulator:
        ready = threading.Event()
        errors: list[BaseException] = []

        async def serve() -> None:
            self._stop = asyncio.Event()
            try:
                async with self.emulator, kmock.Server(self.emulator, host="127.0.0.1") as server:
                    self.url = str(server.url).rstrip("/")
                    ready.set()
                    await self._stop.wait()
            except BaseException as exc:  # report start-up failures to the test thread
                errors.append(exc)
                ready.set()

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(serve())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="k8s-emulator", daemon=True)
        self._thread.start()
        if not ready.wait(15) or errors:
            raise RuntimeError(f"the Kubernetes API emulator did not start: {errors}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def write_kubeconfig(self, path: Path, *, context: str = "emulator", namespace: str = "default",
                         token: str = "emulator-token") -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": "emulator", "user": "tester", "namespace": namespace}}],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        return path


# -- object builders for tests ---------------------------------------------------------------


def node(name: str, *, gpus: int = 0, cpu: str = "7910m", memory: str = "30Gi", labels: Mapping[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, ready: bool = True, unschedulable: bool = False,
         addresses: list[dict[str, str]] | None = None) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec,
            "status": {"allocatable": allocatable, "capacity": dict(allocatable),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "addresses": addresses or [{"type": "InternalIP", "address": "10.0.0.1"}]}}


def pod(name: str, *, namespace: str = "default", node_name: str | None = None, phase: str = "Running",
        labels: Mapping[str, str] | None = None, requests: Mapping[str, str] | None = None,
        container_statuses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": dict(requests or {})}
    extended = {k: v for k, v in (requests or {}).items() if "/" in k and not k.startswith("hugepages-")}
    if extended:  # the API server refuses an extended resource requested without an equal limit (found on the real one)
        resources["limits"] = extended
    container = {"name": "main", "image": "busybox", "resources": resources}
    status: dict[str, Any] = {"phase": phase}
    if container_statuses is not None:
        status["containerStatuses"] = container_statuses
    spec: dict[str, Any] = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": spec, "status": status}
