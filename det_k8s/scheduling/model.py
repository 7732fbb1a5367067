"""The scheduling core's vocabulary: what is asked, what runs, the rules, and the answer.

Everything is a frozen dataclass of plain values so a plan can be compared, printed, cached and
sent to another process. Resources are integer milli-units (see `det_k8s.cluster.model`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from ..cluster.model import GPU, NO_CONSTRAINTS, Constraints, Resources

DEFAULT_PRIORITY = 50  # Determined on Kubernetes: higher is more important, 50 when unset
DEFAULT_RESERVE_AFTER = 300.0  # seconds a group waits before the starvation guard reserves nodes for it


def total_of(requests: Iterable[Resources]) -> dict[str, int]:
    """The sum of several pods' requests."""
    total: dict[str, int] = {}
    for request in requests:
        for name, amount in request.items():
            total[name] = total.get(name, 0) + amount
    return total


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod of a group: its name, rank, effective request and where it may run."""

    name: str
    rank: int
    requests: Resources
    constraints: Constraints = NO_CONSTRAINTS


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
    """

    preemption: bool = False
    weights: Mapping[str, float] = field(default_factory=dict)
    autoscaling: bool = False
    backfill: bool = True
    reservations: bool = True
    default_weight: float = 1.0
    reserve_after: float = DEFAULT_RESERVE_AFTER

    def weight(self, user: str) -> float:
        return float(self.weights.get(user, self.default_weight))


class ReasonCode(StrEnum):
    """Why a group is not placed. Rejected codes never change by waiting; the others may."""

    NOT_DIVISIBLE = "not-divisible"          # rejected: slots_per_trial vs maxSlotsPerPod
    INVALID = "invalid"                      # rejected: the group cannot be built at all
    NO_ELIGIBLE_NODES = "no-eligible-nodes"  # rejected: every node excluded by taint/selector/state
    EXCEEDS_CLUSTER = "exceeds-cluster"      # rejected: more than all eligible nodes hold
    WAITING_FOR_NODES = "waiting-for-nodes"  # autoscaling: waits for nodes to be added
    INSUFFICIENT = "insufficient"            # waits: not enough free capacity now
    RESERVING = "reserving"                  # waits, holding a reservation of nodes
    BEHIND_RESERVATION = "behind-reservation"  # waits: would fit, but only on reserved nodes
    STRICT_ORDER = "strict-order"            # waits: backfill is off and a group ahead waits

    @property
    def rejected(self) -> bool:
        return self in (ReasonCode.NOT_DIVISIBLE, ReasonCode.INVALID, ReasonCode.NO_ELIGIBLE_NODES,
                        ReasonCode.EXCEEDS_CLUSTER)


@dataclass(frozen=True)
class Reason:
    """Why a group waits or was rejected, as data; `explain.describe` turns it into one line.

    Amounts are milli-units of `resource` (the resource a slot is made of, or the request's
    main resource). For a rejected group, `fits_at_most` (pods of this size) and `largest_free`
    (nodes, most first) describe the eligible nodes' allocatable; for a waiting group, their
    free capacity now. `eligible_nodes` counts eligible nodes that offer `resource` at all;
    `excluded` counts the others by cause. `ahead` names the first waiting groups ahead of this
    one (`ahead_count` counts them all).
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


Placement = tuple[tuple[str, str], ...]  # ((pod name, node name), ...) in rank order


@dataclass(frozen=True)
class Plan:
    """The outcome of one pass. Every queued group is in exactly one of placements/waiting/rejected.

    `victims` are running group ids to delete, whole; `preempting[g]` are the victims group `g`
    waits for (its pods may be created once their pods are gone). `reservations[g]` are the
    nodes held for the starved group `g`. `order` is the queue order the policy chose.
    """

    placements: Mapping[str, Placement]
    waiting: Mapping[str, Reason]
    rejected: Mapping[str, Reason]
    victims: tuple[str, ...] = ()
    preempting: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    order: tuple[str, ...] = ()
    reservations: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

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
