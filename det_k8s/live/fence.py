"""A fence around binding the master's pods, so kube-scheduler never places a pod on the same capacity meanwhile.

det-k8s binds the Determined master's pods through `pods/binding`, as a second scheduler. kube-scheduler, placing
ordinary pods at the same time, cannot see a binding det-k8s is about to make (a pod it does not serve is neither in
its queue nor among its nominated pods), and det-k8s's view of the cluster is as old as its pass. On the real
control plane (issue 24) a master pod and an ordinary pod landed on the same free 4-GPU node in 1 of 32 rounds by
hand, and in 25 of 100 rounds when the ordinary pod arrived at a random moment of det-k8s's pass
(`benchmarks/race.py`); a real kubelet then refuses one of them.

The fence, for the nodes a pass is about to bind to:

1. taint each with `det-k8s.io/binding=<unix time>:NoSchedule`, which kube-scheduler honours for every pod it places
   from then on (binding through `pods/binding` ignores taints, so det-k8s's own bindings pass);
2. wait `SETTLE` seconds, longer than kube-scheduler takes from a decision made before the taint to its binding;
3. read each node's pods afresh and drop every group that no longer fits where it was planned (it waits for the
   next pass, nothing of it bound);
4. bind (the caller), then remove the taints.

Each step's requests for different nodes go out together, on up to `workers` threads (the binder's pool size): a
pass binding many groups pays about one round trip per step, not one per node (the side-by-side benchmark, issue 24).

The loop's fast passes keep one fence from pass to pass (`linger`, issue 24): after a binding its taints stay up
LINGER seconds (the next gang often goes to the same node), and `raise_ahead` puts them up, in the background, on the
nodes the next gangs like the last one would get (`LiveScheduler._warm`). A gang planned onto nodes fenced for SETTLE
seconds already waits nothing at step 2: the argument is the same (kube-scheduler honours the taint from SETTLE
seconds after it went up), only the wait was done earlier. Step 3 then reads such a node too, and uses it only if our
taint (its value, the moment it was written, to the millisecond) is still the one on it; a value REFRESH seconds old
is written again, with no gap, so no det-k8s takes it for a STALE one. Lingering taints are lowered when due, before a
full pass and when the loop stops; kube-scheduler places nothing on those few nodes meanwhile.

A pass that binds many gangs (a backlog) fences them `BATCH` nodes at a time (`batches`), so kube-scheduler keeps
the other nodes meanwhile and a stop has at most one batch to lower.

What remains: a kube-scheduler slower than SETTLE between its decision and its binding (an overloaded API server),
and nodes det-k8s may not patch (the RBAC of an older `scheduler manifest`): then only step 3 runs, which still
closes the window of det-k8s's own view. A taint left by a process that died is removed by the next pass that sees it
older than STALE seconds.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .. import stopping
from ..cluster.model import Node
from ..cluster.read import effective_requests, node_from_object
from ..errors import Conflict, DetK8sError, Forbidden, NotFound
from ..kube.api import KubeApi
from ..kube.kinds import NODES, PODS
from ..labels import BINDING_FENCE

KEY = BINDING_FENCE  # "det-k8s.io/binding"; node readers leave it out of the model
SETTLE = 0.25  # seconds; kube-scheduler's decision-to-binding time is milliseconds on a healthy API server
STALE = 30.0  # a fence older than this was left by a process that died
LINGER = 2.0  # seconds the loop leaves a fence up after its binding, for the next gang (`Fence.linger`)
REFRESH = 10.0  # a lingering fence's value is written again once it is this old (never STALE while it is used)
T = TypeVar("T")
BATCH = 256  # nodes fenced at once: a pass binding more goes batch by batch (`batches`)


def batches(groups: Sequence[tuple[T, Sequence[tuple[str, str]]]], limit: int = BATCH
               ) -> list[list[tuple[T, Sequence[tuple[str, str]]]]]:
    """The placed groups in order, cut into runs whose placements name at most `limit` distinct nodes (a group that
    alone names more is a run of its own).

    A pass over a backlog plans thousands of nodes at once (30,000 pods on 5,000 nodes, issue 24): fenced all at once,
    kube-scheduler could place nothing on them until the last binding, and lowering them all takes longer than a
    stopped det-k8s has (SIGTERM's grace; the taints then stay until the next pass). Batch by batch, at most `limit`
    nodes are fenced at any moment, each for one batch's settle, re-read and bindings, and a signal leaves at most one
    batch to lower; a batch costs one more settle.
    """
    out: list[list[tuple[T, Sequence[tuple[str, str]]]]] = []
    nodes: set[str] = set()
    for group in groups:
        mine = {node for _, node in group[1]}
        if out and len(nodes | mine) <= max(1, limit):
            out[-1].append(group)
            nodes |= mine
            continue
        out.append([group])
        nodes = set(mine)
    return out


def _age(stamp: str) -> float:
    """A fence value's time (unix seconds); 0 when it is not one."""
    try:
        return float(stamp)
    except ValueError:
        return 0.0


def _fence_of(node: Mapping[str, Any]) -> str:
    """The value of the node's fence taint, or ""."""
    return next((str(t.get("value") or "") for t in _taints(node) if t.get("key") == KEY), "")


def _taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, Mapping)]


