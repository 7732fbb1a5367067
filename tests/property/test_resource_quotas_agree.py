"""det-k8s's plans against Kubernetes' ResourceQuota admission (`tests/support/quota_admission.py`, never importing det_k8s).

Random quotas (every pod form, scopes, used and hard amounts) and random groups on a cluster with room for most:
creating the placed groups' pods in plan order, one by one, quota admission takes every pod; a group waits for a
quota exactly when it would have a pod refused at its turn (the others wait for room). So no group is ever created
in part.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from det_k8s.cluster.quota import facts_from_spec
from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
from det_k8s.scheduling.model import PodGroup, PodRequest, Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from tests.support import quota_admission
from tests.support.kube_model import quantity
from tests.support.kube_objects import node

NAMESPACES = ("team-a", "team-b")
RESOURCES = {"requests.nvidia.com/gpu": (0, 16), "count/pods": (0, 8), "pods": (0, 8), "requests.cpu": (0, 12),
             "cpu": (0, 12), "limits.memory": (0, 16), "requests.memory": (0, 16), "limits.cpu": (0, 20)}
SCOPES = st.sampled_from([
    {}, {"scopes": ["NotTerminating"]}, {"scopes": ["Terminating"]}, {"scopes": ["BestEffort"]},
    {"scopes": ["NotBestEffort"]}, {"scopes": ["PriorityClass"]},
    {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}},
    {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}},
])


def _amount(resource: str, value: int) -> str:
    return f"{value}Gi" if "memory" in resource else str(value)


@st.composite
def quotas(draw: Any) -> list[dict[str, Any]]:
    found = []
    for i in range(draw(st.integers(0, 3))):
        names = draw(st.lists(st.sampled_from(sorted(RESOURCES)), min_size=1, max_size=3, unique=True))
        hard = {r: _amount(r, draw(st.integers(*RESOURCES[r]))) for r in names}
        used = {r: _amount(r, draw(st.integers(0, RESOURCES[r][1]))) for r in names}
        spec = {"hard": hard, **draw(SCOPES)}
        found.append({"apiVersion": "v1", "kind": "ResourceQuota",
                      "metadata": {"name": f"q{i}", "namespace": draw(st.sampled_from(NAMESPACES))},
                      "spec": spec, "status": {"hard": hard, "used": used}})
    return found


@st.composite
def bodies(draw: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    gpus = draw(st.integers(0, 4))
    if draw(st.booleans()):
        resources["requests"] = {"cpu": str(draw(st.integers(1, 3))), "memory": f"{draw(st.integers(1, 3))}Gi"}
    if draw(st.booleans()) or gpus:
        resources["limits"] = {"cpu": "4", "memory": "4Gi"} if draw(st.booleans()) else {}
        if gpus:
            resources["limits"]["nvidia.com/gpu"] = str(gpus)
    body: dict[str, Any] = {"containers": [{"name": "main", "image": "x", "resources": resources}]}
    klass = draw(st.sampled_from(["", "high", "low"]))
    if klass:
        body["priorityClassName"] = klass
    if draw(st.booleans()):
        body["activeDeadlineSeconds"] = 60
    return body


def _group(index: int, pods: int, body: dict[str, Any], namespace: str) -> tuple[PodGroup, list[dict[str, Any]]]:
    requests = effective_requests(body)
    raw = [{"metadata": {"name": f"g{index}-{rank}", "namespace": namespace}, "spec": body} for rank in range(pods)]
    members = tuple(PodRequest(p["metadata"]["name"], rank, requests, constraints_from_spec(body, namespace, {}), {},
                               namespace, quota=facts_from_spec(body, requests)) for rank, p in enumerate(raw))
    return PodGroup(f"g{index}", f"g{index}", "alice", 50, "2024-01-01T00:00:00Z", index, members), raw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(quotas(), st.lists(st.tuples(st.integers(1, 3), bodies(), st.sampled_from(NAMESPACES)), min_size=1, max_size=6))
def test_quota_admission_takes_every_pod_of_every_placed_group(objects, asked):
    nodes = [node(f"n{i}", 8, cpu="64", memory="256Gi") for i in range(12)]
    groups = [_group(i, pods, body, ns) for i, (pods, body, ns) in enumerate(asked)]
    snapshot = snapshot_from_objects([{"kind": "List", "items": [*nodes, *objects]}])
    plan = schedule(snapshot, [g for g, _ in groups], Policy())
    assert plan == schedule(snapshot, [g for g, _ in reversed(groups)], Policy())
    raw = {g.id: pods for g, pods in groups}
    live = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in objects}
    for group_id in plan.order:
        pods = raw[group_id]
        namespace = pods[0]["metadata"]["namespace"]
        mine = [q for (ns, _), q in sorted(live.items()) if ns == namespace]
        if group_id in plan.placements:
            for pod in pods:  # created one by one, as the live pass does
                assert quota_admission.refusal(mine, pod) is None, (group_id, pod["metadata"]["name"])
                for q in mine:
                    used = q["status"]["used"]
                    for k, v in quota_admission.charge(q, pod).items():
                        used[k] = quota_admission.text(quantity(used.get(k, "0")) + v)
        else:
            trial = [{**q, "status": {**q["status"], "used": dict(q["status"]["used"])}} for q in mine]
            refused = False
            for pod in pods:
                if quota_admission.refusal(trial, pod) is not None:
                    refused = True
                    break
                for q in trial:
                    for k, v in quota_admission.charge(q, pod).items():
                        q["status"]["used"][k] = quota_admission.text(
                            quantity(q["status"]["used"].get(k, "0")) + Fraction(v))
            assert refused is (plan.waiting[group_id].code is ReasonCode.QUOTA), group_id  # else it waits for room
