"""Who holds each slot of each node: the data behind `det-k8s nodes map` and `plan --map`. Pure.

A node has `floor((allocatable - requests of determined-system pods) / slot size)` slots of the
slot resource, as the Determined master counts them (`jobs.go`, summarizeClusterByNodes): one per
GPU, or per `slotResourceRequests.cpu` CPUs on a CPU-slot cluster. Each slot is one `Cell`:

- held by a det-k8s group (`det-k8s.io/group` + managed-by det-k8s) or a Determined task (label
  `determined`: its allocation): `floor(request / slot size)` cells per active pod;
- `free`: `floor(free capacity / slot size)`, the slots a new pod could still get;
- `foreign`: the rest, other pods' requests (whole slots per pod, then what their fractions of a
  slot add up to), so held + foreign + free is exactly the node's slots;
- `terminating`: a pod being deleted still holds its slots;
- with a `Plan`: `planned` (free cells a placement takes), `victim` (a running group the plan
  evicts, with the preemptor's key when its pods go there) and `reserved` (free cells of nodes the
  starvation guard holds for a waiting group).

Unlike the master's own count (other pods' CPU truncated per container), fractions of a slot are
never shown free: a cell is free only when a whole slot of the resource is. A node whose pods
request more than its slots (it lost a GPU) is marked over-committed; its cells never exceed its
slots. Holders get short keys (A, B, ..., AA, ...) in the order they first appear.

A node offering more than `MAX_DRAWN` slots (no real node does: `nvidia.com/gpu: 1000000000` is a
broken device plugin or a hand-written snapshot) has only its first `MAX_DRAWN` cells; the rest are
counted by kind (`NodeRow.hidden`) and the row says so, so the map costs what its nodes cost, never
what their numbers say.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from ..cluster.admission import detect
from ..cluster.model import AMD_GPU, GPU, GPU_RESOURCES, NO_CONSTRAINTS, PODS, Constraints, Node, Pod, Snapshot
from ..quantity import format_decimal
from ..settings.model import Settings
from ..settings.node_rules import task_constraints
from . import labels as L
from .model import Plan, PodGroup

SYSTEM_LABEL = "determined-system"  # the chart's master and database pods
POOL_LABELS = (  # --group-by's default: the first of these any node carries
    "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool",
    "karpenter.sh/nodepool", "node-pool", "nodepool", "topology.kubernetes.io/zone",
)
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWYZ"  # no X: a lowercase x marks an evicted slot
MAX_DRAWN = 1024  # cells per node; beyond, slots are counted, not drawn


@dataclass(frozen=True, slots=True)
class SlotUnit:
    """What one slot is: `size` milli-units of `resource` (1000 per GPU; CPUs x 1000 per CPU slot)."""

    resource: str = GPU
    size: int = 1000

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise ValueError("a slot must be a positive amount")

    @property
    def slot_type(self) -> str:
        return "cpu" if self.resource == "cpu" else "gpu"


GPU_SLOTS = SlotUnit()


def slot_unit(settings: Settings | None) -> SlotUnit:
    """GPUs, or `slotResourceRequests.cpu` CPUs on a `slotType: cpu` cluster."""
    if settings is not None and settings.slot_type == "cpu" and settings.cpu_per_slot:
        return SlotUnit("cpu", max(1, int(settings.cpu_per_slot * 1000)))  # kube-scheduler's milli rounding
    if settings is not None and settings.slot_type == "rocm":
        return SlotUnit(settings.slot_resource)  # amd.com/gpu
    return GPU_SLOTS


def group_unit(group: PodGroup) -> SlotUnit:
    """The slot a queued group was sized in: GPUs, else its pods' CPUs per slot."""
    request = group.pods[0].requests if group.pods else {}
    if request.get(AMD_GPU, 0) > 0:
        return SlotUnit(AMD_GPU)
    if request.get(GPU, 0) > 0 or group.slots_per_pod <= 0 or request.get("cpu", 0) <= 0:
        return GPU_SLOTS
    return SlotUnit("cpu", max(1, request["cpu"] // group.slots_per_pod))


def task_pod_constraints(settings: Settings | None, snapshot: Snapshot | None = None,
                         extended_resource_toleration: bool | None = None) -> Constraints:
    """What Determined's task pods are once admitted: the settings' pod spec, plus, with `snapshot`, the
    tolerations the ExtendedResourceToleration admission plugin gives pods asking for the slot resource where
    the cluster runs it (`admission.detect`, as planning decides it; GKE taints GPU pools with
    `nvidia.com/gpu=present:NoSchedule` and relies on it)."""
    constraints = task_constraints(settings) if settings is not None else NO_CONSTRAINTS
    if snapshot is None:
        return constraints
    return detect(snapshot, extended_resource_toleration).admit(constraints, (slot_unit(settings).resource,))


class CellKind(StrEnum):
    FREE = "free"
    DET_K8S = "det-k8s"          # a det-k8s group's pod
    DETERMINED = "determined"    # a pod the Determined master created
    FOREIGN = "foreign"          # any other pod
    TERMINATING = "terminating"  # a pod being deleted
    RESERVED = "reserved"        # free, held by the starvation guard for a waiting group
    PLANNED = "planned"          # free now, the plan starts a pod here
    VICTIM = "victim"            # a running group the plan evicts
    DRA = "dra"                  # a GPU DRA manages (ResourceSlices): det-k8s allocates no claims, places nothing on it


@dataclass(frozen=True, slots=True)
class Cell:
    kind: CellKind
    holder: str | None = None   # key in OccupancyMap.holders
    pod: str | None = None      # namespace/name of the pod (a planned pod's name)
    planned: str | None = None  # on a victim's (or leaving group's) cell: the key of the group the plan starts there

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "holder": self.holder, "pod": self.pod}
        if self.kind is CellKind.VICTIM:
            out["planned"] = self.planned
        return out


@dataclass(frozen=True)
class Holder:
    """A det-k8s group or Determined task holding slots, or a group the plan places or reserves for."""

    key: str
    kind: str  # det-k8s | determined
    id: str
    name: str
    user: str
    priority: int | None
    namespace: str
    status: str  # running | terminating | evicted | planned | reserving
    pods: int
    slots: int  # cells it holds (running), takes (planned) or has reserved (reserving) on the map

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "id": self.id, "name": self.name, "user": self.user,
                "priority": self.priority, "namespace": self.namespace, "status": self.status,
                "pods": self.pods, "slots": self.slots}


