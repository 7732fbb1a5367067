"""One human line from a `Reason`, and the same as data for `-o json`.

The line answers "why is it pending?" in the order a person checks: the ask; whether it can ever
fit ("never fits" is not "waiting"); the short resource on its eligible nodes, in that resource's
own unit (free, in use, reserved; the largest free blocks, only nodes with some free); who holds
it; nodes inter-pod rules refused and nodes excluded, by cause; who is ahead; whether preemption
would start it.

The Determined master rewrites pod event messages containing "nodes are available" (kube-scheduler's
phrase); a line never contains it, so the master passes ours to the trial log as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..cluster.model import Resources
from ..cluster.quota import amount as quota_amount
from ..quantity import format_milli
from .model import DraHold, Lent, QueueHold, QuotaHold, Reason, ReasonCode
from .queues import unit


def amount(resource: str, milli: int) -> str:
    return format_milli(resource, milli)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _ask(reason: Reason) -> str:
    key = reason.key or reason.resource
    per_pod = reason.per_pod.get(key, 0)
    text = f"needs {_plural(reason.pods, 'pod')} x {amount(key, per_pod)} {key}"
    extra = reason.limiting if reason.limiting and reason.limiting != key else None
    if extra and extra in reason.per_pod:
        text += f" + {amount(extra, reason.per_pod[extra])} {extra}"
    return text


def _free(reason: Reason) -> str:
    """The short resource on the eligible nodes: free, in use, reserved, and the largest free blocks."""
    resource = reason.resource
    total = amount(resource, reason.cluster_total)
    where = _plural(reason.eligible_nodes, "eligible node")
    held = [f"{amount(resource, reason.in_use)} in use"]
    if reason.reserved:
        held.append(f"{amount(resource, reason.reserved)} reserved"
                    + (f" for {reason.reserved_for}" if reason.reserved_for else ""))
    if reason.free_total <= 0:
        text = f"no free {resource} on its {where} ({total} allocatable: {', '.join(held)})"
    else:
        text = (f"{amount(resource, reason.free_total)} of {total} {resource} free on its {where} "
                f"({', '.join(held)})")
    if reason.largest_free:
        text += "; largest free blocks: " + ", ".join(f"{node} {amount(resource, free)}"
                                                     for node, free in reason.largest_free)
    if reason.limiting and reason.limiting != (reason.key or resource):
        text += f" (limiting: {reason.limiting})"
    return text


def _holders(reason: Reason) -> str | None:
    if not reason.holders:
        return None
    names = []
    for kind, name, milli in reason.holders:
        who = {"group": name, "pods": f"pods in {name}", "planned": "this plan's placements"}.get(kind, name)
        names.append(f"{who} {amount(reason.resource, milli)}")
    return "held by " + ", ".join(names)


def _blocked(reason: Reason) -> str | None:
    if not reason.blocked:
        return None
    total = sum(count for _, count in reason.blocked)
    causes = ", ".join(f"{count} {cause}" for cause, count in reason.blocked)
    return f"{_plural(total, 'node')} with room refused by pod rules: {causes}"


def _excluded(reason: Reason) -> str | None:
    if not reason.excluded:
        return None
    total = sum(count for _, count in reason.excluded)
    causes = ", ".join(f"{count} {cause}" for cause, count in reason.excluded)
    return f"{_plural(total, 'node')} excluded: {causes}"


def _ahead(reason: Reason) -> str | None:
    if not reason.ahead_count:
        return None
    names = ", ".join(reason.ahead) + (", ..." if reason.ahead_count > len(reason.ahead) else "")
    return f"{_plural(reason.ahead_count, 'group')} ahead: {names}"


def _preemption(reason: Reason) -> str | None:
    what = reason.preemption
    if what == "would-start":
        return (f"preemption (--preemption) would start it by evicting lower-priority groups of this queue "
                f"({reason.preemptible} could be evicted)")
    if what == "none-lower":
        return "preemption: no lower-priority group in this queue to evict"
    if what == "not-enough":
        return (f"preemption: evicting the {_plural(reason.preemptible or 0, 'lower-priority group')} of this queue "
                "would not free enough")
    if what == "not-for-pod-rules":
        return ("preemption: not used for groups with pod affinity or topology spread (their rules would be "
                "judged without the victims)")
    return None


def _never(reason: Reason) -> str:
    resource = reason.resource
    needed, total = amount(resource, reason.needed), amount(resource, reason.cluster_total)
    per_pod = reason.per_pod.get(resource, 0)
    where = _plural(reason.eligible_nodes, "eligible node")
    if reason.code is ReasonCode.EXCEEDS_DOMAIN and reason.topology:
        key, domain, pods = reason.topology
        best = f"{domain} holds at most {pods} of its {reason.pods} pods" if domain else f"no node has a {key} label"
        return (f"never fits one {key} ({_ask(reason)}), which the topology policy requires; "
                f"the largest, {best}" if domain else f"never fits: {best}, which the topology policy requires")
    if reason.blocked or reason.detail:
        causes = ", ".join(f"{count} {cause}" for cause, count in reason.blocked) or "no node"
        return (f"never fits this cluster: {_ask(reason)}, and even with only DaemonSet and static pods running, "
                f"pod {reason.detail} finds no node its rules allow ({causes})")
    if reason.cluster_total < reason.needed:
        return (f"never fits this cluster: needs {needed} {resource} ({_plural(reason.pods, 'pod')} x "
                f"{amount(resource, per_pod)}), cluster has {total} on {where}")
    largest = ", ".join(f"{node} {amount(resource, size)}" for node, size in reason.largest_free) or "none"
    if reason.fits_at_most == 0:
        return (f"never fits this cluster: each pod needs {_request(reason.per_pod)}, more than any eligible node "
                f"offers (limiting: {resource}; largest nodes: {largest})")
    most = _plural(reason.fits_at_most or 0, "such pod")
    return (f"never fits this cluster: {_ask(reason)}, but its {where} hold at most {most} "
            f"(limiting: {resource}; {total} {resource} in all; largest nodes: {largest})")


def _quota(hold: QuotaHold) -> str:
    """`namespace team-a: quota gpu-quota: requests.nvidia.com/gpu 8 of 8 used, the group needs 4`."""
    used, hard, needs = (quota_amount(hold.resource, n) for n in (hold.used, hold.hard, hold.needs))
    text = f"namespace {hold.namespace}: quota {hold.quota}: {hold.resource} {used} of {hard} used, the group needs {needs}"
    if hold.needs > hold.hard:
        text += " (more than the quota allows in all)"
    return text


def _queue(hold: QueueHold) -> str:
    """`queue nlp: 48 of 48 GPUs (its limit), the group needs 8`; a parent's: `queue research (above nlp): ...`."""
    if hold.bound == "lendingLimit":
        return (f"queue {hold.queue} keeps {unit(hold.resource, hold.used)} it does not lend (its lendingLimit) "
                f"of the {amount(hold.resource, hold.limit)} free, the group needs {amount(hold.resource, hold.needs)}")
    which = hold.queue if hold.queue == hold.leaf else f"{hold.queue} (above {hold.leaf})"
    bound = "its limit" if hold.bound == "limit" else "its guarantee and borrowingLimit"
    return (f"queue {which}: {amount(hold.resource, hold.used)} of {unit(hold.resource, hold.limit)} ({bound}), "
            f"the group needs {amount(hold.resource, hold.needs)}")


