"""What det-k8s knows of a cluster: nodes, pods, their resources and placement constraints.

Resources are integer milli-units per resource name (`cpu` 7910 = 7.91 cores, `memory` in
milli-bytes, `nvidia.com/gpu` 4000 = 4 GPUs, `pods` 1000 per pod), the same rounding
kube-scheduler uses, so sums and comparisons are exact and cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from .quota import ResourceQuota

if TYPE_CHECKING:
    from .dra import DeviceClass, DeviceSlice, DeviceView

Resources = Mapping[str, int]
GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"  # the slot of slotType rocm (Determined 0.36 and later)
PODS = "pods"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def add(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def subtract(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def fits(request: Resources, free: Resources) -> bool:
    """True when every requested amount is available (a resource the node lacks counts as 0)."""
    return all(amount <= 0 or free.get(name, 0) >= amount for name, amount in request.items())


def limiting(request: Resources, free: Resources) -> str | None:
    """The first resource (sorted by name) that does not fit, or None when the request fits."""
    for name in sorted(request):
        if request[name] > 0 and free.get(name, 0) < request[name]:
            return name
    return None


def count_fits(request: Resources, free: Resources) -> int:
    """How many copies of `request` fit into `free` (a large number when nothing is requested)."""
    best = 1 << 30
    for name, amount in request.items():
        if amount > 0:
            best = min(best, max(free.get(name, 0), 0) // amount)
    return best


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' rule: empty effect matches all effects; empty key with Exists matches all keys."""
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value


NAME_FIELD = "metadata.name"  # the one node field a matchFields requirement may name
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"  # tolerating it lets a pod onto a cordoned node
# The taints the node lifecycle controller (and TaintNodesByCondition admission, on every new node) puts on a node for
# a condition that passes: they say "not now", never "never".
CONDITION_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                              "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure",
                              "node.kubernetes.io/pid-pressure", "node.kubernetes.io/network-unavailable"})
HOSTNAME = "kubernetes.io/hostname"
OS_LABEL = "kubernetes.io/os"
RUNTIME_CLASS_MERGE = "the node selector and tolerations RuntimeClass"  # unmodelled until admission merged them


@dataclass(frozen=True, slots=True)
class Requirement:
    """One selector requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`).

    On node labels (`matchExpressions`, nodeSelectorTerms), on pod labels (label selectors), or, with
    `field`, on the node's name (`matchFields`: only `metadata.name` with `In`/`NotIn` and exactly one
    value; anything else makes its term match no node, as in kube-scheduler).
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()
    field: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt") and present and len(self.values) == 1:
            try:
                left, right = int(value or ""), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False

    def matches_node(self, node: Node) -> bool:
        if not self.field:
            return self.matches(node.labels)
        if self.key != NAME_FIELD or len(self.values) != 1:
            return False
        if self.operator == "In":
            return node.name == self.values[0]
        if self.operator == "NotIn":
            return node.name != self.values[0]
        return False


Term = tuple[Requirement, ...]  # requirements ANDed; an empty term matches no node


def term_matches(term: Term, node: Node) -> bool:
    return bool(term) and all(req.matches_node(node) for req in term)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A label selector on pods or namespaces. `nothing`: a missing selector, which matches nothing."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        """Matches everything (`{}`)."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(req.matches(labels) for req in self.requirements)

    def __str__(self) -> str:
        if self.nothing:
            return "<none>"
        parts = []
        for req in self.requirements:
            if req.operator == "In" and len(req.values) == 1:
                parts.append(f"{req.key}={req.values[0]}")
            elif req.operator in ("Exists", "DoesNotExist"):
                parts.append(req.key if req.operator == "Exists" else f"!{req.key}")
            else:
                parts.append(f"{req.key} {req.operator.lower()} ({','.join(req.values)})")
        return ",".join(parts) or "<all>"


