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

What remains: a kube-scheduler slower than SETTLE between its decision and its binding (an overloaded API server),
and nodes det-k8s may not patch (the RBAC of an older `scheduler manifest`): then only step 3 runs, which still
closes the window of det-k8s's own view. A taint left by a process that died is removed by the next pass that sees it
older than STALE seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..cluster.model import Node
from ..cluster.read import BINDING_FENCE, effective_requests
from ..errors import Conflict, DetK8sError, Forbidden, NotFound
from .api import KubeApi
from .kinds import NODES, PODS

KEY = BINDING_FENCE  # "det-k8s.io/binding"; node readers leave it out of the model
SETTLE = 0.25  # seconds; kube-scheduler's decision-to-binding time is milliseconds on a healthy API server
STALE = 30.0  # a fence older than this was left by a process that died


def _taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(t) for t in (node.get("spec") or {}).get("taints") or () if isinstance(t, Mapping)]


def _free(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Allocatable less what the node's pods request (pods that ended hold nothing)."""
    from ..cluster.read import node_from_object

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
    _read: dict[str, Mapping[str, Any]] = field(default_factory=dict, repr=False)  # each node as `raise_on` left it

    def _each(self, names: Sequence[str], one: Callable[[str], object]) -> list[object]:
        """one(name) for every node, on up to `workers` threads; the answers in order."""
        if self.workers <= 1 or len(names) <= 1:
            return [one(name) for name in names]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(names)), thread_name_prefix="det-k8s-fence") as pool:
            return list(pool.map(one, names))

    def raise_on(self, nodes: Sequence[str]) -> None:
        """Taint the nodes (step 1) and wait for kube-scheduler's bindings already under way (step 2)."""
        stamp = str(int(self.clock()))
        names = sorted(set(nodes))
        self.tainted.extend(names)  # before the writes: a signal during them still has `lower` look at these nodes
        refused: list[str] = []

        def one(name: str) -> None:
            if not self.can_taint:
                refused.append(name)
                return
            try:
                self._set(name, lambda taints: [*taints, {"key": KEY, "value": stamp, "effect": "NoSchedule"}])
            except Forbidden:
                refused.append(name)
                if self.can_taint:
                    self.can_taint = False
                    self.problems.append("cannot taint nodes while binding (no RBAC to patch nodes): kube-scheduler "
                                         "may place a pod on capacity det-k8s is binding; apply the RBAC of `det-k8s "
                                         "scheduler manifest` again")
            except NotFound:
                refused.append(name)  # gone: the binding fails and the group is undone, as without the fence
            except DetK8sError as exc:  # (it may have landed: `lower` looks at the node all the same)
                self.problems.append(f"could not taint node {name} while binding: {exc.message}")

        self._each(names, one)
        for name in refused:
            self.tainted.remove(name)
        if self.tainted:
            self.sleep(self.settle)

    def still_fits(self, placements: Sequence[tuple[str, Sequence[tuple[str, str]], Mapping[str, Mapping[str, int]]]]
                   ) -> set[str]:
        """Step 3: the ids of the groups whose pods no longer fit their planned nodes, read afresh.

        `placements`: (group id, [(pod, node)], {pod: requests}). Groups are checked in order, each taking its share.
        """
        nodes = sorted({node for _, placement, _ in placements for _, node in placement})
        free: dict[str, dict[str, int]] = {}

        def read(name: str) -> None:
            try:  # the node as the fence's own write answered (its allocatable does not change in a moment)
                node = self._read.get(name) or self.api.get(NODES, name)
                pods = self.api.list(PODS, all_namespaces=True, field_selector=f"spec.nodeName={name}")
            except DetK8sError:
                return  # unreadable: the binding decides, as without the fence
            free[name] = _free(node, pods)

        self._each(nodes, read)
        dropped: set[str] = set()
        for group_id, placement, requests in placements:
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

    def lower(self) -> None:
        """Step 4: remove the taints this fence put on."""
        self._each(list(self.tainted), self._untaint)
        self.tainted.clear()

    def _set(self, name: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
        """Replace the node's taints by change(its taints without the fence), refused if the node changed since it
        was read (resourceVersion): a taint someone else adds meanwhile is never lost. Two tries."""
        for attempt in range(2):
            node = self.api.get(NODES, name)
            taints = change([t for t in _taints(node) if t.get("key") != KEY])
            if taints == _taints(node):
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

    def _untaint(self, name: str) -> None:
        try:
            self._set(name, lambda taints: taints)
        except NotFound:
            return
        except DetK8sError as exc:
            self.problems.append(f"could not remove the binding taint {KEY} from node {name}: {exc.message} (the "
                                 f"next pass removes it once it is {STALE:.0f} s old)")

    def sweep(self, nodes: Iterable[Node]) -> list[str]:
        """Remove fences older than STALE seconds (left by a process that died between steps 1 and 4)."""
        now = self.clock()
        swept = []
        for node in nodes:
            if not node.fence:
                continue
            try:
                stale = now - float(node.fence) > STALE
            except ValueError:
                stale = True
            if stale:
                self._untaint(node.name)
                swept.append(node.name)
        return swept
