"""Golden why-pending lines for the cases the issue found wrong, each line's numbers recomputed by the
independent model (`tests/support/kube_model.py`) from the same raw objects.

The issue: "16 in use" where 12 were free but reserved; the largest nodes shown in GPUs when CPU
was the limit; the allocatable total called "in use"; nodes with nothing free listed as the
largest free blocks; a gang that can never fit called "queued".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from det_k8s.scheduling.explain import describe, to_dict
from det_k8s.scheduling.model import Plan, Policy, Reason
from tests.support import kube_model as kube
from tests.support.kube_objects import GPU, HOST, node, plan, pod, queued, running, spec

NOW = datetime(2024, 1, 1, 1, tzinfo=UTC)
NO_TOPOLOGY = Policy(topology_key="")


def milli(value: Fraction) -> int:
    return int(value * 1000)


def model_numbers(objects: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], result: Plan,
                  resource: str, key: str = GPU) -> dict[str, Any]:
    """What the independent model says about the resource on the group's eligible nodes, right now."""
    cluster = kube.Cluster(objects)
    first = kube.admitted(pods[0], False)
    eligible = [n for n in cluster.nodes if cluster.node_refusal(first, n) is None
                and cluster.allocatable(n).get(key, 0) > 0]
    reserved = {n for nodes in result.reservations.values() for n in nodes}
    allocatable = sum((cluster.allocatable(n).get(resource, Fraction(0)) for n in eligible), Fraction(0))
    free = {n: max(cluster.free(n).get(resource, Fraction(0)), Fraction(0)) for n in eligible}
    open_free = sum((free[n] for n in eligible if n not in reserved), Fraction(0))
    held_reserved = sum((free[n] for n in eligible if n in reserved), Fraction(0))
    largest = sorted(((n, v) for n, v in free.items() if v > 0 and n not in reserved),
                     key=lambda item: (-item[1], eligible.index(item[0])))[:3]
    holders: Counter[tuple[str, str]] = Counter()
    for p, where in cluster.pods:
        if where in eligible:
            labels = p["metadata"].get("labels") or {}
            who = (("group", labels["det-k8s.io/experiment"]) if labels.get("app.kubernetes.io/managed-by") == "det-k8s"
                   else ("pods", p["metadata"].get("namespace", "default")))
            holders[who] += kube.requests(p["spec"]).get(resource, 0)
    return {"allocatable": milli(allocatable), "free": milli(open_free), "reserved": milli(held_reserved),
            "in_use": milli(allocatable - open_free - held_reserved),
            "largest": tuple((n, milli(v)) for n, v in largest), "eligible": len(eligible),
            "holders": tuple(sorted(((kind, name, milli(v)) for (kind, name), v in holders.items() if v),
                                    key=lambda row: (-row[2], row[0], row[1])))[:3]}


def lasting(objects: Sequence[Mapping[str, Any]], resource: str) -> int:
    """Allocatable minus what DaemonSet pods hold, over the nodes: what can ever be had."""
    cluster = kube.Cluster(objects)
    total = Fraction(0)
    for n in cluster.nodes:
        total += cluster.allocatable(n).get(resource, Fraction(0))
        for p, where in cluster.pods:
            owners = p["metadata"].get("ownerReferences") or ()
            if where == n and any(o.get("kind") == "DaemonSet" for o in owners):
                total -= kube.requests(p["spec"]).get(resource, 0)
    return milli(total)


def agree(reason: Reason, numbers: Mapping[str, Any]) -> None:
    assert (reason.cluster_total, reason.free_total, reason.reserved, reason.in_use) == (
        numbers["allocatable"], numbers["free"], numbers["reserved"], numbers["in_use"])
    assert reason.largest_free == numbers["largest"]
    assert reason.eligible_nodes == numbers["eligible"]
    assert reason.holders == numbers["holders"]


def test_free_but_reserved_is_not_in_use():
    objects = [node(f"n{i}", 4) for i in range(4)] + running("run", ["n0"], gpus=4)
    groups = {"starved": queued("starved", 4, spec(4)), "small": queued("small", 1, spec(4))}
    result = plan(objects, groups, Policy(reserve_after=0, topology_key=""), now=NOW)
    reason = result.waiting["small"]
    assert describe(reason) == (
        "needs 1 pod x 4 nvidia.com/gpu; no free nvidia.com/gpu on its 4 eligible nodes (16 allocatable: 4 in use, "
        "12 reserved for starved); fits only on nodes reserved for starved (n1, n2, n3, n0); starting here would "
        "delay it; held by run 4; 1 group ahead: starved")
    agree(reason, model_numbers(objects, groups["small"], result, GPU))


def test_the_largest_nodes_are_shown_in_the_limiting_resource():
    objects = [node("n0", 8, cpu="16"), node("n1", 8, cpu="16"),
               pod("agent-x", "kube-system", "n0", cpu="500m", owner="DaemonSet"),
               pod("agent-y", "kube-system", "n1", cpu="500m", owner="DaemonSet")]
    reason = plan(objects, {"g": queued("g", 3, spec(4, cpu="10"))}).rejected["g"]
    assert describe(reason) == (
        "never fits this cluster: needs 3 pods x 4 nvidia.com/gpu + 10 cpu, but its 2 eligible nodes hold at most "
        "2 such pods (limiting: cpu; 31 cpu in all; largest nodes: n0 15500m, n1 15500m); with --autoscaling it "
        "would wait for nodes instead")
    assert reason.cluster_total == lasting(objects, "cpu")
    assert dict(reason.largest_free) == {"n0": 15500, "n1": 15500}


