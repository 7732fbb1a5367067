"""Find partly-started pod groups: the deadlock the Determined documents warn about.

Without gang scheduling, Kubernetes starts the pods of a distributed task one by one: three of
four pods run and hold their GPUs while the fourth waits forever. This module looks at a snapshot
and finds such groups, whoever created them: det-k8s (label det-k8s.io/group), the Determined
master (all pods of a task share the label `determined: <allocation id>`), or the coscheduling
plugin (pod-group labels). It reports what each holds idle and what to do, and calls it a
deadlock when several partial groups each wait for capacity the others hold.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..cluster.gangs import mechanism
from ..cluster.model import GPU, Pod, Snapshot, add, fits
from ..labels import GROUP, SIZE

DETERMINED = "determined"
POD_GROUP_LABELS = ("pod-group.scheduling.sigs.k8s.io/name", "scheduling.x-k8s.io/pod-group")
MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"


@dataclass(frozen=True)
class PartialGroup:
    """A group with some pods holding resources and others unable to start."""

    key: str
    owner: str  # "det-k8s", "determined" or "pod-group"
    namespace: str
    running: tuple[str, ...]  # pods bound to a node and holding resources
    waiting: tuple[str, ...]  # pods not yet bound
    missing: int  # pods the group should have but that do not exist
    held: Mapping[str, int]  # resources the bound pods hold (milli-units)
    needed: Mapping[str, int]  # resources the waiting pods ask for

    @property
    def held_gpus(self) -> int:
        return self.held.get(GPU, 0) // 1000

    @property
    def advice(self) -> str:
        if self.owner == "det-k8s":
            return (f"det-k8s tears partial groups down and requeues them on its next pass "
                    f"(`det-k8s scheduler run --once`), or stop it now: `det-k8s experiment kill {self.key}`")
        if self.owner == "determined":
            return ("if det-k8s serves its scheduler name (`det-k8s scheduler run`), its next pass deletes the bound "
                    "pods so Determined restarts the task whole; otherwise pause or kill this experiment in Determined "
                    f"(its pods share the label determined={self.key}); submitting it through `det-k8s experiment "
                    "create` starts all its pods or none")
        return f"delete the group's pods (label {POD_GROUP_LABELS[0]}={self.key}) or give it room to start"


@dataclass(frozen=True)
class Diagnosis:
    partial: tuple[PartialGroup, ...]
    deadlocked: tuple[str, ...]  # keys of partial groups that wait on each other

    @property
    def healthy(self) -> bool:
        return not self.partial


def _group_key(pod: Pod) -> tuple[str, str] | None:
    labels = pod.labels
    if labels.get(GROUP):
        return "det-k8s", labels[GROUP]
    if labels.get(DETERMINED) and any(labels.get(label) for label in POD_GROUP_LABELS):
        # the master's gang: before 0.34 every attempt of a trial shares the pod-group name; the allocation does not
        return "determined", labels[DETERMINED]
    for label in POD_GROUP_LABELS:
        if labels.get(label):
            return "pod-group", labels[label]
    if labels.get(DETERMINED):
        return "determined", labels[DETERMINED]
    return None


def _expected_size(pods: Sequence[Pod]) -> int:
    for pod in pods:
        for label in (SIZE, MIN_AVAILABLE):
            value = pod.labels.get(label, "")
            if value.isdigit() and int(value) > 0:
                return int(value)
    return len(pods)


def find_partial_groups(snapshot: Snapshot) -> Diagnosis:
    """Every group with pods both holding resources and waiting (or missing), and the deadlocks among them."""
    groups: dict[tuple[str, str, str], list[Pod]] = defaultdict(list)
    for pod in snapshot.pods:
        found = _group_key(pod)
        if found is not None and pod.phase not in ("Succeeded", "Failed") and not pod.deleting:
            groups[(found[0], pod.namespace, found[1])].append(pod)
    partial: list[PartialGroup] = []
    for (owner, namespace, key), pods in sorted(groups.items()):
        running = [p for p in pods if p.node_name]  # bound: a pod pinned but not bound yet still waits
        waiting = [p for p in pods if not p.node_name]
        missing = max(0, _expected_size(pods) - len(pods))
        if not running or (not waiting and not missing):
            continue
        held: dict[str, int] = {}
        for pod in running:
            held = add(held, pod.requests)
        needed: dict[str, int] = {}
        for pod in waiting:
            needed = add(needed, pod.requests)
        partial.append(PartialGroup(key, owner, namespace, tuple(sorted(p.name for p in running)),
                                    tuple(sorted(p.name for p in waiting)), missing, held, needed))
    return Diagnosis(tuple(partial), _deadlocked(snapshot, partial))


def _deadlocked(snapshot: Snapshot, partial: Sequence[PartialGroup]) -> tuple[str, ...]:
    """Partial groups whose waiting pods fit nowhere now, but would fit if another partial group let go."""
    if len(partial) < 2:
        return ()
    free_total: dict[str, int] = {}
    for free in snapshot.free.values():
        free_total = add(free_total, free)
    stuck = []
    for group in partial:
        if not group.waiting or fits(group.needed, free_total):
            continue
        others_held: dict[str, int] = dict(free_total)
        for other in partial:
            if other is not group:
                others_held = add(others_held, other.held)
        if fits(group.needed, others_held):
            stuck.append(group.key)
    return tuple(stuck) if len(stuck) >= 2 else ()


@dataclass(frozen=True)
class RecordedFailure:
    """A binding that failed part-way, or a group found partly bound, as det-k8s recorded it (Warning events)."""

    namespace: str
    reason: str  # GangBindingFailed or GangPartlyBound
    message: str
    pods: tuple[str, ...]
    count: int  # times recorded (over all its pods)
    last: str  # lastTimestamp, RFC 3339


def recorded_failures(events: Sequence[Mapping[str, object]], reasons: Sequence[str]) -> tuple[RecordedFailure, ...]:
    """det-k8s's failure events grouped by what they say (one line per group and failure), newest first."""
    found: dict[tuple[str, str, str], list[Mapping[str, object]]] = defaultdict(list)
    for event in events:
        source = event.get("source")
        component = source.get("component") if isinstance(source, Mapping) else None
        if event.get("reason") not in reasons or component != "det-k8s":
            continue
        meta = event.get("metadata")
        namespace = str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""
        found[(namespace, str(event.get("reason")), str(event.get("message") or ""))].append(event)
    out = []
    for (namespace, reason, message), group in found.items():
        pods = sorted({str(involved.get("name") or "") for e in group
                       if isinstance(involved := e.get("involvedObject"), Mapping)})
        count = sum(int(str(e.get("count") or 1)) for e in group)
        last = max(str(e.get("lastTimestamp") or "") for e in group)
        out.append(RecordedFailure(namespace, reason, message, tuple(pods), count, last))
    return tuple(sorted(out, key=lambda f: (f.last, f.message), reverse=True))