def reclaiming(lent: Sequence[Lent], stopping: Sequence[str] = ()) -> str:
    """`waiting to reclaim 8 GPUs lent to vision`, and the groups that must stop first when named."""
    text = "waiting to reclaim " + " and ".join(f"{unit(item.resource, item.amount)} lent to {item.lender}"
                                                for item in lent)
    if stopping:
        text += f" (group{'' if len(stopping) == 1 else 's'} now stopping: {', '.join(stopping)})"
    return text


def _unreachable(reason: Reason) -> str | None:
    """`queue nlp could reclaim 8 GPUs lent to vision, but det-k8s experiments of namespace team-v hold them ...`."""
    if not reason.unreachable:
        return None
    what = " and ".join(f"{unit(item.resource, item.amount)} lent to {item.lender}" for item in reason.unreachable)
    where = f"namespace{'' if len(reason.unreachable_in) == 1 else 's'} {', '.join(reason.unreachable_in)}"
    return (f"its queue could reclaim {what}, but det-k8s experiments of {where} hold them, and a pass evicts "
            "only its own namespace's experiments and the Determined master's trials: stop them there, or run "
            "the teams' experiments in one namespace")


ADVICE = ("run the device plugin on those nodes, or let kube-scheduler place such pods (another schedulerName, or "
          "Kubernetes' own gang scheduling)")


