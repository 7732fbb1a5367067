"""What det-k8s knows of a cluster: nodes, pods, their resources and placement constraints.

Resources are integer milli-units per resource name (`cpu` 7910 = 7.91 cores, `memory` in
milli-bytes, `nvidia.com/gpu` 4000 = 4 GPUs, `pods` 1000 per pod), the same rounding
kube-scheduler uses, so sums and comparisons are exact and cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from .quota import ResourceQuota

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
    device_classes: tuple[DeviceClass, ...] = ()  # DRA (below), when "DeviceClass" is listed
    slices: tuple[DeviceSlice, ...] = ()  # DRA ResourceSlices, when "ResourceSlice" is listed

    @cached_property
    def devices(self) -> DeviceView:
        """Per node, the DRA devices the ResourceSlices publish, and what DRA serves where (below)."""
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


# -- Dynamic Resource Allocation ------------------------------------------------------------------------------------
#
# Dynamic Resource Allocation as det-k8s sees it: which nodes' devices a claim allocation would hand out.
#
# Kubernetes 1.34 made DRA GA (`resource.k8s.io/v1`); 1.37 made DRA-backed extended resources GA (KEP-5004,
# feature gate `DRAExtendedResource`, locked on). A DeviceClass with `spec.extendedResourceName` (or any class,
# under the implicit name `deviceclass.resource.kubernetes.io/<class>`) lets a pod ask `nvidia.com/gpu: 1` and get a
# device of that class through a ResourceClaim *the scheduler* creates and allocates, on every node whose
# allocatable does not list the resource (kube-scheduler's `shouldDelegateResourceToDRA`, noderesources/fit.go):
# the device plugin serves a node that lists it, DRA one that does not.
#
# det-k8s allocates no claims: a pod it binds (`pods/binding`) without one is refused by the kubelet, and capacity
# on a DRA node is not in its allocatable. So det-k8s only tells the two apart, per node: the devices each
# node's ResourceSlices publish (the newest generation of each pool), and which requested resource names a
# DeviceClass maps to devices on a node that does not list them. The scheduling core makes such groups wait with a
# reason that says so (`ReasonCode.DRA`), and the map counts those devices as DRA GPUs.
#
# Which devices a class selects is a CEL expression; det-k8s reads the common `device.driver == "<driver>"` form and
# otherwise takes the class to select every driver's devices (it cannot evaluate CEL), which only widens the
# nodes a refusal names, never a placement.
#
# The objects are read in read.py (`device_class_from_object`, `device_slice_from_object`).

API_VERSION = "resource.k8s.io/v1"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix
# The DRA drivers whose devices are GPUs (NVIDIA's k8s-dra-driver-gpu, AMD's k8s-gpu-dra-driver), for the map when
# no DeviceClass maps them to a GPU resource name.
GPU_DRIVERS = frozenset({"gpu.nvidia.com", "gpu.amd.com"})
GPU_RESOURCES = (GPU, AMD_GPU)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: its name, the extended resource name it serves (`spec.extendedResourceName`, "" when
    none) and the drivers its selectors name (None: not read from its CEL, so any driver's devices)."""

    name: str
    extended_resource: str = ""
    drivers: frozenset[str] | None = None

    def serves(self, resource: str) -> bool:
        """Does a pod's request of `resource` become a claim of this class (explicitly, or by the implicit name)?"""
        return resource == self.extended_resource or resource == IMPLICIT_PREFIX + self.name

    def selects(self, driver: str) -> bool:
        return self.drivers is None or driver in self.drivers