def _free(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Allocatable less what the node's pods request (pods that ended hold nothing)."""
    free = dict(node_from_object(node).allocatable)
    for pod in pods:
        if ((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed"):
            continue
        for resource, amount in effective_requests(pod.get("spec") or {}).items():
            free[resource] = free.get(resource, 0) - amount
    return free


@dataclass
class Fence:
    api: KubeApi
    settle: float = SETTLE
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    tainted: list[str] = field(default_factory=list)
    can_taint: bool = True
    problems: list[str] = field(default_factory=list)
    workers: int = 8
    linger: float = 0.0  # `finish` lowers the taints at once (0), or leaves them up this long for the next binding
    monotonic: Callable[[], float] = time.monotonic
    _read: dict[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)  # each node as `raise_on` left it
    _up: dict[str, float] = field(default_factory=dict, repr=False)  # node -> since when (monotonic) our taint is up
    _stamp: dict[str, str] = field(default_factory=dict, repr=False)  # node -> the value of our taint on it
    _due: dict[str, float] = field(default_factory=dict, repr=False)  # lingering node -> when to lower it
    _fresh: set[str] = field(default_factory=set, repr=False)  # written by the last `raise_on` (`_read` is current)
    _pending: dict[str, Future[None]] = field(default_factory=dict, repr=False)  # raise_ahead's writes on their way
    _pool: ThreadPoolExecutor | None = field(default=None, repr=False)  # (raise_ahead's)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ahead: set[str] = field(default_factory=set, repr=False)  # raised ahead, not used by a binding since
    _written: dict[str, set[str]] = field(default_factory=dict, repr=False)  # node -> every value we wrote (or tried)
    # With a watch (the loop): `confirms(node, version, value)` says whether the watch has delivered the pods up to
    # `version` and shows our taint `value` on the node. A node whose pods were read (at `_checked[node]`) once our
    # taint on it had settled, and whose taint has stayed up since, is not read again (step 3) for a plan made from a
    # view that had seen that read (`still_fits(planned_at=...)`): kube-scheduler has placed nothing there since, and
    # the plan counted everything before.
    confirms: Callable[[str, str, str], bool] | None = None
    _checked: dict[str, str] = field(default_factory=dict, repr=False)  # node -> the revision of that read
    _using: set[str] = field(default_factory=set, repr=False)  # the nodes of the binding under way (`raise_on`)

    def _each(self, names: Sequence[Any], one: Callable[[Any], object]) -> list[object]:
        """one(name) for every node, on up to `workers` threads; the answers in order."""
        if self.workers <= 1 or len(names) <= 1:
            return [one(name) for name in names]
        pool = ThreadPoolExecutor(max_workers=min(self.workers, len(names)), thread_name_prefix="det-k8s-fence")
        stopped = False
        try:
            return list(pool.map(one, names))
        except KeyboardInterrupt:  # a signal (det_k8s/stopping.py): the writes on their way are waited for (a taint
            # landing after `lower` read the node would stay), but not once the undo is cut (a second signal, the
            # grace's): a node's two tries, each up to a read timeout, held a stop 30 s and more. One landing after
            # that is a STALE taint, which the next full pass of `scheduler run` removes
            stopped = stopping.hurried()
            raise
        finally:  # (an error, or a first signal: the other writes' outcomes first; a cut undo's signal cuts this too)
            pool.shutdown(wait=not stopped, cancel_futures=stopped)

    def raise_on(self, nodes: Sequence[str]) -> None:
        """Taint the nodes (step 1) and wait for kube-scheduler's bindings already under way (step 2).

        A node whose taint is still up (`linger`, `raise_ahead`) and has been for `settle` seconds costs neither a
        write nor a wait (its taint is written again, with no gap, once its value is REFRESH seconds old, so that no
        det-k8s ever takes it for a STALE one); one raised less than `settle` seconds ago waits what is left."""
        names = sorted(set(nodes))
        self._using.update(names)
        for name in names:
            self._due.pop(name, None)  # in use: not lowered meanwhile
            self._ahead.discard(name)
            ahead = self._pending.pop(name, None)
            if ahead is not None:
                ahead.result()  # raised ahead, still on its way: its outcome first
        self._fresh = set()
        need = self._needed(names)
        stamp = f"{self.clock():.3f}"
        self.tainted.extend(name for name in need if name not in self.tainted)  # before the writes: a signal during
        self._each(need, lambda name: self._raise_one(name, stamp, fresh=True))  # them still has `lower` look at these
        since = [self._up[name] for name in names if name in self._up]
        left = max(since) + self.settle - self.monotonic() if since else 0.0
        if any(name in self.tainted and name not in self._up for name in need):
            left = self.settle  # a write whose answer was lost may have landed: kube-scheduler may honour it now
        if left > 0:
            self.sleep(left)

    def raise_ahead(self, nodes: Sequence[str]) -> None:
        """Taint the nodes a coming binding is likely to use, in the background (no wait): by the time it comes they
        have settled. They linger like the others and are lowered `linger` seconds from now if unused."""
        names = sorted(set(nodes))
        until = self.monotonic() + self.linger
        need = [name for name in self._needed(names) if name not in self._pending]
        stamp = f"{self.clock():.3f}"
        self.tainted.extend(name for name in need if name not in self.tainted)
        if need and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="det-k8s-fence-ahead")
        for name in need:
            assert self._pool is not None
            self._pending[name] = self._pool.submit(self._raise_one, name, stamp, fresh=False)
            if self.confirms is not None:  # read once settled, so that the gang that gets it skips step 3
                self._pool.submit(self._check_later, name, stamp, self._pending[name])
        for name in names:
            self._due[name] = max(self._due.get(name, until), until)
            self._ahead.add(name)

    def settled(self, nodes: Iterable[str]) -> bool:
        """Would `raise_on(nodes)` cost neither a write nor a wait? (each is up, has been for `settle` seconds, and its
        value is not due to be written again)"""
        names = sorted(set(nodes))
        now = self.monotonic()
        with self._lock:  # (a background write that failed forgets its node meanwhile)
            return not self._needed(names) and all(
                (name not in self._pending or self._pending[name].done())
                and now - self._up.get(name, now) >= self.settle for name in names)

    def ahead(self) -> int:
        """How many nodes raised ahead no binding has used yet (and still up, or on their way)."""
        return len(self._ahead)

    def _needed(self, names: Sequence[str]) -> list[str]:
        """The nodes whose taint must be written: not up, or its value REFRESH seconds old."""
        now = self.clock()
        return [name for name in names if name not in self._up or now - _age(self._stamp.get(name, "")) > REFRESH]

    def _raise_one(self, name: str, stamp: str, fresh: bool) -> None:
        """Write our taint on one node (its value `stamp`); `_up` says since when it is up, if it is."""
        ours = self._stamp.get(name)
        with self._lock:
            mine = set(self._written.get(name, ()))
        kept: list[bool] = []
        foreign: list[bool] = []

        def change(taints: list[dict[str, Any]], fenced: str) -> list[dict[str, Any]] | None:
            if not fresh and fenced and fenced not in mine:
                # raised ahead, in the background: the Lease may be another det-k8s's by now and this its fence for a
                # binding under way; never replaced (a later lowering of ours would open its window)
                foreign.append(True)
                return None
            kept.append(ours is not None and fenced == ours)
            return [*taints, {"key": KEY, "value": stamp, "effect": "NoSchedule"}]

        def forget(tainted: bool) -> None:
            with self._lock:
                self._up.pop(name, None)
                self._stamp.pop(name, None)
                self._checked.pop(name, None)
                self._read.pop(name, None)  # (never judged on an older read of it)
                if not tainted and name in self.tainted:
                    self.tainted.remove(name)
        if not self.can_taint:
            forget(False)
            return
        with self._lock:
            self._written.setdefault(name, set()).add(stamp)  # (ours to lower, even if its answer is lost)
        try:
            self._set(name, change)
        except Forbidden:
            forget(False)
            if self.can_taint:
                self.can_taint = False
                self.problems.append("cannot taint nodes while binding (no RBAC to patch nodes): kube-scheduler "
                                     "may place a pod on capacity det-k8s is binding; apply the RBAC of `det-k8s "
                                     "scheduler manifest` again")
            return
        except NotFound:
            forget(False)  # gone: the binding fails and the group is undone, as without the fence
            return
        except DetK8sError as exc:  # (it may have landed: `lower` looks at the node all the same)
            self.problems.append(f"could not taint node {name} while binding: {exc.message}")
            forget(True)
            return
        if foreign:
            forget(False)  # not ours: nothing to lower
            return
        with self._lock:
            self._stamp[name] = stamp
            if fresh:
                self._fresh.add(name)
            if not (kept and kept[-1]):  # up from now (ours was not there: removed by someone, or never raised)
                self._up[name] = self.monotonic()
                self._checked.pop(name, None)

    def _check_later(self, name: str, stamp: str, written: Future[None]) -> None:
        """In the background, once our taint raised ahead on the node has settled: read its pods (step 3's read, ahead
        of the gang; the gang's own check is then the watch's, `_trusted`). (Submitted after its write, which is
        therefore running or done: waiting for it never deadlocks the pool.)"""
        with contextlib.suppress(Exception):
            written.result()
        with self._lock:
            since = self._up.get(name)
        if since is None or self._stamp.get(name) != stamp:
            return  # not written (or not ours)
        wait = since + self.settle - self.monotonic()
        if wait > 0:
            self.sleep(wait)
        with self._lock:
            if self._up.get(name) != since:
                return
        try:
            _, version = self.api.list_page(PODS, all_namespaces=True, field_selector=f"spec.nodeName={name}")
        except DetK8sError:
            return
        with self._lock:
            if self._up.get(name) == since and self._stamp.get(name) == stamp:
                self._checked.setdefault(name, version)

    def _settled(self, names: Iterable[str]) -> None:
        """Wait for the taints raised ahead on these nodes to be written (before they are lowered)."""
        for name in list(names):
            ahead = self._pending.pop(name, None)
            if ahead is not None:
                with contextlib.suppress(Exception):  # (a stop's undo cut: waited for no longer than it has left)
                    ahead.result(timeout=stopping.wait_limit())

    def still_fits(self, placements: Sequence[tuple[str, Sequence[tuple[str, str]], Mapping[str, Mapping[str, int]]]],
                   planned_at: str = "") -> set[str]:
        """Step 3: the ids of the groups whose pods no longer fit their planned nodes, read afresh.

        `placements`: (group id, [(pod, node)], {pod: requests}). Groups are checked in order, each taking its share.
        `planned_at`: the pods revision of the view the plan was made from; a node checked at a revision the plan had
        seen already is not read again (`_trusted`). Without it every node is read.
        """
        nodes = sorted({node for _, placement, _ in placements for _, node in placement})
        free: dict[str, dict[str, int]] = {}

        lost: set[str] = set()

        objects: dict[tuple[str, str], Any] = {}
        versions: dict[str, str] = {}
        trusted = {name for name in nodes if self._trusted(name, planned_at)}
        nodes = [name for name in nodes if name not in trusted]
        # (a node this call's own write answered is current: its allocatable does not change in a moment; one whose
        # taint was up already is read again, to see that the taint is still ours; both requests go out together)
        reads = [("pods", name) for name in nodes] + [
            ("node", name) for name in nodes if not (name in self._read and (name in self._fresh or name not in self._up))]

        def read(what: tuple[str, str]) -> None:
            kind, name = what
            try:
                if kind == "node":
                    objects[what] = self.api.get(NODES, name)
                else:
                    objects[what], versions[name] = self.api.list_page(
                        PODS, all_namespaces=True, field_selector=f"spec.nodeName={name}")
            except DetK8sError:
                return  # unreadable: the binding decides, as without the fence

        settled_at = self.monotonic() - self.settle  # a taint up since then had settled before these reads went out
        self._each(reads, read)
        for name in nodes:
            node, pods = objects.get(("node", name)) or self._read.get(name), objects.get(("pods", name))
            if node is None or pods is None:
                continue
            if name in self._up and name not in self._fresh and _fence_of(node) != self._stamp.get(name):
                lost.add(name)  # our lingering taint was removed (or replaced) meanwhile: nothing bound there now
                continue
            free[name] = _free(node, pods)
            with self._lock:
                if versions.get(name) and self._up.get(name, settled_at + 1) <= settled_at \
                        and _fence_of(node) == self._stamp.get(name):
                    self._checked[name] = versions[name]
        for name in lost:
            self._up.pop(name, None)
            self._stamp.pop(name, None)
            self._checked.pop(name, None)
            self._read.pop(name, None)
            self._written.pop(name, None)
            if name in self.tainted:
                self.tainted.remove(name)  # (not ours to lower any more)
        dropped: set[str] = set()
        for group_id, placement, requests in placements:
            if any(where in lost for _, where in placement):
                dropped.add(group_id)
                continue
            wanted: dict[str, dict[str, int]] = {}
            for pod, where in placement:
                asks = wanted.setdefault(where, {})
                for resource, amount in requests.get(pod, {}).items():
                    asks[resource] = asks.get(resource, 0) + amount
            known = {where: asks for where, asks in wanted.items() if where in free}
            if any(free[where].get(resource, 0) < amount for where, asks in known.items()
                   for resource, amount in asks.items()):
                dropped.add(group_id)
                continue
            for where, asks in known.items():
                for resource, amount in asks.items():
                    free[where][resource] = free[where].get(resource, 0) - amount
        return dropped

    def _trusted(self, name: str, planned_at: str) -> bool:
        """Step 3 may skip the node: its pods were read once our taint had settled, the taint has been up since, the
        plan was made from a view that had seen that read's revision (so it counted every pod kube-scheduler placed
        there before the taint settled: a plan older than the read may not have), and the watch still shows our taint
        (removed by someone meanwhile, it is read again)."""
        with self._lock:
            version, stamp = self._checked.get(name), self._stamp.get(name)
            up = name in self._up and (name not in self._pending or self._pending[name].done())
        if not (up and version and stamp and planned_at and self.confirms is not None):
            return False
        try:
            seen = int(version) <= int(planned_at)
        except ValueError:
            return False
        return seen and self.confirms(name, version, stamp)

    def lower(self) -> None:
        """Step 4: remove the taints this fence put on."""
        self._settled(list(self._pending))
        with self._lock:
            names = list(self.tainted)
        self._each(names, self._untaint)
        self.tainted.clear()
        self._using.clear()
        self._ahead.clear()
        self._up.clear()
        self._stamp.clear()
        self._checked.clear()
        self._due.clear()
        self._read.clear()
        self._written.clear()

    def finish(self) -> None:
        """After the bindings: lower the taints at once, or (`linger`) leave them up for `linger` seconds, for the
        next binding to the same nodes (`lower_due` lowers them then)."""
        if self.linger <= 0:
            self.lower()
            return
        until = self.monotonic() + self.linger
        with self._lock:
            names = [name for name in self.tainted if name in self._using]
        self._using.clear()
        for name in names:  # (only this binding's: the others linger until their own time, not each binding's)
            self._due[name] = until

    def next_due(self) -> float | None:
        """When (monotonic) the next lingering taint is due to be lowered; None: none lingers."""
        return min(self._due.values(), default=None)

    def lower_due(self) -> None:
        """Lower the lingering taints whose time has come."""
        now = self.monotonic()
        due = [name for name, until in self._due.items() if until <= now]
        self._settled(due)
        self._each(due, self._untaint)
        for name in due:
            self._ahead.discard(name)
            self._due.pop(name, None)
            self._up.pop(name, None)
            self._stamp.pop(name, None)
            self._checked.pop(name, None)
            self._read.pop(name, None)
            self._written.pop(name, None)
            if name in self.tainted:
                self.tainted.remove(name)

    def _set(self, name: str, change: Callable[[list[dict[str, Any]], str], list[dict[str, Any]] | None]) -> None:
        """Replace the node's taints by change(its taints without the fence, the fence's value or ""), refused if the
        node changed since it was read (resourceVersion): a taint someone else adds meanwhile is never lost. Two
        tries."""
        for attempt in range(2):
            node = self.api.get(NODES, name)
            taints = change([t for t in _taints(node) if t.get("key") != KEY], _fence_of(node))
            if taints is None or taints == _taints(node):  # (None: leave it as it is)
                self._read[name] = node
                return
            version = (node.get("metadata") or {}).get("resourceVersion")
            try:
                self._read[name] = self.api.patch(NODES, name, {"metadata": {"resourceVersion": version},
                                                                "spec": {"taints": taints}})
                return
            except Conflict:
                if attempt:
                    raise

    def _untaint(self, name: str, *, anyone: bool = False) -> None:
        """Remove the fence from the node if its value is one this Fence wrote (`anyone`: whoever wrote it, for a
        stale one). Lingering taints are lowered outside the Lease, when another det-k8s may hold it and have fenced
        the node for its own binding: its taint is never ours to remove."""
        with self._lock:
            ours = set(self._written.get(name, ()))

        def change(taints: list[dict[str, Any]], fenced: str) -> list[dict[str, Any]] | None:
            return taints if anyone or not fenced or fenced in ours else None

        try:
            self._set(name, change)
        except NotFound:
            return
        except DetK8sError as exc:
            self.problems.append(f"could not remove the binding taint {KEY} from node {name}: {exc.message} (the "
                                 f"next full pass of det-k8s scheduler run removes it once it is {STALE:.0f} s old)")

    def sweep(self, nodes: Iterable[Node]) -> list[str]:
        """Remove fences older than STALE seconds (left by a process that died between steps 1 and 4)."""
        swept = self.stale(nodes)
        self.remove_stale(swept)
        return swept

    def stale(self, nodes: Iterable[Node]) -> list[str]:
        """The nodes whose fence is older than STALE seconds (read from `nodes`, nothing written)."""
        now = self.clock()
        found = []
        for node in nodes:
            if not node.fence:
                continue
            try:
                stale = now - float(node.fence) > STALE
            except ValueError:
                stale = True
            if stale:
                found.append(node.name)
        return found

    def remove_stale(self, names: Iterable[str]) -> None:
        """Remove the fence from these nodes, whoever wrote it (`stale`)."""
        for name in names:
            self._untaint(name, anyone=True)