def test_what_the_cluster_has_is_allocatable_and_what_pods_hold_is_in_use():
    objects = [node("n0", 4), node("n1", 4), pod("infer-0", "serving", "n0", gpus=4),
               pod("infer-1", "serving", "n1", gpus=4)]
    groups = {"g": queued("g", 1, spec(4))}
    result = plan(objects, groups)
    reason = result.waiting["g"]
    assert describe(reason) == ("needs 1 pod x 4 nvidia.com/gpu; no free nvidia.com/gpu on its 2 eligible nodes "
                                "(8 allocatable: 8 in use); held by pods in serving 8")
    agree(reason, model_numbers(objects, groups["g"], result, GPU))


def test_only_nodes_with_something_free_are_free_blocks():
    objects = [node("n0", 4), node("n1", 4), node("n2", 4), pod("a", "serving", "n0", gpus=4),
               pod("b", "serving", "n1", gpus=2), pod("c", "serving", "n2", gpus=3)]
    groups = {"g": queued("g", 1, spec(4))}
    result = plan(objects, groups)
    reason = result.waiting["g"]
    assert describe(reason) == ("needs 1 pod x 4 nvidia.com/gpu; 3 of 12 nvidia.com/gpu free on its 3 eligible "
                                "nodes (9 in use); largest free blocks: n1 2, n2 1; held by pods in serving 9")
    agree(reason, model_numbers(objects, groups["g"], result, GPU))


def test_cpu_as_the_limit_of_a_waiting_group_is_counted_in_cpu():
    objects = [node("n0", 8, cpu="16"), node("n1", 8, cpu="16"), pod("web-0", "apps", "n0", cpu="14"),
               pod("web-1", "apps", "n1", cpu="12")]
    groups = {"g": queued("g", 2, spec(2, cpu="6"))}
    result = plan(objects, groups)
    reason = result.waiting["g"]
    assert describe(reason) == ("needs 2 pods x 2 nvidia.com/gpu + 6 cpu; 6 of 32 cpu free on its 2 eligible nodes "
                                "(26 in use); largest free blocks: n1 4, n0 2 (limiting: cpu); held by pods in apps 26")
    agree(reason, model_numbers(objects, groups["g"], result, "cpu"))


def test_a_gang_its_own_rules_can_never_place_is_never_fits_not_queued():
    one_per_node = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"det-k8s.io/group": "g"}}, "topologyKey": HOST}]}}
    objects = [node("n0", 8), node("n1", 8), node("n2", 8)]
    groups = {"g": queued("g", 4, spec(2, affinity=one_per_node))}
    result = plan(objects, groups)
    reason = result.rejected["g"]
    assert describe(reason) == (
        "never fits this cluster: needs 4 pods x 2 nvidia.com/gpu, and even with only DaemonSet and static pods "
        "running, pod g-3 finds no node its rules allow (3 pod anti-affinity); with --autoscaling it would wait "
        "for nodes instead")
    cluster = kube.Cluster(objects)  # the model: three pods one per node, the fourth refused everywhere
    for pod_object, where in zip(groups["g"][:3], ["n0", "n1", "n2"], strict=True):
        cluster.add(pod_object, where)
    refusals = Counter(cluster.refusal(groups["g"][3], n) for n in cluster.nodes)
    assert refusals == Counter({"InterPodAffinity: anti-affinity": 3}) and reason.blocked == (("pod anti-affinity", 3),)
    assert to_dict(reason)["never_fits"] is True and result.status("g") == "rejected"


def test_capacity_daemonsets_hold_for_good_makes_a_gang_never_fit():
    objects = [node("n0", 0, cpu="8"), node("n1", 0, cpu="8"),
               pod("ds-0", "kube-system", "n0", cpu="200m", owner="DaemonSet"),
               pod("ds-1", "kube-system", "n1", cpu="200m", owner="DaemonSet")]
    reason = plan(objects, {"g": queued("g", 2, spec(0, cpu="8"))}).rejected["g"]
    assert describe(reason) == ("never fits this cluster: needs 16 cpu (2 pods x 8), cluster has 15600m on 2 eligible "
                                "nodes; with --autoscaling it would wait for nodes instead")
    assert reason.cluster_total == lasting(objects, "cpu")


def test_whether_preemption_would_start_it_is_said():
    objects = [node("n0", 8), node("n1", 8), *running("low", ["n0", "n1"], gpus=8, priority=10)]
    groups = {"g": queued("g", 1, spec(8), priority=90)}
    result = plan(objects, groups)
    reason = result.waiting["g"]
    assert describe(reason) == (
        "needs 1 pod x 8 nvidia.com/gpu; no free nvidia.com/gpu on its 2 eligible nodes (16 allocatable: 16 in use); "
        "held by low 16; preemption (--preemption) would start it by evicting lower-priority groups of this queue "
        "(1 could be evicted)")
    agree(reason, model_numbers(objects, groups["g"], result, GPU))
    data = to_dict(reason)
    assert data["preemption"] == {"outcome": "would-start", "lower_priority_groups": 1, "would_start": True}
    assert data["capacity"] == {"needed": "8", "allocatable": "16", "in_use": "16", "reserved": "0", "free": "0"}
    assert data["held_by"] == [{"kind": "group", "name": "low", GPU: "16"}]
