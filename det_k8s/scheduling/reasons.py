"""Building `Reason` data for groups that wait or are rejected (the text is `explain.describe`'s job).

A waiting reason names the nodes that matter (the largest free blocks of the resource a pod
is sized by), the resource that is short, the nodes excluded and why, and the groups ahead.
Everything here reads the pass's state; nothing changes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from .capacity import FreeIndex
from .fit import SHOWN_NODES, Fitter, Limits, Shape
from .model import PodGroup, Reason, ReasonCode

SHOWN_AHEAD = 3
_LIMIT_SCAN = 64  # nodes inspected to name a limiting resource other than the key resource


def excluded(fitter: Fitter, shape: Shape, limits: Limits) -> tuple[tuple[str, int], ...]:
    eligibility = fitter.nodes.eligible(shape.klass, shape.constraints)
    causes = list(eligibility.excluded)
    if limits.without_key and shape.key != "pods":
        causes.append((f"no {shape.key}", limits.without_key))
    return tuple(causes)


def rejection(group: PodGroup, shape: Shape, limits: Limits, fitter: Fitter, code: ReasonCode) -> Reason:
    """The group can never fit the eligible nodes (or there are none)."""
    members = fitter.nodes.members(shape.klass, shape.constraints, shape.key)
    short = limits.limiting(shape.pods, shape.key)
    return Reason(
        code=code, pods=group.size, per_pod=shape.request, resource=shape.key,
        needed=shape.amount * shape.pods, cluster_total=limits.key_total, fits_at_most=limits.max_pods,
        largest_free=limits.largest, limiting=short, eligible_nodes=len(members),
        excluded=excluded(fitter, shape, limits),
    )


def _limiting(index: FreeIndex, fitter: Fitter, shape: Shape) -> str:
    """The key resource when it alone is short, else the first other resource short on a node."""
    if index.key_bound(shape.amount) < shape.pods:
        return shape.key
    free_of = fitter.capacity.free
    for value, node in islice(index.ascending(shape.amount), _LIMIT_SCAN):
        free = free_of[node]
        by_key = value // shape.amount
        for name, amount in shape.demand:
            if free.get(name, 0) // amount < by_key:
                return name
    return shape.key


def waiting(group: PodGroup, shapes: Sequence[Shape], fitter: Fitter, code: ReasonCode, *,
            ahead: Sequence[PodGroup], reserved_for: PodGroup | None = None,
            reserved_nodes: tuple[str, ...] = (), preemptible: int | None = None, detail: str = "") -> Reason:
    """Why a group that fits the cluster waits now."""
    shape = shapes[0]
    index = fitter.index(shape)
    eligibility = fitter.nodes.eligible(shape.klass, shape.constraints)
    limits = fitter.nodes.limits(shape.klass, eligibility, shape.demand, shape.key)
    largest = tuple((node, max(value, 0)) for value, node in islice(index.descending(), SHOWN_NODES))
    return Reason(
        code=code, pods=group.size, per_pod=shape.request, resource=shape.key,
        needed=sum(s.amount * s.pods for s in shapes if s.key == shape.key),
        cluster_total=limits.key_total, free_total=index.key_sum, fits_at_most=index.total(shape.demand),
        largest_free=largest, limiting=_limiting(index, fitter, shape), eligible_nodes=len(index.members),
        excluded=excluded(fitter, shape, limits),
        ahead=tuple(g.experiment for g in ahead[:SHOWN_AHEAD]),
        ahead_ids=tuple(g.id for g in ahead[:SHOWN_AHEAD]),
        ahead_count=len(ahead), reserved_for=reserved_for.experiment if reserved_for else None,
        reserved_nodes=reserved_nodes, preemptible=preemptible, detail=detail,
    )
