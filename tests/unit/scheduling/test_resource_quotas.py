"""Kubernetes ResourceQuotas in the pass: a group starts only when quota admission takes every pod of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from det_k8s.cluster.quota import facts_from_spec, quota_from_object
from det_k8s.cluster.read import constraints_from_spec, effective_requests, snapshot_from_objects
from det_k8s.scheduling.explain import describe, to_dict
from det_k8s.scheduling.model import Plan, PodGroup, PodRequest, Policy, ReasonCode
from det_k8s.scheduling.plan import schedule
from det_k8s.scheduling.serialize import group_from_dict, group_to_dict
from tests.support.kube_objects import GPU, node, spec

NS = "team-a"


def quota(name: str, hard: Mapping[str, str], used: Mapping[str, str] | None = None, *, namespace: str = NS,
          scopes: Sequence[str] = (), selector: Sequence[Mapping[str, Any]] = (), status: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"hard": dict(hard)}
    if scopes:
        body["scopes"] = list(scopes)
    if selector:
        body["scopeSelector"] = {"matchExpressions": [dict(s) for s in selector]}
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ResourceQuota",
                           "metadata": {"name": name, "namespace": namespace}, "spec": body}
    if status:
        obj["status"] = {"hard": dict(hard), "used": dict(used or {})}
    return obj


def group(name: str, pods: int, body: Mapping[str, Any], *, namespace: str = NS, sequence: int = 0,
          admitted: bool = False) -> PodGroup:
    requests = effective_requests(body)
    members = tuple(PodRequest(f"{name}-{rank}", rank, requests, constraints_from_spec(body, namespace, {}), {},
                               namespace, admitted=admitted, quota=None if admitted else facts_from_spec(body, requests))
                    for rank in range(pods))
    return PodGroup(name, name, "alice", 50, "2024-01-01T00:00:00Z", sequence, members)


def plan(objects: Sequence[Mapping[str, Any]], *groups: PodGroup, policy: Policy | None = None) -> Plan:
    snapshot = snapshot_from_objects([{"kind": "List", "items": list(objects)}])
    return schedule(snapshot, list(groups), policy or Policy())


NODES = [node("gpu-0", 4), node("gpu-1", 4), node("gpu-2", 4), node("gpu-3", 4)]


def test_a_full_quota_holds_the_group_back_and_says_so():
    result = plan([*NODES, quota("gpu-quota", {"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "8"})],
                  group("a", 1, spec(4)))
    reason = result.waiting["a"]
    assert reason.code is ReasonCode.QUOTA
    assert describe(reason).startswith(
        "namespace team-a: quota gpu-quota: requests.nvidia.com/gpu 8 of 8 used, the group needs 4; "
        "needs 1 pod x 4 nvidia.com/gpu")
    assert to_dict(reason)["quota"] == {"namespace": NS, "name": "gpu-quota", "resource": "requests.nvidia.com/gpu",
                                        "used": "8", "hard": "8", "needs": "4"}


def test_a_group_the_quota_would_refuse_part_way_never_starts():
    """Three pods of 4 GPUs under a quota of 8: the API server would take two and refuse the third."""
    objects = [*NODES, quota("gpu-quota", {"requests.nvidia.com/gpu": "8"})]
    result = plan(objects, group("a", 3, spec(4)))
    assert result.placements == {}
    assert describe(result.waiting["a"]).startswith(
        "namespace team-a: quota gpu-quota: requests.nvidia.com/gpu 0 of 8 used, the group needs 12 "
        "(more than the quota allows in all)")
    assert set(plan(objects[:-1], group("a", 3, spec(4))).placements) == {"a"}  # the cluster alone has room


def test_the_pass_counts_its_own_placements_against_the_quota():
    result = plan([*NODES, quota("gpu-quota", {"requests.nvidia.com/gpu": "8"}, {"requests.nvidia.com/gpu": "2"})],
                  group("a", 1, spec(4)), group("b", 1, spec(4), sequence=1), group("c", 1, spec(2), sequence=2))
    assert set(result.placements) == {"a", "c"}  # 2 + 4 + 2 = 8; b would make 10
    assert "requests.nvidia.com/gpu 6 of 8 used, the group needs 4" in describe(result.waiting["b"])


def test_only_the_quotas_of_the_pods_namespace_count():
    objects = [*NODES, quota("gpu-quota", {"requests.nvidia.com/gpu": "0"}, namespace="team-b")]
    assert set(plan(objects, group("a", 1, spec(4))).placements) == {"a"}
    assert plan(objects, group("b", 1, spec(4), namespace="team-b")).waiting["b"].code is ReasonCode.QUOTA


def test_resources_the_group_does_not_use_are_not_checked():
    """Admission checks only what the pod adds: a quota already over on cpu does not stop a pod asking no cpu."""
    body = {"containers": [{"name": "main", "image": "x", "resources": {"limits": {GPU: "1"}}}]}
    objects = [*NODES, quota("q", {"requests.cpu": "1", "requests.nvidia.com/gpu": "4"},
                             {"requests.cpu": "5", "requests.nvidia.com/gpu": "0"})]
    assert set(plan(objects, group("a", 1, body)).placements) == {"a"}
    assert plan(objects, group("b", 1, spec(1, cpu="100m"))).waiting["b"].quota.resource == "requests.cpu"


@pytest.mark.parametrize("hard, used, holds", [
    ({"count/pods": "3"}, {"count/pods": "2"}, "count/pods 2 of 3 used, the group needs 2"),
    ({"pods": "2"}, {}, "pods 0 of 2 used, the group needs 3"),
    ({"cpu": "2"}, {"cpu": "500m"}, "cpu 500m of 2 used, the group needs 3"),
    ({"limits.memory": "4Gi"}, {}, "limits.memory 0 of 4Gi used, the group needs 6Gi"),
    ({"requests.memory": "2Gi"}, {}, "requests.memory 0 of 2Gi used, the group needs 3Gi"),
])
def test_every_form_of_pod_quota(hard, used, holds):
    body = {"containers": [{"name": "main", "image": "x", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}}]}
    pods = 2 if "count/pods" in hard else 3
    result = plan([*NODES, quota("q", hard, used)], group("a", pods, body))
    assert holds in describe(result.waiting["a"])


PRIORITY_HIGH = [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]


@pytest.mark.parametrize("scoped, body, applies", [
    ({"selector": PRIORITY_HIGH}, spec(4, priorityClassName="high"), True),
    ({"selector": PRIORITY_HIGH}, spec(4, priorityClassName="low"), False),
    ({"selector": PRIORITY_HIGH}, spec(4), False),
    ({"selector": [{"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}]}, spec(4), True),
    ({"scopes": ["PriorityClass"]}, spec(4), False),
    ({"scopes": ["PriorityClass"]}, spec(4, priorityClassName="low"), True),
    ({"scopes": ["Terminating"]}, spec(4), False),
    ({"scopes": ["Terminating"]}, spec(4, activeDeadlineSeconds=3600), True),
    ({"scopes": ["NotTerminating"]}, spec(4), True),
    ({"scopes": ["BestEffort"]}, spec(4), False),
    ({"scopes": ["NotBestEffort"]}, spec(4), True),
    ({"scopes": ["NotBestEffort", "Terminating"]}, spec(4), False),
    ({"scopes": ["CrossNamespacePodAffinity"]}, spec(4), False),
    ({"scopes": ["CrossNamespacePodAffinity"]}, spec(4, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}, "topologyKey": "x",
                                                            "namespaceSelector": {}}]}}), True),
])
def test_scoped_quotas_count_only_the_pods_they_select(scoped, body, applies):
    objects = [*NODES, quota("q", {"requests.nvidia.com/gpu": "2", "pods": "10"}, **scoped)]
    result = plan(objects, group("a", 1, body))
    assert (result.waiting.get("a") is not None) is applies


def test_best_effort_pods_are_held_by_a_best_effort_quota():
    body = {"containers": [{"name": "main", "image": "x"}]}
    objects = [*NODES, quota("no-best-effort", {"pods": "0"}, scopes=["BestEffort"])]
    assert plan(objects, group("a", 1, body)).waiting["a"].quota.quota == "no-best-effort"
    assert set(plan(objects, group("b", 1, spec(1))).placements) == {"b"}


def test_pods_that_exist_already_were_counted_when_they_were_created():
    """The master's pods exist: the quota counted them at creation, binding them adds nothing."""
    objects = [*NODES, quota("gpu-quota", {"requests.nvidia.com/gpu": "4"}, {"requests.nvidia.com/gpu": "4"})]
    assert set(plan(objects, group("a", 1, spec(4), admitted=True)).placements) == {"a"}