@dataclass(frozen=True)
class NodeRow:
    name: str
    pool: str
    cells: tuple[Cell, ...]
    states: tuple[str, ...] = ()  # NotReady, cordoned, the taint Determined's pods do not tolerate, ...
    hidden: tuple[tuple[CellKind, int], ...] = ()  # slots beyond MAX_DRAWN, by kind: counted, not drawn

    @property
    def slots(self) -> int:
        return len(self.cells) + sum(n for _, n in self.hidden)

    @property
    def drawn(self) -> int:
        return len(self.cells)

    @property
    def free(self) -> int:
        return self.count(CellKind.FREE)

    @property
    def available(self) -> bool:
        """Determined's task pods may be placed here (nothing on the node's state keeps them off)."""
        return all(state.startswith((OVERCOMMITTED, NOT_DRAWN)) for state in self.states)

    def count(self, kind: CellKind) -> int:
        return sum(cell.kind is kind for cell in self.cells) + sum(n for k, n in self.hidden if k is kind)

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "pool": self.pool, "slots": self.slots, "free": self.free,
               "state": list(self.states), "cells": [cell.to_dict() for cell in self.cells]}
        if self.hidden:
            out["notDrawn"] = {kind.value: n for kind, n in self.hidden}
        return out


OVERCOMMITTED = "over-committed"
NOT_DRAWN = "only the first"  # a row's state when the node offers more than MAX_DRAWN slots