SHOWN_PODS = 5


@dataclass(frozen=True)
class SchedulerSeen:
    """A scheduler name the cluster's pods use: how many pending and bound, and the gang mechanisms among them."""

    name: str
    pending: int
    bound: int
    gangs: tuple[tuple[str, int], ...]  # (mechanism, pods) of pods that belong to another gang mechanism
    served_by_det_k8s: bool = False
    pods: tuple[str, ...] = ()  # the first few, `namespace/name`, sorted


def schedulers_seen(snapshot: Snapshot, served: str | None) -> tuple[SchedulerSeen, ...]:
    """Every schedulerName of the snapshot's unfinished pods, the most pods first."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    gangs: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    names: dict[str, list[str]] = defaultdict(list)
    for pod in snapshot.pods:
        if pod.phase in ("Succeeded", "Failed") or not pod.scheduler:
            continue
        counts[pod.scheduler][0 if pod.node_name is None else 1] += 1
        names[pod.scheduler].append(f"{pod.namespace}/{pod.name}")
        if pod.gang:
            gangs[pod.scheduler][mechanism(pod.gang)] += 1
    rows = [SchedulerSeen(name, pending, bound, tuple(sorted(gangs[name].items())), name == served,
                          tuple(sorted(names[name])[:SHOWN_PODS]))
            for name, (pending, bound) in counts.items()]
    return tuple(sorted(rows, key=lambda row: (-(row.pending + row.bound), row.name)))


@dataclass(frozen=True)
class DraNodes:
    """Nodes whose GPUs DRA manages (ResourceSlices), which det-k8s cannot hand to the pods it binds or pins."""

    nodes: tuple[tuple[str, int, str], ...]  # (node, DRA GPUs, DeviceClass or driver)

    @property
    def gpus(self) -> int:
        return sum(count for _, count, _ in self.nodes)

    @property
    def advice(self) -> str:
        return ("det-k8s allocates no ResourceClaims, so it never binds the master's pods to these nodes nor pins its "
                "own there: run the GPU Operator's device plugin on them instead of (or beside) the DRA driver, or "
                "let kube-scheduler place those pods (another schedulerName, or Kubernetes' own gang scheduling, "
                "`experiment create` in native mode)")


def dra_nodes(snapshot: Snapshot) -> DraNodes:
    view = snapshot.devices
    rows = []
    for node in snapshot.nodes:
        gpus = view.gpus(node.name)
        if gpus and node.gpus == 0:
            rows.append((node.name, gpus, view.gpu_class(node.name)))
    return DraNodes(tuple(rows))
