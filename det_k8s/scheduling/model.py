"""The scheduling core's vocabulary: what is asked, what runs, the rules, and the answer.

Everything is a frozen dataclass of plain values so a plan can be compared, printed, cached and
sent to another process. Resources are integer milli-units (see `det_k8s.cluster.model`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from ..cluster.model import GPU, NO_CONSTRAINTS, RUNTIME_CLASS_MERGE, Constraints, Pod, Resources
from ..cluster.quota import QuotaFacts, facts_from_requests

if TYPE_CHECKING:
    from .queues import QueueTree

DEFAULT_PRIORITY = 50  # Determined on Kubernetes: higher is more important, 50 when unset
DEFAULT_RESERVE_AFTER = 300.0  # seconds a group waits before the starvation guard reserves nodes for it
ZONE = "topology.kubernetes.io/zone"  # the default topology a group is kept within when it fits
PLACEMENTS = ("auto", "native", "det-k8s")  # who places a released group's pods (live/native.py)


def total_of(requests: Iterable[Resources]) -> dict[str, int]:
    """The sum of several pods' requests."""
    total: dict[str, int] = {}
    for request in requests:
        for name, amount in request.items():
            total[name] = total.get(name, 0) + amount
    return total


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod of a group: its name, rank, effective request and where it may run.

    `labels` and `namespace` are the pod's own (the namespace its group's queue is in; "" means
    `default`): inter-pod rules match them (other pods' anti-affinity, spread selectors) and its
    volume claims are looked up there. `from_pod` builds one from a pod read from the cluster.
    `admitted`: the pod exists, so the API server's admission has had its say already (the tolerations
    and RuntimeClass scheduling it adds are in its spec); planning adds nothing to it, and its
    namespace's ResourceQuotas count it already. `quota`: what quota admission will read of it
    (usage with limits, scopes; `cluster/quota.py`), None when only its requests are known.
    """

    name: str
    rank: int
    requests: Resources
    constraints: Constraints = NO_CONSTRAINTS
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace: str = ""
    admitted: bool = False
    quota: QuotaFacts | None = None

    @property
    def quota_facts(self) -> QuotaFacts:
        return self.quota if self.quota is not None else facts_from_requests(self.requests)

    @classmethod
    def from_pod(cls, pod: Pod, rank: int) -> PodRequest:
        """A queued pod from a pod object that exists already (e.g. one the Determined master created)."""
        constraints = pod.constraints
        unmodelled = tuple(what for what in constraints.unmodelled if not what.startswith(RUNTIME_CLASS_MERGE))
        if unmodelled != constraints.unmodelled:  # admission merged the RuntimeClass's scheduling into the spec
            constraints = replace(constraints, unmodelled=unmodelled)
        return cls(pod.name, rank, pod.requests, constraints, pod.labels, pod.namespace, admitted=True)


@dataclass(frozen=True)
class PodGroup:
    """A queued task: all of its pods run together or none does."""

    id: str
    experiment: str
    user: str
    priority: int
    submitted_at: str
    sequence: int
    pods: tuple[PodRequest, ...]
    slots: int = 0  # resources.slots_per_trial

    @property
    def size(self) -> int:
        return len(self.pods)

    @property
    def slots_per_pod(self) -> int:
        return self.slots // len(self.pods) if self.pods else 0

    @property
    def total_request(self) -> dict[str, int]:
        return total_of(pod.requests for pod in self.pods)


class Lent(NamedTuple):
    """What a reclaiming group takes back from one queue that borrowed it: `amount` milli-units of `resource` lent
    by the group's leaf queue to `lender`'s groups (`lender` is the victims' leaf queue)."""

    lender: str
    resource: str
    amount: int


class QuotaHold(NamedTuple):
    """A ResourceQuota that would refuse a pod of the group: `resource` has `used` of `hard` in use (milli-units,
    this pass's placements included) and the group's pods would add `needs`."""

    namespace: str
    quota: str
    resource: str
    used: int
    hard: int
    needs: int


class QueueHold(NamedTuple):
    """A queue whose limit the group would exceed: `queue` (on the path of the group's leaf queue `leaf`) has
    `used` of its `limit` of `resource` in use (milli-units, this pass's placements included); the group asks
    `needs`."""

    queue: str
    leaf: str
    resource: str
    used: int
    limit: int
    needs: int
    bound: str = "limit"  # or "borrowingLimit" (`limit` is then its guarantee plus it), or "lendingLimit": `queue`
    # keeps `used` of the cluster's free `limit` it does not lend (the group may borrow only what is free beyond it)


class DraHold(NamedTuple):
    """What Dynamic Resource Allocation would have to allocate for the group, which det-k8s does not do
    (`cluster/dra.py`): its pods' `spec.resourceClaims` (`claims`), or a resource it asks (`resource`) that a
    DeviceClass (`device_class`) serves through DRA on `nodes` of its eligible nodes (`devices` devices there).
    `was`: the code the reason would have without DRA ("" for claims)."""

    resource: str = ""
    device_class: str = ""
    nodes: int = 0
    devices: int = 0
    claims: tuple[str, ...] = ()
    was: str = ""


class RunningPod(NamedTuple):
    name: str
    node: str
    requests: Resources


@dataclass(frozen=True)
class RunningGroup:
    """A det-k8s group whose pods hold resources now (read back from pod labels)."""

    id: str
    experiment: str
    user: str
    priority: int
    pods: tuple[RunningPod, ...]
    started_at: str = ""
    terminating: bool = False  # a pod is being deleted: the group is already leaving, never a victim
    size: int = 0  # pods the group was created with (det-k8s.io/size); fewer active pods means lost pods
    preemptible: bool = True  # False: never a victim (the master's commands and notebooks cannot checkpoint)

    @property
    def total_request(self) -> dict[str, int]:
        return total_of(pod.requests for pod in self.pods)


@dataclass(frozen=True)
class Policy:
    """How one pass decides.

    `weights` are fair-share weights per user (default `default_weight`). `reservations` is the
    starvation guard: the first group that fits the cluster but not its free capacity, and has
    waited at least `reserve_after` seconds since it was submitted, reserves nodes that smaller
    groups may not take. Starving takes time: a group that has just arrived reserves nothing, so
    capacity is not held idle for it while it may still fit on the next pass (0 reserves at once).
    `backfill=False` is strict order: nothing is placed after the first group that has to wait.

    `topology_key` is the node label whose values are the cluster's topology domains (zones by
    default; a rack or NVLink-domain label works alike, "" turns it off): a group of several pods
    is kept within one domain when it fits there, and with `topology_required` only then placed.
    `extended_resource_toleration` says whether the API server runs the ExtendedResourceToleration
    admission plugin (pods asking for `nvidia.com/gpu` get a toleration of `nvidia.com/gpu`
    NoSchedule taints); None detects it from the snapshot (`admission.py`). `queues`: the team
    queues (`queues.py`); None: no queue limits. `placement` says who places det-k8s's own groups once a pass
    releases them (`live/native.py`): `det-k8s` pins each pod to the planned node, `native` hands the group to
    kube-scheduler as a gang PodGroup, `auto` is native where the cluster serves the PodGroup API. It does not
    change the plan.
    """

    preemption: bool = False
    weights: Mapping[str, float] = field(default_factory=dict)
    autoscaling: bool = False
    backfill: bool = True
    reservations: bool = True
    default_weight: float = 1.0
    reserve_after: float = DEFAULT_RESERVE_AFTER
    topology_key: str = ZONE
    topology_required: bool = False
    extended_resource_toleration: bool | None = None
    queues: QueueTree | None = None
    placement: str = "auto"

    def weight(self, user: str) -> float:
        return float(self.weights.get(user, self.default_weight))


class ReasonCode(StrEnum):
    """Why a group is not placed. Rejected codes never change by waiting; the others may."""

    NOT_DIVISIBLE = "not-divisible"          # rejected: slots_per_trial vs maxSlotsPerPod
    INVALID = "invalid"                      # rejected: the group cannot be built at all
    NO_ELIGIBLE_NODES = "no-eligible-nodes"  # rejected: every node excluded by taint/selector/state
    EXCEEDS_CLUSTER = "exceeds-cluster"      # rejected: more than all eligible nodes hold
    EXCEEDS_DOMAIN = "exceeds-domain"        # rejected: the topology policy requires one domain; none holds it
    WAITING_FOR_NODES = "waiting-for-nodes"  # autoscaling: waits for nodes to be added
    INSUFFICIENT = "insufficient"            # waits: not enough free capacity now
    TOPOLOGY = "topology"                    # waits: fits only across domains, the policy requires one
    VOLUMES = "volumes"                      # waits: a volume it mounts is not there or not bound yet
    RESERVING = "reserving"                  # waits, holding a reservation of nodes
    BEHIND_RESERVATION = "behind-reservation"  # waits: would fit, but only on reserved nodes
    STRICT_ORDER = "strict-order"            # waits: backfill is off and a group ahead waits
    QUOTA = "quota"                          # waits: a namespace's ResourceQuota would refuse some of its pods
    QUEUE_LIMIT = "queue-limit"              # waits: a queue on its path would go over its limit
    DRA = "dra"                              # waits: it needs a ResourceClaim allocated, which det-k8s does not do

    @property
    def rejected(self) -> bool:
        return self in (ReasonCode.NOT_DIVISIBLE, ReasonCode.INVALID, ReasonCode.NO_ELIGIBLE_NODES,
                        ReasonCode.EXCEEDS_CLUSTER, ReasonCode.EXCEEDS_DOMAIN)


@dataclass(frozen=True)
class Reason:
    """Why a group waits or was rejected, as data; `explain.describe` turns it into one line.

    The ask: `pods` pods of `per_pod` each (`key`: the resource pods are sized by). The other
    amounts are milli-units of `resource`, the resource that is short (`limiting`; the key
    resource unless another one is shorter), over the group's eligible nodes: `cluster_total`
    allocatable, `free_total` free now, `reserved` free but held for a starved group, `in_use`
    held by pods (`cluster_total = in_use + reserved + free_total`, free counted at zero on nodes
    that are over-committed). `largest_free` lists the nodes with the most of it free (only nodes
    with some), `holders` who holds it (`("group", experiment, amount)`, `("pods", namespace,
    amount)`, `("planned", "this plan", amount)`), most first. For a rejected group the amounts
    describe allocatable minus what DaemonSet and static pods hold for good, and `fits_at_most` is
    how many such pods that could ever take; for a waiting one, how many fit now.
    `eligible_nodes` counts eligible nodes offering `key`; `excluded` counts the others by cause;
    `blocked` counts nodes that have room but that inter-pod rules (affinity, anti-affinity,
    spread, host ports) refuse at its turn. `topology` is (label, best domain, pods it holds) when
    the topology policy matters. `ahead` names the first waiting groups ahead (`ahead_count`
    counts them all). `preemptible` counts lower-priority groups it could evict and
    `preemption_would_start` whether evicting them would start it (None: not checked);
    `preemption` sums that up for the line (see `explain`). `quota` names the ResourceQuota that
    would refuse a pod of the group (code `quota`).
    """

    code: ReasonCode
    pods: int = 0
    per_pod: Resources = field(default_factory=dict)
    resource: str = GPU
    needed: int = 0
    cluster_total: int = 0
    free_total: int = 0
    fits_at_most: int | None = None
    largest_free: tuple[tuple[str, int], ...] = ()
    limiting: str | None = None
    eligible_nodes: int = 0
    excluded: tuple[tuple[str, int], ...] = ()
    ahead: tuple[str, ...] = ()
    ahead_ids: tuple[str, ...] = ()
    ahead_count: int = 0
    reserved_for: str | None = None
    reserved_nodes: tuple[str, ...] = ()
    preemptible: int | None = None
    detail: str = ""
    key: str = ""
    in_use: int = 0
    reserved: int = 0
    holders: tuple[tuple[str, str, int], ...] = ()
    blocked: tuple[tuple[str, int], ...] = ()
    topology: tuple[str, str, int] | None = None
    preemption_would_start: bool | None = None
    autoscaling: bool = False
    preemption: str = ""  # "would-start" (policy off), "none-lower", "not-enough", "not-for-pod-rules"; "" n/a
    quota: QuotaHold | None = None  # the ResourceQuota that holds the group back (code QUOTA)
    queue: QueueHold | None = None  # the queue whose limit holds the group back (code QUEUE_LIMIT)
    # what the group's queue could reclaim but the pass may not evict: det-k8s groups of other namespaces hold it
    unreachable: tuple[Lent, ...] = ()
    unreachable_in: tuple[str, ...] = ()  # ... their namespaces
    dra: DraHold | None = None  # what DRA would allocate for it (code DRA; with other codes: DRA nodes it cannot use)

    @property
    def never_fits(self) -> bool:
        """True when waiting cannot help: the cluster as it is can never hold the group."""
        return self.code.rejected or self.code is ReasonCode.WAITING_FOR_NODES


Placement = tuple[tuple[str, str], ...]  # ((pod name, node name), ...) in rank order


@dataclass(frozen=True)
class Plan:
    """The outcome of one pass. Every queued group is in exactly one of placements/waiting/rejected.

    `victims` are running group ids to delete, whole; `preempting[g]` are the groups whose pods group
    `g` waits for (its pods may be created once they are gone): its victims, and groups already
    terminating whose capacity it counts on. `reservations[g]` are the nodes held for the starved
    group `g`. `order` is the queue order the policy chose. `warnings` name what det-k8s could not
    check (a constraint it does not model, an object missing from the snapshot), with the pod.
    """

    placements: Mapping[str, Placement]
    waiting: Mapping[str, Reason]
    rejected: Mapping[str, Reason]
    victims: tuple[str, ...] = ()
    preempting: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    reservations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    reclaimed: tuple[str, ...] = ()  # the victims taken back for a queue below its guarantee (whatever their priority)
    reclaims: Mapping[str, tuple[Lent, ...]] = field(default_factory=dict)  # reclaiming group -> what, from whom

    def status(self, group_id: str) -> str:
        """`placed`, `queued` or `rejected` (the words `det-k8s plan -o json` uses)."""
        if group_id in self.placements:
            return "placed"
        if group_id in self.rejected:
            return "rejected"
        if group_id in self.waiting:
            return "queued"
        raise KeyError(group_id)

    def reason(self, group_id: str) -> Reason | None:
        return self.waiting.get(group_id) or self.rejected.get(group_id)