@dataclass(frozen=True)
class PoolSummary:
    """A pool at a glance: how many nodes have 0, 1, ... N slots free, and the largest free blocks."""

    name: str
    nodes: int
    slots: int
    free: int
    counts: Mapping[str, int]  # cells per kind
    histogram: tuple[tuple[int, int], ...]  # (free slots, available nodes with that many), ascending
    unavailable: tuple[tuple[str, int], ...]  # (cause, nodes)
    largest: tuple[tuple[str, int], ...]  # available nodes with the most free slots

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "nodes": self.nodes, "slots": self.slots, "free": self.free,
                "cells": dict(self.counts), "freeSlotsPerNode": {str(k): v for k, v in self.histogram},
                "unavailable": dict(self.unavailable), "largestFree": [list(item) for item in self.largest]}


@dataclass(frozen=True)
class OccupancyMap:
    unit: SlotUnit
    group_by: str | None
    rows: tuple[NodeRow, ...]  # by pool, then node name (numbers in names sort as numbers)
    holders: Mapping[str, Holder] = field(default_factory=dict)  # by key
    without_slots: tuple[str, ...] = ()  # selected nodes offering no slot (not in rows)

    def pools(self, largest: int = 3) -> tuple[PoolSummary, ...]:
        order: dict[str, list[NodeRow]] = {}
        for row in self.rows:
            order.setdefault(row.pool, []).append(row)
        return tuple(_summary(name, rows, largest) for name, rows in order.items())

    def count(self, kind: CellKind) -> int:
        return sum(row.count(kind) for row in self.rows)

    @property
    def usable_free(self) -> int:
        """Free slots on nodes Determined's task pods may use."""
        return sum(row.free for row in self.rows if row.available)

    def to_dict(self) -> dict[str, Any]:
        return {"slotType": self.unit.slot_type, "resource": self.unit.resource,
                "slotSize": format_decimal(Fraction(self.unit.size, 1000)),
                "groupBy": self.group_by, "pools": [pool.to_dict() for pool in self.pools()],
                "nodes": [row.to_dict() for row in self.rows],
                "holders": {key: holder.to_dict() for key, holder in self.holders.items()},
                "nodesWithoutSlots": list(self.without_slots)}


def _summary(name: str, rows: Sequence[NodeRow], largest: int) -> PoolSummary:
    histogram: dict[int, int] = {}
    unavailable: dict[str, int] = {}
    counts: dict[str, int] = {}
    for row in rows:
        for cell in row.cells:
            counts[cell.kind.value] = counts.get(cell.kind.value, 0) + 1
        for kind, hidden in row.hidden:
            counts[kind.value] = counts.get(kind.value, 0) + hidden
        if row.available:
            histogram[row.free] = histogram.get(row.free, 0) + 1
        else:
            state = next(s for s in row.states if not s.startswith((OVERCOMMITTED, NOT_DRAWN)))
            cause = "taint" if state.startswith("taint ") else state.split(" (")[0]
            unavailable[cause] = unavailable.get(cause, 0) + 1
    ranked = sorted((row for row in rows if row.available and row.free), key=lambda r: (-r.free, natural(r.name)))
    return PoolSummary(name, len(rows), sum(r.slots for r in rows), sum(r.free for r in rows), counts,
                       tuple(sorted(histogram.items())), tuple(sorted(unavailable.items())),
                       tuple((row.name, row.free) for row in ranked[:largest]))


_DIGITS = re.compile(r"([0-9]+)")


def natural(name: str) -> tuple[tuple[int, int, str], ...]:
    """gpu-2 before gpu-10. Runs of ASCII digits compare by value without int() (a hand-written name of 5,000 digits
    is beyond Python's int conversion limit; `²` is a digit to str.isdigit but not to int)."""
    out = []
    for part in _DIGITS.split(name):
        if not part:
            continue
        if "0" <= part[0] <= "9":
            value = part.lstrip("0") or "0"
            out.append((0, len(value), value))
        else:
            out.append((1, 0, part))
    return tuple(out)


def default_group_by(nodes: Iterable[Node]) -> str | None:
    present = {key for node in nodes for key in node.labels}
    return next((label for label in POOL_LABELS if label in present), None)