NOTHING = LabelSelector(nothing=True)


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required pod (anti-)affinity term, its namespaces resolved as kube-scheduler resolves them.

    `namespaces` lists the namespaces named (the pod's own when neither they nor a namespace
    selector are given); `namespace_selector` adds the namespaces whose labels it matches (`{}`:
    every namespace; None: none).
    """

    selector: LabelSelector
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None

    def matches(self, labels: Mapping[str, str], namespace: str,
                namespace_labels: Mapping[str, Mapping[str, str]] | None = None) -> bool:
        """Does a pod with these labels in this namespace match the term?"""
        if namespace not in self.namespaces:
            chooser = self.namespace_selector
            if chooser is None or not (chooser.empty or chooser.matches((namespace_labels or {}).get(namespace, {}))):
                return False
        return self.selector.matches(labels)

    def __str__(self) -> str:
        return f"{self.selector} per {self.topology_key}"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topology spread constraint with `whenUnsatisfiable: DoNotSchedule` (the others only score)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_affinity: bool = True  # nodeAffinityPolicy: Honor (default): count only nodes the pod may use
    honor_taints: bool = False  # nodeTaintsPolicy: Ignore (default)

    def __str__(self) -> str:
        return f"{self.selector} over {self.topology_key}, max skew {self.max_skew}"


@dataclass(frozen=True, slots=True)
class HostPort:
    """A port a pod takes on its node's network (`hostPort`, or any port of a hostNetwork pod)."""

    port: int
    protocol: str = "TCP"
    ip: str = ""  # "" and 0.0.0.0: every address

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        mine, theirs = self.ip or "0.0.0.0", other.ip or "0.0.0.0"
        return mine == "0.0.0.0" or theirs == "0.0.0.0" or mine == theirs

    def __str__(self) -> str:
        return f"{self.port}/{self.protocol}" + (f" on {self.ip}" if self.ip and self.ip != "0.0.0.0" else "")


@dataclass(frozen=True, slots=True)
class VolumeClaim:
    """A PersistentVolumeClaim a pod mounts: by name, or a generic ephemeral volume's claim to be.

    An ephemeral claim is named `<pod>-<volume>` once the pod exists; until then only its storage
    class (`storage_class`, "" for the cluster's default) says where it can be provisioned.
    """

    name: str
    ephemeral: bool = False
    storage_class: str | None = None
    read_write_once_pod: bool = False