def _dra(hold: DraHold) -> str:
    """Why DRA keeps the group from det-k8s's nodes, and what the admin can do."""
    if hold.claims:
        return (f"its pods ask for ResourceClaims ({', '.join(hold.claims)}), which only kube-scheduler allocates; "
                "det-k8s neither binds nor pins such pods: let kube-scheduler place them (another schedulerName, or "
                "Kubernetes' own gang scheduling)")
    through = f"DeviceClass {hold.device_class}" if hold.device_class else "a DeviceClass"
    return (f"{_plural(hold.nodes, 'node')} serve {hold.resource} through DRA ({through}, {hold.devices} devices), "
            f"where only kube-scheduler can allocate its claim, so det-k8s places it only on nodes whose device "
            f"plugin serves {hold.resource}; to use them: {ADVICE}")


def _request(request: Resources) -> str:
    return " + ".join(f"{amount(name, value)} {name}" for name, value in sorted(request.items())) or "nothing"


def describe(reason: Reason) -> str:
    """One line for a person, e.g. `needs 4 pods x 4 nvidia.com/gpu; 4 of 16 nvidia.com/gpu free ...`."""
    code = reason.code
    if code in (ReasonCode.NOT_DIVISIBLE, ReasonCode.INVALID):
        return reason.detail
    parts: list[str | None]
    if code is ReasonCode.DRA and reason.dra is not None:
        hold = reason.dra
        if hold.claims or not hold.was:
            return "; ".join(part for part in (_ask(reason), _dra(hold), _ahead(reason)) if part)
        before = replace(reason, code=ReasonCode(hold.was), dra=None)
        tail = (describe(before).replace("never fits this cluster", "never fits the device-plugin nodes")
                .replace("; with --autoscaling it would wait for nodes instead", ""))
        return f"{_dra(hold)}; {tail}"
    if code is ReasonCode.NO_ELIGIBLE_NODES:
        parts = ["never fits this cluster: no node can run its pods", _excluded(reason)]
    elif code in (ReasonCode.EXCEEDS_CLUSTER, ReasonCode.EXCEEDS_DOMAIN):
        parts = [_never(reason), _excluded(reason), "with --autoscaling it would wait for nodes instead"]
    elif code is ReasonCode.WAITING_FOR_NODES:
        parts = [_never(reason).replace("never fits", "does not fit", 1),
                 "waiting for nodes to be added (det-k8s creates no pod until all fit, so a "
                 "pod-driven autoscaler is not triggered by it)", _ahead(reason)]
    elif code is ReasonCode.VOLUMES:
        parts = [_ask(reason), f"waiting for its volume: {reason.detail}", _ahead(reason)]
    elif code is ReasonCode.QUOTA and reason.quota is not None:
        parts = [_quota(reason.quota), _ask(reason), _ahead(reason)]
    elif code is ReasonCode.QUEUE_LIMIT and reason.queue is not None:
        parts = [_queue(reason.queue), _ask(reason), _ahead(reason)]
    else:
        parts = [_ask(reason), _free(reason)]
        if code is ReasonCode.TOPOLOGY and reason.topology:
            key, domain, pods = reason.topology
            parts.append(f"it fits only across several {key} domains and the topology policy requires one "
                         f"(the most in one: {domain}, {pods} of {reason.pods} pods)")
        elif code is ReasonCode.RESERVING:
            parts.append(f"reserved {', '.join(reason.reserved_nodes)} for it: smaller groups will not be "
                         "placed there until it runs")
        elif code is ReasonCode.BEHIND_RESERVATION:
            parts.append(f"fits only on nodes reserved for {reason.reserved_for} "
                         f"({', '.join(reason.reserved_nodes)}); starting here would delay it")
        elif code is ReasonCode.STRICT_ORDER:
            parts.append(f"backfill is off and {reason.detail} waits ahead of it")
        parts += [_unreachable(reason), _holders(reason), _blocked(reason), _excluded(reason), _ahead(reason)]
        if code is not ReasonCode.STRICT_ORDER:
            parts.append(_preemption(reason))
        if reason.dra is not None:
            parts.append(_dra(reason.dra))
    return "; ".join(part for part in parts if part)