def node_states(node: Node, constraints: Constraints) -> tuple[str, ...]:
    """What keeps Determined's task pods (of these constraints) off the node, all of it."""
    states = []
    if not node.ready:
        states.append("NotReady")
    if node.unschedulable:
        states.append("cordoned")
    taint = constraints.untolerated(node.taints)
    if taint is not None:
        states.append(f"taint {taint}")
    if not constraints.selector_matches(node.labels):
        states.append("not selected (task pod nodeSelector/affinity)")
    return tuple(states)


def pods_full(node: Node, pods: int) -> tuple[str, ...]:
    """The node's pod capacity (allocatable `pods`, the kubelet's maxPods) taken by its `pods` active pods: no task
    pod can start there whatever its free GPUs, as kube-scheduler's NodeResourcesFit and `plan` count it."""
    capacity = node.allocatable.get(PODS)
    if capacity is None or pods * 1000 < capacity:
        return ()
    return (f"pods full ({pods} of {capacity // 1000})",)


def keys(count: int) -> list[str]:
    """`count` keys of equal width: A..Z (no X), then AA, AB, ..."""
    width, capacity = 1, len(ALPHABET)
    while capacity < count:
        width, capacity = width + 1, capacity * len(ALPHABET)
    out = []
    for index in range(count):
        letters = []
        for _ in range(width):
            index, digit = divmod(index, len(ALPHABET))
            letters.append(ALPHABET[digit])
        out.append("".join(reversed(letters)))
    return out


# -- building ---------------------------------------------------------------------------------------

_Ident = tuple[str, str]  # (kind, id): a holder before it has a key
PLANNED = "plan"  # the kind of a queued group's ident: planned or reserved for, never running
QUEUE = "queue"  # the kind of a team queue's ident (a map by queue)


@dataclass
class _Draft:
    kind: str
    id: str
    name: str
    user: str
    priority: int | None
    namespace: str
    status: str = "running"
    pods: int = 0
    slots: int = 0


def _ident(labels: Mapping[str, str]) -> _Ident | None:
    """Which holder a pod belongs to: its det-k8s group, its Determined allocation, or none."""
    if L.is_managed(labels):
        return L.MANAGER, labels[L.GROUP]
    allocation = labels.get(L.DETERMINED)
    return ("determined", allocation) if allocation is not None else None


def _draft(pod: Pod, ident: _Ident) -> _Draft:
    labels = pod.labels
    if ident[0] == QUEUE:
        return _Draft(QUEUE, ident[1], f"queue {ident[1]}", "", None, "")
    if ident[0] == L.MANAGER:
        try:
            priority: int | None = int(labels.get(L.PRIORITY, ""))
        except ValueError:
            priority = None
        return _Draft(L.MANAGER, ident[1], labels.get(L.EXPERIMENT, ident[1]), labels.get(L.USER, ""), priority,
                      pod.namespace)
    return _Draft("determined", ident[1], L.determined_task(pod) or ident[1], labels.get("determined.ai/user", ""),
                  pod.priority, pod.namespace)


@dataclass
class _Slot:
    """A cell while the map is built: who (by ident) and what."""

    kind: CellKind
    ident: _Ident | None = None
    pod: str | None = None
    planned: _Ident | None = None


_Row = tuple[Node, str, list[_Slot], tuple[str, ...], tuple[tuple[CellKind, int], ...]]


