"""Rules that need the cluster's nodes: do slots fit the machines that will run them?

The documents' two traps: `maxSlotsPerPod` must divide every GPU node's GPU count (4- and 8-GPU
nodes need 4), and a CPU slot must fit a node's *allocatable* CPU, which is below its core count
(an 8-core node may offer 7.91, so 8 CPUs per slot never schedule).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..cluster.admission import detect
from ..cluster.model import GPU, Constraints, DeviceView, Node, Pod, Snapshot
from ..cluster.read import constraints_from_spec
from ..errors import Problem, Severity
from ..quantity import format_cpu, format_decimal
from .model import Settings
from .source import SourceMap, format_path

SYSTEM_LABEL = "determined-system"  # the master and database pods; the master takes their CPU off its CPU slots


@dataclass(frozen=True)
class Taken:
    """CPU (milli) on a node that task pods can never have, and what holds it."""

    system: int = 0
    daemonsets: int = 0
    holders: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.system + self.daemonsets


def taken_cpu(nodes: Sequence[Node], pods: Sequence[Pod]) -> dict[str, Taken]:
    """Per node: the CPU requests of `determined-system` pods bound there (the master subtracts exactly these
    from its CPU slots: 0.17.15 master/internal/resourcemanagers/kubernetes/pods.go) and of one pod of every
    DaemonSet whose pods fit the node (a DaemonSet runs a pod on every node it tolerates, present or future)."""
    system: dict[str, list[Pod]] = {}
    daemonsets: dict[tuple[str, str], Pod] = {}
    for pod in pods:
        if pod.phase in ("Succeeded", "Failed"):
            continue
        if pod.labels.get(SYSTEM_LABEL) is not None and pod.node_name:
            system.setdefault(pod.node_name, []).append(pod)
        elif pod.owner.startswith("DaemonSet/"):
            key = (pod.namespace, pod.owner)
            if key not in daemonsets or pod.requests.get("cpu", 0) > daemonsets[key].requests.get("cpu", 0):
                daemonsets[key] = pod
    out = {}
    for node in nodes:
        mine = system.get(node.name, [])
        ds = [p for p in daemonsets.values() if p.constraints.untolerated(node.taints) is None
              and p.constraints.selector_matches(node.labels) and p.requests.get("cpu", 0) > 0]
        holders = [f"{p.name} (determined-system)" for p in mine if p.requests.get("cpu", 0)] + [
            f"{p.owner.removeprefix('DaemonSet/')} (DaemonSet)" for p in ds]
        out[node.name] = Taken(sum(p.requests.get("cpu", 0) for p in mine),
                               sum(p.requests.get("cpu", 0) for p in ds), tuple(holders))
    return out


def without_pods(settings: Settings, sources: SourceMap, origin: str) -> Problem | None:
    """On a CPU-slot cluster, a warning that nodes read without their pods (a `kubectl get nodes` file, or pods
    that may not be listed) make the slot check's room an upper bound; GPU checks do not depend on pods."""
    if settings.slot_type != "cpu" or not settings.cpu_per_slot:
        return None
    path = ("slotResourceRequests", "cpu")
    return Problem(Severity.WARNING, format_path(path),
                   f"{origin}: no pods were read, so each node's whole allocatable CPU counts as room for CPU slots; "
                   "DaemonSet and determined-system pods take some of it",
                   "take the file with `kubectl get nodes,pods -A -o json` (or give validate a context to read the "
                   "cluster) to check the room that is really left", sources.find(path))


def admitted_task_constraints(settings: Settings, nodes: Sequence[Node], pods: Sequence[Pod] = ()) -> Constraints:
    """Task pods' constraints once the API server admitted them: a GPU task pod gets the ExtendedResourceToleration
    plugin's `nvidia.com/gpu` toleration where the cluster runs it (decided as planning decides it,
    `cluster.admission.detect`; GKE and EKS taint GPU nodes with that name and rely on it)."""
    constraints = task_constraints(settings)
    if settings.slot_type == "cpu":
        return constraints
    return detect(Snapshot(tuple(nodes), tuple(pods))).admit(constraints, (GPU,))


