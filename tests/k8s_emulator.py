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

The real `kubernetes` client and det-k8s's adapter talk to it over HTTP; nothing in det-k8s is
patched.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import itertools
import re
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml

Key = tuple[str, str | None, str]  # (plural, namespace, name)

CLUSTER_SCOPED = {"nodes", "namespaces", "storageclasses", "priorityclasses", "persistentvolumes"}
KINDS = {
    "pods": ("v1", "Pod"), "nodes": ("v1", "Node"), "services": ("v1", "Service"),
    "configmaps": ("v1", "ConfigMap"), "secrets": ("v1", "Secret"), "events": ("v1", "Event"),
    "namespaces": ("v1", "Namespace"), "persistentvolumeclaims": ("v1", "PersistentVolumeClaim"),
    "deployments": ("apps/v1", "Deployment"), "leases": ("coordination.k8s.io/v1", "Lease"),
    "storageclasses": ("storage.k8s.io/v1", "StorageClass"), "jobs": ("batch/v1", "Job"),
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


@attrs.define(kw_only=True)
class ApiEmulator(kmock.KubernetesScaffold):
    """Stateful Kubernetes API: see the module docstring."""

    objects: dict[Key, dict[str, Any]] = attrs.field(factory=dict)
    pod_logs: dict[tuple[str, str], str] = attrs.field(factory=dict)
    graceful_pods: bool = False
    calls: list[tuple[str, str, dict[str, str]]] = attrs.field(factory=list)
    deletions: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)  # (path, DeleteOptions body)
    faults: list[Fault] = attrs.field(factory=list)
    version: dict[str, str] = attrs.field(factory=lambda: {"major": "1", "minor": "31", "gitVersion": "v1.31.4"})
    version_forbidden: bool = False  # /version answers 403, as where RBAC removes system:public-info-viewer
    _lock: threading.RLock = attrs.field(factory=threading.RLock)
    _rv: Iterator[int] = attrs.field(factory=lambda: itertools.count(1000))

    # -- state helpers usable from test code (any thread) ------------------------------------

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store an object as if created through the API (fills metadata)."""
        kind = obj["kind"]
        plural = next(p for p, (_, k) in KINDS.items() if k == kind)
        meta = obj.get("metadata") or {}
        namespace = None if plural in CLUSTER_SCOPED else meta.get("namespace", "default")
        with self._lock:
            stored = self._fill(plural, namespace, copy.deepcopy(dict(obj)))
            self.objects[(plural, namespace, stored["metadata"]["name"])] = stored
            return copy.deepcopy(stored)

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
            self.objects[key] = merge_patch(self.objects[key], dict(patch))
            self.objects[key]["metadata"]["resourceVersion"] = str(next(self._rv))

    def remove(self, plural: str, name: str, namespace: str | None = "default") -> None:
        with self._lock:
            self.objects.pop((plural, None if plural in CLUSTER_SCOPED else namespace, name), None)

    def finish_deletions(self) -> int:
        """Let gracefully deleted pods go, as kubelet would after they terminate."""
        with self._lock:
            gone = [k for k, o in self.objects.items() if (o.get("metadata") or {}).get("deletionTimestamp")]
            for key in gone:
                del self.objects[key]
            return len(gone)

    def fail(self, method: str, plural: str, status: int, message: str, *, name: str | None = None,
             times: int = 1, reason: str = "", after_write: bool = False, delay: float = 0.0,
             late_write: bool = False, after: int = 0) -> None:
        with self._lock:
            self.faults.append(Fault(method.upper(), plural, status, message, name, times, reason, after_write, delay,
                                     late_write, after))

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
        # kmock reads /api/v1/namespaces/<name> as a namespace prefix, not as the Namespace object itself
        namespace_object = re.fullmatch(r"/api/v1/namespaces(?:/([^/]+))?", path)
        plural = "namespaces" if namespace_object else self._plural(request)
        if plural is None:
            return await super()._handle(request)
        name = namespace_object.group(1) if namespace_object else request.name
        method = str(request.method.value if hasattr(request.method, "value") else request.method).upper()
        body_name = (request.data.get("metadata") or {}).get("name") if isinstance(request.data, dict) else None
        with self._lock:
            self.calls.append((method, path, dict(request.params)))
            fault = self._take_fault(method, plural, name or body_name)
            if fault is None:
                return self._serve(method, plural, request, name)
            if fault.after_write:
                self._serve(method, plural, request, name)
        if fault.late_write:  # scheduled apart from this request: the client hanging up must not cancel it
            asyncio.get_running_loop().call_later(fault.delay, self._write_late, method, plural, request, name)
        if fault.delay:
            await asyncio.sleep(fault.delay)
        reasons = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid", 500: "InternalError"}
        return _status(fault.status, fault.reason or reasons.get(fault.status, "Failure"), fault.message)

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
            self.objects[new_key] = obj
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
                updated = merge_patch(current, body)
            updated["metadata"]["resourceVersion"] = str(next(self._rv))
            if plural == "secrets":
                _store_string_data(updated)
            self.objects[key] = updated
            return aiohttp.web.json_response(updated)
        if method == "DELETE" and name is None:
            doomed = [k for k, o in self.objects.items() if k[0] == plural and (namespace is None or k[1] == namespace)
                      and self._selected(o, request.params)]
            for doomed_key in doomed:
                del self.objects[doomed_key]
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
                obj["metadata"]["deletionTimestamp"] = datetime.datetime.now(datetime.UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ")
                obj["metadata"]["resourceVersion"] = str(next(self._rv))
            return obj
        del self.objects[key]
        return obj

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
                obj["metadata"]["ownerReferences"] = [ref for ref in refs if ref.get("uid") != uid]
                obj["metadata"]["resourceVersion"] = str(next(self._rv))
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

    def write_kubeconfig(self, path: Path, *, context: str = "emulator", namespace: str = "default") -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "emulator-token"}}],
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
    container = {"name": "main", "image": "busybox", "resources": {"requests": dict(requests or {})}}
    status: dict[str, Any] = {"phase": phase}
    if container_statuses is not None:
        status["containerStatuses"] = container_statuses
    spec: dict[str, Any] = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": spec, "status": status}