def build(snapshot: Snapshot, unit: SlotUnit = GPU_SLOTS, *, constraints: Constraints = NO_CONSTRAINTS,
          group_by: str | None = None, plan: Plan | None = None, queue: Sequence[PodGroup] = (),
          nodes: Iterable[str] | None = None, queue_of: Callable[[Pod], str] | None = None) -> OccupancyMap:
    """The map of `snapshot` (of `nodes` only, when given), after `plan` when given.

    `constraints` are those of Determined's task pods (node states name what keeps them off);
    `queue` holds the groups `plan` decided (names and slots of placements and reservations).
    `group_by` is the node label rows are grouped by (None: one pool). With `queue_of` (a pod's team queue), the
    holders are the queues, not the groups (kind `queue`), and without `group_by` a node's row goes to the pool of
    the queue holding most of its slots.
    """
    shown = set(nodes) if nodes is not None else None
    selected = [node for node in snapshot.nodes if shown is None or node.name in shown]
    on_node: dict[str, list[Pod]] = {node.name: [] for node in selected}
    for pod in snapshot.pods:
        where = pod.node  # bound, or pinned/nominated: it holds that node's resources (Snapshot.used counts it)
        if pod.active and where in on_node:
            on_node[where].append(pod)
    drafts: dict[_Ident, _Draft] = {}
    groups = {group.id: group for group in queue}
    victims = set(plan.victims) if plan else set()
    placed_on = _placements_by_node(plan, groups, unit) if plan else {}
    reserved = {node: gid for gid, held in (plan.reservations if plan else {}).items() for node in held}
    drafted_rows: list[_Row] = []
    without_slots = []
    for node in sorted(selected, key=lambda n: (_pool(n, group_by) == "", _pool(n, group_by), natural(n.name))):
        dra = (snapshot.devices.gpus(node.name) if snapshot.slices and unit.resource in GPU_RESOURCES
               and node.allocatable.get(unit.resource, 0) <= 0 else 0)
        slots, states, hidden = _node_cells(node, on_node[node.name], unit, drafts, victims, queue_of, dra)
        if dra:
            through = snapshot.devices.gpu_class(node.name)
            states = (*states, f"{dra} GPU{'' if dra == 1 else 's'} managed by DRA"
                      + (f" ({through})" if through else "") + ": det-k8s places no pods on them")
        if plan is not None:
            _apply_plan(slots, hidden, placed_on.get(node.name, ()), reserved.get(node.name), drafts, groups, plan)
            holder = reserved.get(node.name)
            if holder is not None and hidden.get(CellKind.FREE):  # the guard holds the undrawn free slots too
                drafts[(PLANNED, holder)].slots += hidden[CellKind.FREE]
                hidden[CellKind.RESERVED] = hidden.get(CellKind.RESERVED, 0) + hidden.pop(CellKind.FREE)
        if not slots:
            without_slots.append(node.name)
            continue
        drafted_rows.append((node, _pool(node, group_by), slots,
                             states + node_states(node, constraints) + pods_full(node, len(on_node[node.name])),
                             tuple(hidden.items())))
    if queue_of is not None and group_by is None:
        drafted_rows = _by_queue(drafted_rows)
        group_by = QUEUE  # the map's groupBy says so
    return _finish(unit, group_by, drafted_rows, drafts, tuple(without_slots))


NO_QUEUE = "(no queue)"


def _by_queue(rows: list[_Row]) -> list[_Row]:
    """Each row in the pool of the queue holding most of its drawn slots (ties: by name), then by node name."""
    placed = []
    for node, _, cells, states, hidden in rows:
        held: dict[str, int] = {}
        for cell in cells:
            if cell.ident is not None and cell.ident[0] == QUEUE:
                held[cell.ident[1]] = held.get(cell.ident[1], 0) + 1
        pool = min(held, key=lambda name: (-held[name], name)) if held else NO_QUEUE
        placed.append((node, pool, cells, states, hidden))
    return sorted(placed, key=lambda row: (row[1] == NO_QUEUE, row[1], natural(row[0].name)))


def _pool(node: Node, group_by: str | None) -> str:
    return node.labels.get(group_by, "") if group_by else ""