def test_a_quota_without_status_is_read_from_its_spec():
    read = quota_from_object(quota("q", {"requests.nvidia.com/gpu": "8", "limits.memory": "1Gi"}, status=False))
    assert (read.namespace, read.name, dict(read.hard), dict(read.used)) == (
        NS, "q", {"requests.nvidia.com/gpu": 8000, "limits.memory": 2**30 * 1000}, {})


def test_quotas_are_read_from_snapshot_files_and_listed():
    snapshot = snapshot_from_objects([{"kind": "ResourceQuotaList", "items": [quota("b", {"pods": "1"}),
                                                                                quota("a", {"pods": "2"})]}])
    assert [q.name for q in snapshot.quotas] == ["a", "b"] and "ResourceQuota" in snapshot.listed


def test_a_quota_on_cpu_warns_about_containers_that_set_none():
    body = {"containers": [{"name": "main", "image": "x", "resources": {"limits": {GPU: "1"}}}]}
    result = plan([*NODES, quota("q", {"limits.cpu": "10"})], group("a", 1, body))
    assert any("ResourceQuota team-a/q limits limits.cpu and container main sets none" in w for w in result.warnings)


def test_quota_facts_survive_the_queue_entry():
    body = spec(4, priorityClassName="high", activeDeadlineSeconds=10)
    body["containers"][0]["resources"]["limits"]["memory"] = "2Gi"
    original = group("a", 2, body)
    back = group_from_dict(group_to_dict(original))
    assert back.pods == original.pods
    legacy = group_to_dict(original)
    for member in legacy["pods"]:
        del member["quota"]
    old = group_from_dict(legacy)  # written before quotas were read: its requests stand in
    assert old.pods[0].quota is None and old.pods[0].quota_facts.usage["requests.nvidia.com/gpu"] == 4000


def test_the_same_input_gives_the_same_plan():
    objects = [*NODES, quota("b", {"requests.nvidia.com/gpu": "6"}), quota("a", {"count/pods": "2"})]
    groups = [group(f"g{i}", 1 + i % 2, spec(2), sequence=i) for i in range(5)]
    assert plan(objects, *groups) == plan(objects, *reversed(groups))


def test_other_pods_of_the_pod_spec_are_in_the_usage():
    """Init containers, sidecars and overhead count as kube-scheduler counts them; limits as PodLimits."""
    body = {"overhead": {"cpu": "100m"},
            "initContainers": [{"name": "init", "image": "x", "resources": {"limits": {"cpu": "3"}}},
                               {"name": "side", "image": "x", "restartPolicy": "Always",
                                "resources": {"limits": {"cpu": "1"}}}],
            "containers": [{"name": "main", "image": "x", "resources": {"limits": {"cpu": "1"}}}]}
    facts = facts_from_spec(body, effective_requests(body))
    assert facts.usage["limits.cpu"] == 3100 and facts.usage["requests.cpu"] == 3100