def task_constraints(settings: Settings) -> Constraints:
    """Where task pods may go, from the default pod spec of the slot type."""
    spec = settings.task_defaults.gpu_pod_spec if settings.slot_type != "cpu" else settings.task_defaults.cpu_pod_spec
    inner = (spec or {}).get("spec") if isinstance(spec, dict) else None
    return constraints_from_spec(inner) if isinstance(inner, dict) else Constraints()


def eligible_nodes(nodes: Sequence[Node], constraints: Constraints) -> tuple[list[Node], dict[str, int]]:
    """Nodes task pods can use, and how many were excluded for which reason."""
    keep: list[Node] = []
    excluded: dict[str, int] = {}

    def skip(reason: str) -> None:
        excluded[reason] = excluded.get(reason, 0) + 1

    for node in nodes:
        cause = constraints.node_cause(node)  # kube-scheduler's node filters, as the scheduler models them
        if cause is None:
            keep.append(node)
        else:
            skip(cause)
    return keep, excluded


def _room_text(node: Node, taken: Taken, room: int) -> str:
    if not taken.total:
        return f"whose allocatable CPU is {format_cpu(Fraction(node.allocatable.get('cpu', 0), 1000))}"
    return (f"allocatable {format_cpu(Fraction(node.allocatable.get('cpu', 0), 1000))} less "
            f"{format_cpu(Fraction(taken.total, 1000))} taken by {', '.join(taken.holders)} leaves "
            f"{format_cpu(Fraction(max(room, 0), 1000))}")


def _half_cores_below(milli: int) -> Fraction:
    return Fraction(math.floor(Fraction(milli, 1000) * 2), 2)


DRA_ADVICE = ("run the GPU Operator's device plugin on those nodes instead of (or beside) its DRA driver, or let "
              "kube-scheduler place those pods: another schedulerName for the master's task pods, or Kubernetes' own "
              "gang scheduling (`experiment create` in native mode)")