def _node_cells(node: Node, pods: list[Pod], unit: SlotUnit, drafts: dict[_Ident, _Draft],
                victims: set[str], queue_of: Callable[[Pod], str] | None = None, dra: int = 0,
                ) -> tuple[list[_Slot], tuple[str, ...], dict[CellKind, int]]:
    """The node's first MAX_DRAWN cells, what keeps it from being drawn whole, and its other slots by kind.

    Built from runs (a cell and how many slots it stands for), so a pod holding a billion slots costs one run."""
    resource, size = unit.resource, unit.size
    base = node.allocatable.get(resource, 0)
    held: list[tuple[_Slot, int]] = []
    foreign: list[tuple[_Slot, int]] = []
    used = 0
    holding = [pod for pod in pods if pod.requests.get(resource, 0) > 0]  # the others are not on the map
    for pod in sorted(holding, key=lambda p: (p.namespace, p.name)):
        amount = pod.requests[resource]
        if SYSTEM_LABEL in pod.labels:  # the master counts slots net of its own pods' CPU
            base -= amount
            continue
        used += amount
        whole = amount // size
        ident = _ident(pod.labels)
        where = f"{pod.namespace}/{pod.name}"
        if ident is None:
            kind = CellKind.TERMINATING if pod.deleting else CellKind.FOREIGN
            foreign.append((_Slot(kind, None, where), whole))
            continue
        cell_kind = CellKind(ident[0])
        if queue_of is not None:  # the holder is the pod's team queue
            ident = (QUEUE, queue_of(pod))
        record = drafts.get(ident)
        if record is None:
            record = drafts[ident] = _draft(pod, ident)
        record.pods += 1
        if pod.deleting and record.status == "running" and ident[0] != QUEUE:  # a queue stays, its pods come and go
            record.status = "terminating"
        if ident[0] == L.MANAGER and ident[1] in victims:
            record.status, kind = "evicted", CellKind.VICTIM
        elif pod.deleting:
            kind = CellKind.TERMINATING
        else:
            kind = cell_kind
        held.append((_Slot(kind, ident, where), whole))
    total = max(base, 0) // size
    free = max(base - used, 0) // size
    held.sort(key=lambda run: run[0].ident or ("", ""))
    taken = [run for run in held + foreign if run[1] > 0]
    count = sum(n for _, n in taken)
    states: tuple[str, ...] = ()
    if count > total:  # requests beyond allocatable: the node lost a device, or pods raced for it
        states = (f"{OVERCOMMITTED}: pods hold {count} of {total} slots",)
        taken, free = _first_runs(taken, total), 0
        count = total
    rest = total - count - free  # other pods' fractions of a slot, added up
    runs = [*taken, (_Slot(CellKind.FOREIGN), rest), (_Slot(CellKind.FREE), free), (_Slot(CellKind.DRA), dra)]
    for cell, n in runs:
        if cell.ident is not None:
            drafts[cell.ident].slots += n
    total += dra  # DRA GPUs: counted as DRA, never as missing (cluster/dra.py)
    if total > MAX_DRAWN:
        states = (*states, f"{NOT_DRAWN} {MAX_DRAWN:,} of its {total:,} slots drawn (no real node has that many)")
    cells: list[_Slot] = []
    hidden: dict[CellKind, int] = {}
    for cell, n in runs:
        shown = max(min(n, MAX_DRAWN - len(cells)), 0)
        cells += [_Slot(cell.kind, cell.ident, cell.pod) for _ in range(shown)]
        if n > shown:
            hidden[cell.kind] = hidden.get(cell.kind, 0) + n - shown
    return cells, states, hidden


def _first_runs(runs: list[tuple[_Slot, int]], limit: int) -> list[tuple[_Slot, int]]:
    """The runs cut to `limit` slots in all."""
    out = []
    for cell, n in runs:
        if limit <= 0:
            break
        out.append((cell, min(n, limit)))
        limit -= n
    return out