@dataclass(frozen=True, slots=True)
class Constraints:
    """Where a pod may run, as kube-scheduler's filters and the kubelet's admission decide it.

    Node-level (the same for every pass): `node_selector`, `required_terms` (required node affinity:
    terms ORed, requirements ANDed; `()` when the pod has none, `((),)` when it has one no node can
    match), `tolerations`, `os` (`spec.os.name`, checked against the node's kubernetes.io/os label
    by the kubelet) and `claims` (volumes: bound ones pin it to their volume's nodes). Pod-level
    (they depend on other pods): required pod `affinity` and `anti_affinity`, DoNotSchedule
    topology `spread` and `host_ports`. `preferred_terms` (weight, term) only order nodes.
    `unmodelled` names what the pod asks for that det-k8s cannot check; planning warns about it.
    """

    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[Term, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    preferred_terms: tuple[tuple[int, Term], ...] = ()
    affinity: tuple[PodAffinityTerm, ...] = ()
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    claims: tuple[VolumeClaim, ...] = ()
    os: str = ""
    unmodelled: tuple[str, ...] = ()
    resource_claims: tuple[str, ...] = ()  # spec.resourceClaims names: claims only kube-scheduler allocates

    @property
    def interpod(self) -> bool:
        """Whether where this pod may go depends on other pods (affinity, anti-affinity, spread, host ports)."""
        return bool(self.affinity or self.anti_affinity or self.spread or self.host_ports)

    def selector_matches(self, labels: Mapping[str, str]) -> bool:
        """nodeSelector and required node affinity on labels alone (matchFields need the node: `affinity_matches`)."""
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        if self.required_terms:
            return any(term and all(req.matches(labels) for req in term if not req.field)
                       for term in self.required_terms)
        return True

    def affinity_matches(self, node: Node) -> bool:
        """nodeSelector and required node affinity (matchExpressions and matchFields) against a node."""
        labels = node.labels
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return False
        if self.required_terms:
            return any(term_matches(term, node) for term in self.required_terms)
        return True

    @property
    def pinned_node(self) -> str | None:
        """The one node required node affinity allows by name (how det-k8s and DaemonSets pin pods), or None."""
        names = set()
        for term in self.required_terms:
            pins = [req.values[0] for req in term if req.field and req.key == NAME_FIELD and req.operator == "In"
                    and len(req.values) == 1]
            if not pins:
                return None
            names.update(pins)
        return names.pop() if len(names) == 1 else None

    def preference(self, node: Node) -> int:
        """The sum of the weights of the preferred node affinity terms the node matches."""
        return sum(weight for weight, term in self.preferred_terms if term_matches(term, node))

    def untolerated(self, taints: Iterable[Taint]) -> Taint | None:
        """The first NoSchedule/NoExecute taint no toleration covers (PreferNoSchedule is a preference)."""
        for taint in taints:
            if taint.effect == "PreferNoSchedule":
                continue
            if not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None

    def tolerates_cordon(self) -> bool:
        """kube-scheduler's NodeUnschedulable filter lets a pod tolerating this taint onto cordoned nodes."""
        taint = Taint(UNSCHEDULABLE_TAINT, "", "NoSchedule")
        return any(t.tolerates(taint) for t in self.tolerations)

    def node_cause(self, node: Node, *, lasting: bool = False) -> str | None:
        """Why the pod cannot run on the node for node-level reasons (volumes aside), or None.

        In kube-scheduler's order of filters, the first that fails: NodeUnschedulable, NodeAffinity
        (nodeSelector, then required affinity), TaintToleration; then the kubelet's OS check.
        `lasting`: only what lasts; a node that is not ready, and the taints the node lifecycle controller puts
        on for a condition (`node.kubernetes.io/not-ready` on every node that joins, until its kubelet reports
        Ready), pass: such a node may run the pod later, so it counts when asking whether a group can ever fit.
        """
        if not node.ready and not lasting:
            return "not ready"
        if node.unschedulable and not self.tolerates_cordon():
            return "cordoned"
        labels = node.labels
        for key, value in self.node_selector.items():
            if labels.get(key) != value:
                return "node selector"
        if self.required_terms and not any(term_matches(term, node) for term in self.required_terms):
            return "node affinity"
        taints = [t for t in node.taints if t.key not in CONDITION_TAINTS] if lasting else node.taints
        taint = self.untolerated(taints)
        if taint is not None:
            return f"taint {taint}"
        if self.os and labels.get(OS_LABEL, self.os) != self.os:
            return f"os {labels.get(OS_LABEL)}"
        return None

    def on_node(self, name: str) -> Constraints:
        """These constraints, also requiring the node named `name` (a matchFields term, ANDed into each term)."""
        pin = Requirement(NAME_FIELD, "In", (name,), field=True)
        terms = tuple(term + (pin,) for term in self.required_terms) if self.required_terms else ((pin,),)
        return replace(self, required_terms=terms)

    def with_tolerations(self, extra: Iterable[Toleration]) -> Constraints:
        """These constraints with tolerations added (those already present are not repeated)."""
        added = tuple(t for t in extra if t not in self.tolerations)
        return replace(self, tolerations=self.tolerations + added) if added else self


NO_CONSTRAINTS = Constraints()


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    capacity: Resources = field(default_factory=dict)
    fence: str = ""  # the value (unix time) of det-k8s's own binding taint, left out of `taints` (live/fence.py)

    @property
    def gpus(self) -> int:
        """Allocatable GPUs (whole devices)."""
        return self.allocatable.get(GPU, 0) // 1000


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    namespace: str = "default"
    node_name: str | None = None
    phase: str = "Pending"
    requests: Resources = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    constraints: Constraints = NO_CONSTRAINTS
    created: str = ""
    deleting: bool = False
    reason: str = ""  # status.reason, e.g. Evicted or OutOfnvidia.com/gpu
    owner: str = ""  # the controlling ownerReference as Kind/name, e.g. DaemonSet/kube-proxy ("" when none)
    priority: int | None = None  # spec.priority, set from the pod's PriorityClass at admission
    nominated_node: str | None = None  # status.nominatedNodeName: kube-scheduler holds that node for it
    unschedulable: str = ""  # the message of a PodScheduled=False condition with reason Unschedulable
    unschedulable_since: str = ""  # that condition's lastTransitionTime
    mirror: bool = False  # a static pod's mirror (kubelet-managed, never leaves its node)
    bound_by_det_k8s: bool = False  # its scheduler is det-k8s itself (the master's pods): on no node until bound
    scheduler: str = ""  # spec.schedulerName ("" when not read)
    gang: str = ""  # another gang mechanism it belongs to (cluster/gangs.py), e.g. `Volcano pod group train-1`

    @property
    def node(self) -> str | None:
        """The node the pod holds resources on: where it is bound, else where it is pinned or nominated.

        An unbound pod pinned by required node affinity to one node (det-k8s's own pods, DaemonSet
        pods) will be bound there by kube-scheduler; a nominated one has that node held for it. A pod
        det-k8s binds itself holds nothing until it does: its pinning is a constraint of the plan.
        """
        if self.node_name or self.bound_by_det_k8s:
            return self.node_name
        return self.constraints.pinned_node or self.nominated_node

    @property
    def owner_kind(self) -> str:
        """The controlling owner's kind (DaemonSet pods stay on their node for good)."""
        return self.owner.partition("/")[0]

    @property
    def active(self) -> bool:
        """Holds resources on its node: bound (or pinned, nominated) and not finished."""
        return self.node is not None and self.phase not in TERMINAL_PHASES

    @property
    def permanent(self) -> bool:
        """Will stay on its node whatever det-k8s does: a DaemonSet's or a static pod."""
        return self.mirror or self.owner_kind == "DaemonSet"


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim: what kube-scheduler's VolumeBinding filter reads of it."""

    namespace: str
    name: str
    volume: str = ""  # spec.volumeName once bound
    storage_class: str | None = None  # None: not set (the default class applies); "": no class
    phase: str = "Pending"
    deleting: bool = False
    access_modes: tuple[str, ...] = ()
    request: int = 0  # storage, milli-bytes
    selected_node: str = ""  # volume.kubernetes.io/selected-node: provisioning started there

    @property
    def bound(self) -> bool:
        return bool(self.volume)


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume: the nodes that can reach it (node affinity, zone labels) and what it offers."""

    name: str
    node_terms: tuple[Term, ...] = ()  # spec.nodeAffinity.required: ORed terms; () when any node
    labels: Mapping[str, str] = field(default_factory=dict)
    storage_class: str = ""
    phase: str = "Available"
    claim: tuple[str, str] | None = None  # spec.claimRef (namespace, name)
    capacity: int = 0  # storage, milli-bytes
    access_modes: tuple[str, ...] = ()
    attacher: str = ""  # a volume attached to its node (CSI driver, in-tree disk type): counts to a per-node limit


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = "Immediate"  # or WaitForFirstConsumer
    allowed_topologies: tuple[Term, ...] = ()  # ORed terms of label requirements; () when anywhere
    default: bool = False


@dataclass(frozen=True)
class Snapshot:
    """Nodes and pods at one moment, and what placement also reads: volumes, claims, storage classes,
    namespaces. Used capacity per node is derived once, on first use.

    `listed` names the kinds the snapshot was read from (a claim missing from a snapshot that lists
    PersistentVolumeClaims does not exist; one missing from a snapshot without them is unknown).
    `namespaces` maps names to labels when Namespaces were listed. `quotas` are the ResourceQuotas
    (`cluster/quota.py`): a group whose pods a quota would refuse waits. `device_classes` and `slices` are DRA's
    DeviceClasses and ResourceSlices (`cluster/dra.py`; `devices` the per-node view): a group whose request DRA
    serves on its nodes, or with `spec.resourceClaims`, waits for kube-scheduler's claim allocation.
    """

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...] = ()
    claims: tuple[Claim, ...] = ()
    volumes: tuple[Volume, ...] = ()
    classes: tuple[StorageClass, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    listed: frozenset[str] = frozenset({"Node", "Pod"})
    quotas: tuple[ResourceQuota, ...] = ()  # every namespace's ResourceQuotas (when "ResourceQuota" is listed)
    device_classes: tuple[DeviceClass, ...] = ()  # DRA (cluster/dra.py), when "DeviceClass" is listed
    slices: tuple[DeviceSlice, ...] = ()  # DRA ResourceSlices, when "ResourceSlice" is listed

    @cached_property
    def devices(self) -> DeviceView:
        """Per node, the DRA devices the ResourceSlices publish, and what DRA serves where (cluster/dra.py)."""
        from .dra import device_view

        return device_view(self.nodes, self.device_classes, self.slices)

    @cached_property
    def nodes_by_name(self) -> dict[str, Node]:
        return {node.name: node for node in self.nodes}

    @cached_property
    def used(self) -> dict[str, dict[str, int]]:
        """Node name -> sum of effective requests of its active pods (plus one `pods` each)."""
        used: dict[str, dict[str, int]] = {node.name: {} for node in self.nodes}
        for pod in self.pods:
            if not pod.active:
                continue
            bucket = used.get(pod.node)  # type: ignore[arg-type]
            if bucket is None:
                continue
            for name, amount in pod.requests.items():
                bucket[name] = bucket.get(name, 0) + amount
            bucket[PODS] = bucket.get(PODS, 0) + 1000
        return used

    @cached_property
    def free(self) -> dict[str, dict[str, int]]:
        """Node name -> allocatable minus used, clamped at zero (a node that lost a GPU is full)."""
        out: dict[str, dict[str, int]] = {}
        for node in self.nodes:
            used = self.used[node.name]
            free = dict(node.allocatable)
            for name, amount in used.items():
                free[name] = max(free.get(name, 0) - amount, 0)
            out[node.name] = free
        return out