def check_nodes(settings: Settings, nodes: Sequence[Node], sources: SourceMap, origin: str,
                pods: Sequence[Pod] = (), dra_devices: DeviceView | None = None) -> list[Problem]:
    """maxSlotsPerPod against GPU node sizes; slotResourceRequests.cpu against the CPU a node has for tasks: its
    allocatable CPU less what `pods` (when given) hold for good there (`taken_cpu`); GPU nodes whose GPUs DRA
    manages (`dra_devices`, from the ResourceSlices), which no pod det-k8s binds or pins can use."""
    problems: list[Problem] = []

    def add(severity: Severity, path: tuple[str, ...], message: str, hint: str | None = None) -> None:
        problems.append(Problem(severity, format_path(path), message, hint, sources.find(path)))

    usable, excluded = eligible_nodes(nodes, admitted_task_constraints(settings, nodes, pods))
    if not nodes:
        add(Severity.ERROR, (), f"{origin} lists no nodes, so the node checks cannot run",
            "take it with `kubectl get nodes -o yaml`, or pass --kube-context to read the cluster's nodes")
        return problems
    bare = [node.name for node in nodes if set(node.allocatable) <= {"pods"}]
    if bare:  # hand-written or truncated: status.allocatable missing
        add(Severity.WARNING, (), f"{origin}: node {bare[0]}{f' and {len(bare) - 1} more' if len(bare) > 1 else ''} "
            "report no allocatable resources (no status.allocatable), so nothing fits there")
    if not usable:
        reasons = ", ".join(f"{count} {why}" for why, count in sorted(excluded.items()))
        add(Severity.ERROR, (), f"no node in {origin} can run task pods ({reasons})",
            "untaint or uncordon nodes, or add tolerations to the task pod spec")
        return problems
    slots = settings.max_slots_per_pod
    if settings.slot_type in ("gpu", "rocm"):  # a slot is one device: nvidia.com/gpu, or amd.com/gpu for rocm
        resource = settings.slot_resource
        devices = {n.name: n.allocatable.get(resource, 0) // 1000 for n in usable}
        gpu_nodes = [n for n in usable if devices[n.name] > 0]
        dra = [(n.name, dra_devices.gpus(n.name)) for n in usable
               if not devices[n.name] and dra_devices.gpus(n.name)] if dra_devices is not None else []
        if dra:
            named = ", ".join(f"{name} ({count})" for name, count in dra[:3]) + (" ..." if len(dra) > 3 else "")
            add(Severity.WARNING, ("slotType",),
                f"{len(dra)} node(s) in {origin} hold {sum(c for _, c in dra)} GPU(s) managed by DRA, not a device "
                f"plugin: {named}; det-k8s binds the master's pods and pins its own experiments without a "
                "ResourceClaim, so none of them runs there", DRA_ADVICE)
        if not gpu_nodes:
            plugin = "the AMD GPU device plugin" if resource != "nvidia.com/gpu" else "the NVIDIA device plugin"
            add(Severity.WARNING, ("slotType",), f"no usable node in {origin} offers {resource}; GPU tasks will "
                f"stay Pending", f"install {plugin}, or use slotType: cpu")
            return problems
        sizes = sorted({devices[n.name] for n in gpu_nodes})
        gcd = math.gcd(*sizes)
        if slots is not None:
            bad = [n for n in gpu_nodes if devices[n.name] % slots]
            if bad:
                names = ", ".join(f"{n.name} ({devices[n.name]})" for n in bad[:3]) + (" ..." if len(bad) > 3 else "")
                add(Severity.ERROR, ("maxSlotsPerPod",),
                    f"{slots} does not divide the GPUs of {len(bad)} node(s): {names}",
                    f"set maxSlotsPerPod to {gcd}, the greatest common divisor of the node sizes "
                    f"({', '.join(map(str, sizes))})")
    else:
        per = settings.cpu_per_slot
        if per is None or per <= 0:
            return problems
        per_milli = per * 1000
        taken = taken_cpu(usable, pods)
        room = {n.name: n.allocatable.get("cpu", 0) - taken[n.name].total for n in usable}
        smallest = min(usable, key=lambda n: (n.allocatable.get("cpu", 0), n.name))
        small_cpu = smallest.allocatable.get("cpu", 0)
        never = sorted((n for n in usable if per_milli > room[n.name]), key=lambda n: n.name)
        tightest = min(usable, key=lambda n: (room[n.name], n.name))
        if per_milli > small_cpu or len(never) == len(usable):
            node, left = (smallest, small_cpu) if per_milli > small_cpu else (tightest, room[tightest.name])
            suggestion = _half_cores_below(left)
            add(Severity.ERROR, ("slotResourceRequests", "cpu"),
                f"{format_decimal(per)} CPUs per slot do not fit node {node.name}, "
                + (_room_text(node, taken[node.name], left) if per_milli <= small_cpu else
                   f"whose allocatable CPU is {format_cpu(Fraction(small_cpu, 1000))}"),
                f"set slotResourceRequests.cpu to {format_decimal(suggestion)} or less" if suggestion > 0 else
                "that node has almost no allocatable CPU")
        elif never:
            node = never[0]
            add(Severity.WARNING, ("slotResourceRequests", "cpu"),
                f"a slot of {format_decimal(per)} CPUs never fits {len(never)} node(s), e.g. {node.name}: "
                + _room_text(node, taken[node.name], room[node.name]),
                "those nodes run no CPU task; lower slotResourceRequests.cpu to use them")
        if slots is not None and not problems:
            per_node = {n.name: int(Fraction(max(room[n.name], 0)) / per_milli) for n in usable}
            short = sorted(name for name, count in per_node.items() if count < slots)
            uneven = sorted(name for name, count in per_node.items() if count >= slots and count % slots)
            if short:
                add(Severity.WARNING, ("maxSlotsPerPod",),
                    f"a full pod of {slots} slots needs {format_decimal(per * slots)} CPUs, more than "
                    f"{len(short)} node(s) offer (e.g. {short[0]})",
                    f"use maxSlotsPerPod {max(1, math.gcd(*per_node.values()))} for these node sizes")
            elif uneven:
                add(Severity.WARNING, ("maxSlotsPerPod",),
                    f"{slots} does not divide the CPU slots of node {uneven[0]} ({per_node[uneven[0]]}); "
                    "part of it stays idle", f"use maxSlotsPerPod {math.gcd(*per_node.values())}")
    return problems