def _placements_by_node(plan: Plan, groups: Mapping[str, PodGroup],
                        unit: SlotUnit) -> dict[str, list[tuple[str, str, int]]]:
    """node -> [(group id, pod name, slots)], preemptors first (they go onto their victims' slots).

    A planned pod takes the slots its request makes, counted as a running pod's are (for a group
    det-k8s built: its slots per pod, what `plan -o json` says)."""
    out: dict[str, list[tuple[str, str, int]]] = {}
    ordered = sorted(plan.placements, key=lambda gid: gid not in plan.preempting)
    for gid in ordered:
        group = groups.get(gid)
        requests = {pod.name: pod.requests for pod in group.pods} if group is not None else {}
        for pod, node in plan.placements[gid]:
            amount = requests.get(pod, {}).get(unit.resource, 0)
            out.setdefault(node, []).append((gid, pod, max(amount, 0) // unit.size))
    return out


def _queued_draft(gid: str, groups: Mapping[str, PodGroup], status: str) -> _Draft:
    group = groups.get(gid)
    if group is None:
        return _Draft(L.MANAGER, gid, gid, "", None, "", status)
    return _Draft(L.MANAGER, gid, group.experiment, group.user, group.priority, "", status)


def _apply_plan(cells: list[_Slot], hidden: dict[CellKind, int], placed: Sequence[tuple[str, str, int]],
                reserved_for: str | None, drafts: dict[_Ident, _Draft], groups: Mapping[str, PodGroup],
                plan: Plan) -> None:
    """Planned pods onto the drawn cells, then (a node beyond MAX_DRAWN slots) onto its undrawn free slots."""
    for gid, pod, slots in placed:
        ident = (PLANNED, gid)
        draft = drafts.setdefault(ident, _queued_draft(gid, groups, "planned"))
        draft.pods += 1
        preempting = gid in plan.preempting
        remaining = slots
        while remaining > 0:
            spot = _first(cells, CellKind.VICTIM, unplanned=True) if preempting else None
            if spot is None and preempting:  # the plan counts a leaving group's slots as coming back for it
                spot = _first(cells, CellKind.TERMINATING, unplanned=True, held=True)
            if spot is None:
                spot = _first(cells, CellKind.FREE)
            if spot is None:
                spot = _first(cells, CellKind.FOREIGN, anonymous=True)  # fractions: a CPU slot rounded away
            if spot is None:
                break
            if cells[spot].kind in (CellKind.VICTIM, CellKind.TERMINATING):
                cells[spot].planned = ident
            else:
                cells[spot] = _Slot(CellKind.PLANNED, ident, pod)
            draft.slots += 1
            remaining -= 1
        undrawn = min(remaining, hidden.get(CellKind.FREE, 0))
        if undrawn:  # counted, as the rest of the node is: a pod of a billion slots costs one step
            hidden[CellKind.FREE] -= undrawn
            if not hidden[CellKind.FREE]:
                del hidden[CellKind.FREE]
            hidden[CellKind.PLANNED] = hidden.get(CellKind.PLANNED, 0) + undrawn
            draft.slots += undrawn
    if reserved_for is not None:
        ident = (PLANNED, reserved_for)
        draft = drafts.setdefault(ident, _queued_draft(reserved_for, groups, "reserving"))
        for index, cell in enumerate(cells):
            if cell.kind is CellKind.FREE:
                cells[index] = _Slot(CellKind.RESERVED, ident)
                draft.slots += 1


def _first(cells: list[_Slot], kind: CellKind, *, unplanned: bool = False, anonymous: bool = False,
           held: bool = False) -> int | None:
    for index, cell in enumerate(cells):
        if (cell.kind is kind and not (unplanned and cell.planned) and not (anonymous and cell.pod)
                and not (held and cell.ident is None)):
            return index
    return None


def _finish(unit: SlotUnit, group_by: str | None, drafted: list[_Row],
            drafts: dict[_Ident, _Draft], without_slots: tuple[str, ...]) -> OccupancyMap:
    order: dict[_Ident, None] = {}
    for _, _, cells, _, _ in drafted:  # running holders by first appearance, then planned and reserving groups
        for cell in cells:
            if cell.ident is not None and cell.ident[0] != PLANNED:
                order.setdefault(cell.ident)
    for ident, draft in drafts.items():
        if ident[0] == PLANNED and (draft.slots or draft.status == "reserving"):
            order.setdefault(ident)
    key_of = dict(zip(order, keys(len(order)), strict=True))
    holders = {}
    for ident, key in key_of.items():
        d = drafts[ident]
        holders[key] = Holder(key, d.kind, d.id, d.name, d.user, d.priority, d.namespace, d.status, d.pods, d.slots)
    rows = tuple(
        NodeRow(node.name, pool, tuple(
            Cell(cell.kind, key_of.get(cell.ident) if cell.ident else None, cell.pod,
                 key_of.get(cell.planned) if cell.planned else None) for cell in cells), states, hidden)
        for node, pool, cells, states, hidden in drafted)
    return OccupancyMap(unit, group_by, rows, holders, without_slots)

