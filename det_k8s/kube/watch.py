"""The cluster as the live scheduler sees it: nodes and pods kept current by list + watch.

`read_cluster(api, ...)` lists once (one-shot passes: `experiment create`, `scheduler run --once`).
`ClusterView` is what the `scheduler run` loop keeps, as an informer does:

- each kind is listed once, then watched from the list's resourceVersion, with bookmarks (so a
  quiet watch still advances); a watch that ends is restarted from the last version seen; 410 Gone
  (the version is too old for the API server to replay) lists again; other errors back off and retry;
- what placement also reads (claims, volumes, storage classes, namespaces) is kept from watches of its
  own; a kind the credentials may not list is left out, as `read_snapshot` leaves it out;
- pods are kept as the scheduling model (`cluster.read.pod_from_object`), finished ones left out by a
  field selector (a pod that finishes leaves the watch as DELETED), so 30,000 pods cost what their
  models cost, not their JSON;
- a *relevant* change wakes the loop (`wait_for_change`, debounced: a burst of pods from one task is
  one pass): a node's schedulable shape, a served or det-k8s pod, a pod that stops holding resources,
  a queue entry. Heartbeats and container statuses wake nothing;
- what this process wrote is applied at once (`assume_bound`, `assume_created`, `assume_deleting`), so its
  next pass never sees the pods it just bound as pending, or misses the ones it created; an older event
  cannot undo a binding it has not confirmed yet;
- `pods_version` is the newest pod revision seen; `catch_up(version)` waits until the watch has
  delivered it: the fence with which a scheduler taking the Lease over makes sure it has seen every
  pod the previous holder wrote (compared as integers, as Kubernetes allows for one resource since
  KEP-5504; a version that is not an integer means: list again).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..cluster.model import Node, Pod, Snapshot
from ..cluster.read import node_from_object, pod_from_object
from ..errors import DetK8sError, Expired, Forbidden, MalformedObject, NotFound
from ..labels import MANAGED_BY, MANAGER, QUEUE_ENTRY
from ..scheduling.master import MasterPod, ServedReader, master_pod
from ..scheduling.master import served as _served
from .api import KubeApi
from .kinds import CONFIGMAPS, NODES, PODS, Kind
from .snapshot import PLACEMENT_KINDS, object_key, placement_object, read_placement_objects, snapshot_of, unserved

ACTIVE = "status.phase!=Succeeded,status.phase!=Failed"
ASSUME_FOR = 30.0  # seconds a binding of ours outlives older events that still show the pod pending


@dataclass(frozen=True)
class ClusterState:
    """Nodes and not-finished pods at one moment, plus the pods naming the scheduler det-k8s serves."""

    snapshot: Snapshot
    served: tuple[MasterPod, ...] = ()
    pods_version: str = ""


def read_cluster(api: KubeApi, scheduler_name: str | None = None) -> ClusterState:
    """List nodes and pods once (what a one-shot pass sees)."""
    try:
        return _read_cluster(api, scheduler_name)
    except MalformedObject as exc:  # not from a real API server, but never a traceback either
        raise exc.at(f"cluster {api.target.context}") from exc


def _read_cluster(api: KubeApi, scheduler_name: str | None) -> ClusterState:
    items, version = api.list_page(PODS, all_namespaces=True, field_selector=ACTIVE)
    read = ServedReader(scheduler_name)  # (`plan --snapshot` reads its file's pods with it too)
    pods = [read(obj) for obj in items]
    served = read.served
    nodes = tuple(node_from_object(obj) for obj in api.iter_list(NODES))
    return ClusterState(snapshot_of(nodes, tuple(pods), read_placement_objects(api)), tuple(served), version)


def _rv(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


def newer(a: str, b: str) -> bool:
    """Is revision a newer than b? (Unknown or non-integer versions count as newer: take the event.)"""
    try:
        return int(a) > int(b)
    except ValueError:
        return True


def _signature(pod: Pod) -> tuple[Any, ...]:
    """What of a pod can change a scheduling decision."""
    return (pod.node_name, pod.phase, pod.deleting, tuple(sorted(pod.labels.items())), tuple(sorted(pod.requests.items())))


def _gates(pod: MasterPod | None) -> tuple[str, ...]:
    return pod.gates if pod is not None else ()


@dataclass
class Stats:
    lists: dict[str, int] = field(default_factory=dict)
    watches: dict[str, int] = field(default_factory=dict)
    expired: int = 0
    events: int = 0
    relevant: int = 0
    errors: int = 0


class ClusterView:
    """Nodes and pods from list + watch (see the module docstring). Start it, then read `state()`."""

    def __init__(self, api: KubeApi, scheduler_name: str | None = None, *, queue_namespace: str | None = None,
                 watch_timeout: int = 300, backoff: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.scheduler_name = scheduler_name
        self.queue_namespace = queue_namespace
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.clock = clock
        self.stats = Stats()
        self._lock = threading.Condition()
        self._nodes: dict[str, Node] = {}
        self._node_order: list[str] | None = None  # their names, sorted, until a node comes or goes
        self._placement: dict[Kind, dict[tuple[str, str], Any]] = {}  # PLACEMENT_KINDS listed: key -> model
        self._pods: dict[tuple[str, str], tuple[Pod, MasterPod | None, str]] = {}  # (model, served, version)
        # the same pods' models, and the served ones, kept beside it (`_put`, `_pop`): what `state()` and `served()`
        # hand out is copied from them at C speed, not picked from thousands of entries on every change (issue 24)
        self._models: dict[tuple[str, str], Pod] = {}
        self._served_by_key: dict[tuple[str, str], MasterPod] = {}
        self._read: Snapshot | None = None  # the snapshot `state()` last built, until a node, pod or claim changes
        self._served: tuple[MasterPod, ...] | None = None  # what `served()` last built, until a pod changes
        self._assumed: dict[tuple[str, str], tuple[str, float]] = {}  # our bindings: node, until
        self._created: dict[tuple[str, str], float] = {}  # pods we created, until their first event (or then)
        self._pods_version = ""  # the newest pod revision an event carried
        self._changes = 0
        self.queue_changes = 0  # queue entries created, changed or deleted (or listed) since the start
        self.other_changes = 0  # relevant changes other than a served pod appearing or changing (the loop's fast path)
        self._first_change = 0.0
        self._last_change = 0.0
        self._served_added = -math.inf  # (clock) the last time a served pod appeared
        self._floor = ""  # pod events at or below this revision are older than the last list: ignored
        self._synced: set[str] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.problems: list[str] = []

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> ClusterView:
        skip = unserved(self.api)  # DRA's kinds on a server that does not serve them: not watched, not a problem
        kinds: list[tuple[Kind, str | None, str | None, str | None]] = [
            (NODES, None, None, None), (PODS, None, None, ACTIVE),
            *((kind, None, None, None) for kind in PLACEMENT_KINDS if kind not in skip)]
        if self.queue_namespace:
            kinds.append((CONFIGMAPS, self.queue_namespace, QUEUE_ENTRY, None))
        for kind, namespace, labels, fields in kinds:
            thread = threading.Thread(target=self._run, args=(kind, namespace, labels, fields), daemon=True,
                                      name=f"det-k8s-watch-{kind.plural}")
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()

    def wait_synced(self, timeout: float = 60.0) -> bool:
        """Wait until every kind has been listed once."""
        deadline = self.clock() + timeout
        with self._lock:
            while len(self._synced) < len(self._threads):
                left = deadline - self.clock()
                if left <= 0 or self._stop.is_set():
                    return False
                self._lock.wait(min(left, 0.5))
        return True

    def resync(self) -> None:
        """List pods again, now, in this thread (the fence was not reached in time); the watch goes on, and
        its events older than this list are ignored."""
        self._list(PODS, None, None, ACTIVE)

    # -- what a pass reads ------------------------------------------------------------------

    def state(self) -> ClusterState:
        """The cluster as the watches last saw it: the same object again until something in it changes (so what a
        pass works out from it, e.g. the snapshot's usage and the master's groups, is worked out once)."""
        with self._lock:
            if self._read is None:
                if self._node_order is None:
                    self._node_order = sorted(self._nodes)
                nodes = tuple(map(self._nodes.__getitem__, self._node_order))
                pods = tuple(self._models.values())
                self._read = snapshot_of(nodes, pods, self._placement)
            return ClusterState(self._read, self._served_pods(), self._pods_version)

    def served(self) -> tuple[MasterPod, ...]:
        """Only the served pods (what the fast path checks before anything else: no snapshot built); the same tuple
        again until a pod changes."""
        with self._lock:
            return self._served_pods()

    def _served_pods(self) -> tuple[MasterPod, ...]:
        if self._served is None:
            self._served = tuple(self._served_by_key.values())
        return self._served

    def _forget(self, pods: bool = True) -> None:
        """Something `state()` holds changed (a pod too, with `pods`): built again when next read."""
        self._read = None
        if pods:
            self._served = None

    def _put(self, key: tuple[str, str], model: Pod, served: MasterPod | None, version: str) -> None:
        """Hold this pod (under the lock): `state()` is built again, `served()` only if a served pod changed."""
        before = self._pods.get(key)
        self._pods[key] = (model, served, version)
        self._models[key] = model
        if served is not None:
            self._served_by_key[key] = served
        elif before is not None and before[1] is not None:
            del self._served_by_key[key]
        self._forget(pods=served is not None or (before is not None and before[1] is not None))

    def _pop(self, key: tuple[str, str]) -> bool:
        """Hold this pod no more (under the lock); whether it was held."""
        before = self._pods.pop(key, None)
        if before is None:
            return False
        del self._models[key]
        if before[1] is not None:
            del self._served_by_key[key]
        self._forget(pods=before[1] is not None)
        return True

    def served_quiet(self) -> float:
        """Seconds since a served pod last appeared (inf: none has since the start); its changes do not count."""
        with self._lock:
            return self.clock() - self._served_added

    def confirms(self, node: str, version: str, fence: str) -> bool:
        """The pods watch has delivered revision `version`, and node `node` bears det-k8s's binding taint `fence`
        (live/fence.py: a node read at `version` under our settled taint needs no read again)."""
        with self._lock:
            found = self._nodes.get(node)
            return (found is not None and found.fence == fence and bool(self._pods_version)
                    and not newer(version, self._pods_version))

    @property
    def pods_version(self) -> str:
        with self._lock:
            return self._pods_version

    def wait_for_change(self, timeout: float, *, debounce: float = 0.05, max_delay: float = 0.5) -> bool:
        """Wait for a relevant change, then for `debounce` seconds of quiet (at most `max_delay` after the
        first change); True when there was one, False after `timeout`. Consumes the changes."""
        deadline = self.clock() + timeout
        with self._lock:
            while not self._changes:
                left = deadline - self.clock()
                if left <= 0 or self._stop.is_set():
                    return False
                self._lock.wait(left)
            while True:
                now = self.clock()
                quiet_at = self._last_change + debounce
                latest = self._first_change + max_delay
                if now >= min(quiet_at, latest) or self._stop.is_set():
                    break
                self._lock.wait(min(quiet_at, latest) - now)
            self._changes = 0
            return True

    def catch_up(self, version: str, timeout: float = 2.0) -> bool:
        """Wait until the pods watch has delivered revision `version`; False (and a relist) if it does not in time."""
        if not version:
            return True
        deadline = self.clock() + timeout
        with self._lock:
            while not self._pods_version or newer(version, self._pods_version):
                left = deadline - self.clock()
                if left <= 0:
                    break
                self._lock.wait(min(left, 0.05))
            else:
                return True
        self.resync()
        return False

    # -- what this process wrote -------------------------------------------------------------

    def assume_bound(self, namespace: str, name: str, node: str) -> None:
        """A binding of ours succeeded: the pod is on `node` from now, whatever older events say."""
        with self._lock:
            found = self._pods.get((namespace, name))
            if found is not None and found[0].node_name:
                return  # its event came first: confirmed already
            self._assumed[(namespace, name)] = (node, self.clock() + ASSUME_FOR)
            if found is not None:
                model, served, version = found
                bound = replace(model, node_name=node)
                self._put((namespace, name), bound, replace(served, pod=bound) if served else None, version)

    def assume_created(self, obj: Mapping[str, Any]) -> None:
        """A pod this process created (pinned to its node): it holds its resources from now on."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        with self._lock:
            if key not in self._pods:
                self._store_pod(obj)
                self._created[key] = self.clock() + ASSUME_FOR

    def settled_version(self, timeout: float = 2.0) -> str:
        """`pods_version` once the watch has confirmed every binding and creation of ours (or after `timeout`):
        the fence a pass leaves in the Lease for the next holder."""
        deadline = self.clock() + timeout
        with self._lock:
            while self._assumed or self._created:
                now = self.clock()
                for key in [k for k, until in self._created.items() if until < now]:
                    del self._created[key]
                left = deadline - now
                if left <= 0:
                    break
                self._lock.wait(min(left, 0.05))
            return self._pods_version

    def assume_deleting(self, namespace: str, name: str) -> None:
        """A deletion of ours was accepted: the pod is leaving (it holds its resources until it is gone)."""
        with self._lock:
            found = self._pods.get((namespace, name))
            if found is not None:
                model, served, version = found
                leaving = replace(model, deleting=True)
                self._put((namespace, name), leaving, replace(served, pod=leaving) if served else None, version)

    # -- the informers -----------------------------------------------------------------------

    def _run(self, kind: Kind, namespace: str | None, labels: str | None, fields: str | None) -> None:
        version = ""
        failures = 0
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._list(kind, namespace, labels, fields)
                self.stats.watches[kind.plural] = self.stats.watches.get(kind.plural, 0) + 1
                for event in self._watch(kind, namespace, labels, fields, version):
                    if self._stop.is_set():
                        return
                    version = _rv(event.get("object") or {}) or version
                    self._apply(kind, event)
                failures = 0
            except Expired:
                self.stats.expired += 1
                version = ""  # list again
            except DetK8sError as exc:
                if isinstance(exc, Forbidden | NotFound) and kind in PLACEMENT_KINDS:
                    with self._lock:  # not ours to read (or not served): left out, as read_snapshot leaves it out
                        self._forget(pods=False)
                        self._placement.pop(kind, None)
                        self._synced.add(kind.plural)
                        self._lock.notify_all()
                    self.problems.append(f"{kind.plural} are not read ({exc.message}): pods that need them are "
                                         "planned with a warning")
                    return
                failures += 1
                self.stats.errors += 1
                self.problems.append(f"watch of {kind.plural}: {exc.message}")
                del self.problems[:-20]
                if failures >= 5:
                    version = ""  # something is off for long: start from a fresh list
                self._stop.wait(min(self.backoff * 2 ** min(failures, 6), 30.0))

    def _watch(self, kind: Kind, namespace: str | None, labels: str | None, fields: str | None,
               version: str) -> Iterator[dict[str, Any]]:
        return self.api.watch(kind, namespace, all_namespaces=namespace is None and kind.namespaced,
                              resource_version=version, label_selector=labels, field_selector=fields,
                              timeout_seconds=self.watch_timeout)

    def _list(self, kind: Kind, namespace: str | None, labels: str | None, fields: str | None) -> str:
        items, version = self.api.list_page(kind, namespace, all_namespaces=namespace is None and kind.namespaced,
                                            label_selector=labels, field_selector=fields)
        self.stats.lists[kind.plural] = self.stats.lists.get(kind.plural, 0) + 1
        with self._lock:
            self._forget(pods=kind is PODS)
            if kind is NODES:
                self._nodes, self._node_order = {}, None
                for obj in items:
                    found = node_from_object(obj)
                    self._nodes[found.name] = found
            elif kind is PODS:
                self._pods, self._models, self._served_by_key = {}, {}, {}
                for obj in items:
                    self._store_pod(obj)
                self._floor = version
                self._advance(version)
            elif kind in PLACEMENT_KINDS:
                self._placement[kind] = {object_key(obj): placement_object(kind, obj) for obj in items}
            else:
                self.queue_changes += 1
            self._synced.add(kind.plural)
            self._changed()
        return version

    def _apply(self, kind: Kind, event: Mapping[str, Any]) -> None:
        kind_of_event = str(event.get("type") or "")
        obj = event.get("object") or {}
        self.stats.events += 1
        if kind_of_event == "BOOKMARK":
            if kind is PODS:
                with self._lock:
                    self._advance(_rv(obj))
            return
        if kind is NODES:
            name = str((obj.get("metadata") or {}).get("name") or "")
            with self._lock:
                before = self._nodes.get(name)
                self._forget(pods=False)
                if kind_of_event == "DELETED":
                    if self._nodes.pop(name, None) is not None:
                        self._node_order = None
                    self._changed()
                    return
                found = node_from_object(obj)
                if before is None:
                    self._node_order = None
                self._nodes[name] = found
                if before is None or replace(before, fence="") != replace(found, fence=""):
                    self._changed()  # (det-k8s's own binding fence going up or down changes no placement)
            return
        if kind is PODS:
            self._apply_pod(kind_of_event, obj)
            return
        if kind in PLACEMENT_KINDS:  # a claim bound, a volume or namespace changed: placement may change
            with self._lock:
                self._forget(pods=False)
                known = self._placement.setdefault(kind, {})
                if kind_of_event == "DELETED":
                    known.pop(object_key(obj), None)
                else:
                    known[object_key(obj)] = placement_object(kind, obj)
                self._changed()
            return
        with self._lock:  # a queue entry: only a reason to run a pass
            self.queue_changes += 1
            self._changed()

    def _apply_pod(self, kind_of_event: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        version = _rv(obj)
        with self._lock:
            if version and self._floor and not newer(version, self._floor):
                return  # from before the last list, which already holds its outcome
            before = self._pods.get(key)
            self._advance(version)
            if self._created.pop(key, None) is not None:
                self._lock.notify_all()
            if before is not None and version and before[2] and not newer(version, before[2]):
                return  # older than what we hold (our own write was faster than its event)
            if kind_of_event == "DELETED":
                self._pop(key)
                if self._assumed.pop(key, None) is not None:
                    self._lock.notify_all()
                if before is not None and (before[1] is not None or before[0].active):
                    self._changed()
                return
            model = self._store_pod(obj)
            served = self._pods[key][1]
            if (before is not None and _signature(before[0]) == _signature(model)
                    and _gates(before[1]) == _gates(served)):  # (a queue controller removing a gate: a pass)
                return
            if self._relevant(before[0] if before else None, model):
                # a served pod that appeared or changed while holding what it held: the fast path may bind its gang
                self._changed(served=served is not None and not model.deleting
                              and not (before is not None and before[0].active and not model.active))
                if served is not None and before is None:
                    self._served_added = self.clock()

    def _store_pod(self, obj: Mapping[str, Any]) -> Pod:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        served = master_pod(obj) if _served(obj, self.scheduler_name) else None
        model = served.pod if served is not None else pod_from_object(obj)
        assumed = self._assumed.get(key)
        if assumed is not None:
            if model.node_name or model.deleting or self.clock() > assumed[1]:
                del self._assumed[key]  # confirmed (or gone, or too old to hold on to)
                self._lock.notify_all()
            else:
                model = replace(model, node_name=assumed[0])
                served = replace(served, pod=model) if served is not None else None
        self._put(key, model, served, _rv(obj))
        return model

    def _relevant(self, before: Pod | None, after: Pod) -> bool:
        """A served or det-k8s pod changed, or a pod stopped holding resources."""
        if after.labels.get(MANAGED_BY) == MANAGER or (before is not None and before.labels.get(MANAGED_BY) == MANAGER):
            return True
        if self._pods.get((after.namespace, after.name), (None, None, ""))[1] is not None:
            return True  # a served pod
        return before is not None and before.active and not after.active

    def _advance(self, version: str) -> None:
        if version and (not self._pods_version or newer(version, self._pods_version)):
            self._pods_version = version
            self._lock.notify_all()

    def _changed(self, served: bool = False) -> None:
        now = self.clock()
        if not served:
            self.other_changes += 1
        if not self._changes:
            self._first_change = now
        self._changes += 1
        self._last_change = now
        self.stats.relevant += 1
        self._lock.notify_all()