def to_dict(reason: Reason) -> dict[str, Any]:
    """The reason as data (`det-k8s plan -o json`): every number the line is made of, in plain units."""
    resource = reason.resource

    def unit(milli: int) -> str:
        return amount(resource, milli)

    data: dict[str, Any] = {
        "code": str(reason.code),
        "line": describe(reason),
        "never_fits": reason.never_fits,
        "ask": {"pods": reason.pods, "per_pod": {name: amount(name, v) for name, v in sorted(reason.per_pod.items())}},
        "resource": resource,
        "limiting": reason.limiting,
    }
    if reason.code not in (ReasonCode.NOT_DIVISIBLE, ReasonCode.INVALID, ReasonCode.QUEUE_LIMIT):
        data["eligible_nodes"] = reason.eligible_nodes
        data["excluded"] = [{"cause": cause, "nodes": n} for cause, n in reason.excluded]
        data["fits_at_most"] = reason.fits_at_most
        if reason.never_fits:
            data["capacity"] = {"needed": unit(reason.needed), "lasting_allocatable": unit(reason.cluster_total)}
            data["largest_nodes"] = [{"node": node, resource: unit(v)} for node, v in reason.largest_free]
        else:
            data["capacity"] = {"needed": unit(reason.needed), "allocatable": unit(reason.cluster_total),
                                "in_use": unit(reason.in_use), "reserved": unit(reason.reserved),
                                "free": unit(reason.free_total)}
            data["largest_free"] = [{"node": node, resource: unit(v)} for node, v in reason.largest_free]
            data["held_by"] = [{"kind": kind, "name": name, resource: unit(v)} for kind, name, v in reason.holders]
        data["refused_by_pod_rules"] = [{"cause": cause, "nodes": n} for cause, n in reason.blocked]
        data["ahead"] = {"count": reason.ahead_count, "first": list(reason.ahead), "ids": list(reason.ahead_ids)}
        if reason.topology:
            key, domain, pods = reason.topology
            data["topology"] = {"key": key, "best_domain": domain, "pods_there": pods}
        if reason.reserved_nodes:
            data["reservation"] = {"for": reason.reserved_for, "nodes": list(reason.reserved_nodes)}
        data["preemption"] = {"outcome": reason.preemption or None, "lower_priority_groups": reason.preemptible,
                              "would_start": reason.preemption_would_start}
        data["autoscaling_would_help"] = reason.never_fits and reason.code is not ReasonCode.NO_ELIGIBLE_NODES
    if reason.quota is not None:
        hold = reason.quota
        data["quota"] = {"namespace": hold.namespace, "name": hold.quota, "resource": hold.resource,
                         "used": quota_amount(hold.resource, hold.used), "hard": quota_amount(hold.resource, hold.hard),
                         "needs": quota_amount(hold.resource, hold.needs)}
    if reason.code is ReasonCode.QUEUE_LIMIT:  # a queue holds it, not the cluster's capacity: that is not shown
        data["ahead"] = {"count": reason.ahead_count, "first": list(reason.ahead), "ids": list(reason.ahead_ids)}
    if reason.queue is not None:
        held = reason.queue
        data["queue"] = {"queue": held.queue, "leaf": held.leaf, "resource": held.resource,
                         "used": amount(held.resource, held.used), "limit": amount(held.resource, held.limit),
                         "needs": amount(held.resource, held.needs), "bound": held.bound}
    if reason.unreachable:
        data["unreachable_reclaim"] = {"namespaces": list(reason.unreachable_in), "lent": [
            {"to": item.lender, "resource": item.resource, "amount": amount(item.resource, item.amount)}
            for item in reason.unreachable]}
    if reason.dra is not None:
        held_dra = reason.dra
        data["dra"] = {"resource": held_dra.resource or None, "deviceClass": held_dra.device_class or None,
                       "nodes": held_dra.nodes, "devices": held_dra.devices, "claims": list(held_dra.claims),
                       "without_dra": held_dra.was or None}
    if reason.detail:
        data["detail"] = reason.detail
    return data