@dataclass(frozen=True, slots=True)
class DeviceSlice:
    """One ResourceSlice: the driver, the pool (name, generation, slices in it), where its devices are (a node
    by name, a node selector's terms, all nodes; per device when `perDeviceNodeSelection`), and how many."""

    name: str
    driver: str
    pool: str
    generation: int = 0
    node: str = ""
    node_terms: tuple[Term, ...] = ()  # spec.nodeSelector (ORed terms), when set
    all_nodes: bool = False
    devices: int = 0
    device_nodes: tuple[str, ...] = ()  # perDeviceNodeSelection: the node of each device that names one

    def on(self, node: Node) -> int:
        """How many of its devices are on `node`."""
        if self.node:
            return self.devices if self.node == node.name else 0
        if self.all_nodes:
            return self.devices
        if self.node_terms:
            return self.devices if any(term_matches(term, node) for term in self.node_terms) else 0
        return sum(1 for name in self.device_nodes if name == node.name)


def current(slices: Iterable[DeviceSlice]) -> tuple[DeviceSlice, ...]:
    """The slices of each pool's newest generation (older ones are being replaced: the scheduler ignores them)."""
    slices = tuple(slices)
    newest: dict[tuple[str, str], int] = {}
    for item in slices:
        key = (item.driver, item.pool)
        newest[key] = max(newest.get(key, item.generation), item.generation)
    return tuple(item for item in slices if item.generation == newest[(item.driver, item.pool)])


@dataclass(frozen=True)
class DeviceView:
    """Per node, the devices the cluster's ResourceSlices publish, and what DRA serves where."""

    classes: tuple[DeviceClass, ...]
    devices: Mapping[str, Mapping[str, int]]  # node -> driver -> devices
    allocatable: Mapping[str, Mapping[str, int]]  # node -> its allocatable (milli-units)

    def serving(self, resource: str) -> DeviceClass | None:
        """The DeviceClass a request of `resource` maps to (sorted by name; the API server keeps them apart)."""
        for klass in self.classes:
            if klass.serves(resource):
                return klass
        return None

    def dra_nodes(self, resource: str) -> dict[str, int]:
        """Nodes on which kube-scheduler would serve a request of `resource` through DRA (their allocatable lacks
        it, a DeviceClass maps it, and they hold devices of that class), with how many devices."""
        klass = self.serving(resource)
        if klass is None:
            return {}
        found = {}
        for node, drivers in self.devices.items():
            if self.allocatable.get(node, {}).get(resource, 0) > 0:
                continue  # the device plugin serves it there
            count = sum(n for driver, n in drivers.items() if klass.selects(driver))
            if count > 0:
                found[node] = count
        return found

    def gpus(self, node: str) -> int:
        """DRA GPUs on `node`: devices of a class that serves a GPU resource name, or of a known GPU driver."""
        drivers = self.devices.get(node, {})
        gpu_classes = [k for k in self.classes if k.extended_resource in GPU_RESOURCES]
        return sum(n for driver, n in drivers.items()
                   if driver in GPU_DRIVERS or any(k.drivers is not None and driver in k.drivers for k in gpu_classes))

    def gpu_class(self, node: str) -> str:
        """The DeviceClass (or driver) those GPUs are served through, for the map's legend."""
        drivers = self.devices.get(node, {})
        for klass in self.classes:
            if klass.extended_resource in GPU_RESOURCES and any(klass.selects(d) for d in drivers):
                return klass.name
        return next((d for d in sorted(drivers) if d in GPU_DRIVERS), "")


def device_view(nodes: Iterable[Node], classes: Iterable[DeviceClass], slices: Iterable[DeviceSlice]) -> DeviceView:
    nodes = tuple(nodes)
    names = {node.name for node in nodes}
    per_node: dict[str, dict[str, int]] = {}
    for item in current(slices):
        if not item.devices:
            continue
        if item.node:  # the common case: a driver's slice for its own node
            if item.node in names:
                drivers = per_node.setdefault(item.node, {})
                drivers[item.driver] = drivers.get(item.driver, 0) + item.devices
            continue
        for node in nodes:
            count = item.on(node)
            if count:
                drivers = per_node.setdefault(node.name, {})
                drivers[item.driver] = drivers.get(item.driver, 0) + count
    return DeviceView(tuple(sorted(classes, key=lambda k: k.name)), per_node,
                      {node.name: node.allocatable for node in nodes})
