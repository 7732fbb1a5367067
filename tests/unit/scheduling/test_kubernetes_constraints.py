"""The constraints kube-scheduler and the kubelet hold, each as the issue found it broken, planned from
raw objects and every placement replayed against the independent model (`tests/support/kube_model.py`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from det_k8s.scheduling.explain import describe
from det_k8s.scheduling.model import Plan, Policy, ReasonCode
from tests.support import kube_model as kube
from tests.support.kube_objects import GPU, HOST, ZONE, node, plan, pod, queued, running, spec

GKE_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
NO_TOPOLOGY = Policy(topology_key="")


def admitted_by_kubernetes(objects: Sequence[Mapping[str, Any]], groups: Mapping[str, Sequence[Mapping[str, Any]]],
                           result: Plan, plugin: bool = False) -> None:
    """Replay the normal placements in decision order against the independent model; all must be admitted."""
    cluster = kube.Cluster(objects)
    for gid in result.order:
        if gid in result.placements and not result.preempting.get(gid):
            nodes = dict(result.placements[gid])
            for p in groups[gid]:
                p = kube.admitted(p, plugin)
                assert cluster.refusal(p, nodes[p["metadata"]["name"]]) is None
                cluster.add(p, nodes[p["metadata"]["name"]])


def nodes_of(result: Plan, gid: str) -> list[str]:
    return [n for _, n in result.placements[gid]]


# -- node affinity ------------------------------------------------------------------------------------

def test_match_fields_on_the_node_name_is_honoured():
    objects = [node(f"n{i}", 4) for i in range(4)]
    pin = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]}}}
    groups = {"g": queued("g", 1, spec(4, affinity=pin))}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert nodes_of(result, "g") == ["n3"]
    admitted_by_kubernetes(objects, groups, result)
    full = plan([*objects, pod("x", node_name="n3", gpus=4)], groups, NO_TOPOLOGY)
    assert "3 nodes excluded: 3 node affinity" in describe(full.waiting["g"])


@pytest.mark.parametrize("terms", [
    [{}],  # an empty term matches no node
    [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0", "n1"]}]}],  # one value only
    [{"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["n0"]}]}],  # only metadata.name
    [],  # required, with no term at all
])
def test_node_affinity_that_can_match_no_node_matches_none(terms):
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    result = plan([node("n0", 4), node("n1", 4)], {"g": queued("g", 1, spec(1, affinity=affinity))})
    assert result.rejected["g"].code is ReasonCode.NO_ELIGIBLE_NODES
    assert all(kube.Cluster([node("n0", 4)]).refusal(p, "n0") for p in queued("g", 1, spec(1, affinity=affinity)))


def test_preferred_node_affinity_breaks_ties_between_equally_full_nodes():
    objects = [node("n0", 4, zone="z1"), node("n1", 4, zone="z2"), node("n2", 4, zone="z1")]
    prefer = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z2"]}]}}]}}
    result = plan(objects, {"g": queued("g", 1, spec(4, affinity=prefer))}, NO_TOPOLOGY)
    assert nodes_of(result, "g") == ["n1"]


# -- pod anti-affinity, host ports -------------------------------------------------------------------

ONE_PER_NODE = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"det-k8s.io/group": "g"}}, "topologyKey": HOST}]}}


def test_required_anti_affinity_puts_one_pod_of_the_group_per_node():
    objects = [node("n0", 8), node("n1", 8), node("n2", 8)]
    groups = {"g": queued("g", 3, spec(2, affinity=ONE_PER_NODE))}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert sorted(nodes_of(result, "g")) == ["n0", "n1", "n2"]
    admitted_by_kubernetes(objects, groups, result)


def test_four_pods_one_per_node_on_three_nodes_never_fit():
    result = plan([node("n0", 8), node("n1", 8), node("n2", 8)],
                  {"g": queued("g", 4, spec(2, affinity=ONE_PER_NODE))})
    reason = result.rejected["g"]
    assert reason.code is ReasonCode.EXCEEDS_CLUSTER and reason.blocked == (("pod anti-affinity", 3),)


def test_existing_pods_anti_affinity_keeps_matching_pods_away():
    keep_away = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": HOST, "namespaces": ["research"]}]}}
    objects = [node("n0", 8), node("n1", 8), pod("web", node_name="n0", affinity=keep_away)]
    groups = {"g": queued("g", 2, spec(2), labels={"app": "train"})}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert nodes_of(result, "g") == ["n1", "n1"]
    admitted_by_kubernetes(objects, groups, result)


@pytest.mark.parametrize("body", [
    spec(4, hostNetwork=True, containers=[{"name": "main", "image": "x", "ports": [{"containerPort": 29500}],
                                           "resources": {"limits": {GPU: "4"}}}]),
    spec(4, containers=[{"name": "main", "image": "x", "ports": [{"containerPort": 29500, "hostPort": 29500}],
                         "resources": {"limits": {GPU: "4"}}}]),
])
def test_host_ports_and_host_network_keep_a_groups_pods_on_different_nodes(body):
    objects = [node("n0", 8), node("n1", 8)]
    groups = {"g": queued("g", 2, body)}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert sorted(nodes_of(result, "g")) == ["n0", "n1"]  # best fit alone would put both on n0
    admitted_by_kubernetes(objects, groups, result)
    taken = [*objects, pod("agent", node_name="n1", owner="DaemonSet", hostNetwork=True,
                           containers=[{"name": "a", "image": "x", "ports": [{"containerPort": 29500}]}])]
    # the agent holds the port on n1 for good: pod g-1 finds it taken there and on n0 by g-0
    never = plan(taken, groups, NO_TOPOLOGY).rejected["g"]
    assert (never.blocked, never.detail) == ((("host port 29500/TCP in use", 2),), "g-1")


# -- taints: the ExtendedResourceToleration admission plugin -----------------------------------------

def gke_nodes(count: int = 2) -> list[dict[str, Any]]:
    return [node(f"gke-a100-{i}", 8, taints=[GKE_TAINT], labels={"cloud.google.com/gke-nodepool": "a100"})
            for i in range(count)]


def test_on_gke_the_gpu_taint_is_tolerated_as_the_admission_plugin_adds_the_toleration():
    groups = {"g": queued("g", 2, spec(8))}
    result = plan(gke_nodes(), groups)
    assert sorted(nodes_of(result, "g")) == ["gke-a100-0", "gke-a100-1"]
    admitted_by_kubernetes(gke_nodes(), groups, result, plugin=True)


def test_where_the_plugin_is_off_the_gpu_taint_excludes_the_nodes():
    result = plan(gke_nodes(), {"g": queued("g", 2, spec(8))}, Policy(extended_resource_toleration=False))
    assert describe(result.rejected["g"]) == (
        "never fits this cluster: no node can run its pods; "
        "2 nodes excluded: 2 taint nvidia.com/gpu=present:NoSchedule")


def test_a_gpu_pod_without_the_toleration_proves_the_plugin_off():
    plain = [node(f"n{i}", 8, taints=[GKE_TAINT]) for i in range(2)]
    witness = pod("old", node_name="n0", gpus=1)  # asks for a GPU, carries no toleration of GPU taints
    assert plan([*plain, witness], {"g": queued("g", 1, spec(2))}).rejected["g"].code is ReasonCode.NO_ELIGIBLE_NODES


# -- topology --------------------------------------------------------------------------------------

def test_a_gang_with_room_in_one_zone_is_kept_in_it():
    objects = [node("a0", 8, zone="z-a"), node("a1", 8, zone="z-a"), node("b0", 8, zone="z-b"),
               pod("x", node_name="a0", gpus=4), pod("y", node_name="b0", gpus=2)]
    groups = {"g": queued("g", 3, spec(4))}
    result = plan(objects, groups)
    assert sorted(nodes_of(result, "g")) == ["a0", "a1", "a1"]  # zone a: 4 + 8 free; zone b alone 6
    spread = plan(objects, groups, NO_TOPOLOGY)  # without the policy, best fit takes the tightest nodes
    assert {n[0] for n in nodes_of(spread, "g")} == {"a", "b"}


def test_a_required_topology_makes_a_group_wait_and_says_why():
    objects = [node("a0", 8, zone="z-a"), node("b0", 8, zone="z-b"), pod("x", node_name="a0", gpus=4),
               pod("y", node_name="b0", gpus=4)]
    result = plan(objects, {"g": queued("g", 2, spec(4))}, Policy(topology_required=True))
    reason = result.waiting["g"]
    assert reason.code is ReasonCode.TOPOLOGY and reason.topology == (ZONE, "z-a", 1)
    assert ("it fits only across several topology.kubernetes.io/zone domains and the topology policy requires one "
            "(the most in one: z-a, 1 of 2 pods)") in describe(reason)
    never = plan(objects[:2], {"g": queued("g", 3, spec(8))}, Policy(topology_required=True, autoscaling=False))
    assert never.rejected["g"].code is ReasonCode.EXCEEDS_CLUSTER  # 24 GPUs: more than the cluster


def test_any_node_label_can_be_the_topology():
    objects = [node(f"n{i}", 8, labels={"rack": f"r{i % 2}"}) for i in range(4)]
    result = plan(objects, {"g": queued("g", 2, spec(8))}, Policy(topology_key="rack", topology_required=True))
    racks = {int(n[1]) % 2 for n in nodes_of(result, "g")}
    assert len(racks) == 1


# -- spread, pod affinity ----------------------------------------------------------------------------

def test_do_not_schedule_spread_keeps_the_skew():
    objects = [node("a", 8, zone="z1"), node("b", 8, zone="z2"), node("c", 8, zone="z3")]
    rule = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"det-k8s.io/group": "g"}}}]
    groups = {"g": queued("g", 3, spec(2, topologySpreadConstraints=rule))}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert sorted(nodes_of(result, "g")) == ["a", "b", "c"]
    admitted_by_kubernetes(objects, groups, result)


def test_pod_affinity_to_its_own_group_puts_the_first_pod_anywhere_and_the_rest_beside_it():
    objects = [node("a", 4, zone="z1"), node("b", 4, zone="z2"), node("c", 4, zone="z1")]
    together = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"det-k8s.io/group": "g"}}, "topologyKey": ZONE}]}}
    groups = {"g": queued("g", 2, spec(4, affinity=together))}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert sorted(nodes_of(result, "g")) == ["a", "c"]
    admitted_by_kubernetes(objects, groups, result)


# -- volumes, node state -------------------------------------------------------------------------------

def volume_objects() -> list[dict[str, Any]]:
    local = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": HOST, "operator": "In", "values": ["n1"]}]}]}}
    return [
        {"kind": "StorageClass", "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
         "volumeBindingMode": "WaitForFirstConsumer"},
        {"kind": "StorageClass", "metadata": {"name": "fast"}, "provisioner": "ebs.csi.aws.com",
         "volumeBindingMode": "Immediate"},
        {"kind": "PersistentVolume", "metadata": {"name": "pv-1"},
         "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                  "nodeAffinity": local}, "status": {"phase": "Available"}},
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "scratch", "namespace": "research"},
         "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "50Gi"}}}, "status": {"phase": "Pending"}},
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "research"},
         "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "50Gi"}}}, "status": {"phase": "Pending"}},
    ]


def test_a_wait_for_first_consumer_claim_goes_where_a_local_volume_can_bind():
    objects = [node("n0", 4), node("n1", 4), *volume_objects()]
    groups = {"g": queued("g", 1, spec(1, volumes=[{"name": "s", "persistentVolumeClaim": {"claimName": "scratch"}}]))}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert nodes_of(result, "g") == ["n1"]
    admitted_by_kubernetes(objects, groups, result)


def test_an_unbound_immediate_claim_makes_the_group_wait():
    objects = [node("n0", 4), *volume_objects()]
    groups = {"g": queued("g", 1, spec(1, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]))}
    reason = plan(objects, groups).waiting["g"]
    assert reason.code is ReasonCode.VOLUMES
    assert describe(reason) == ("needs 1 pod x 1 nvidia.com/gpu; waiting for its volume: persistentvolumeclaim data "
                                "is not bound yet (it binds without the scheduler)")


def test_a_claim_the_snapshot_does_not_hold_is_a_warning_naming_the_pod():
    groups = {"g": queued("g", 2, spec(1, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]))}
    result = plan([node("n0", 4)], groups)
    assert result.warnings == ("g: pod g-0 (and 1 more pods): persistentvolumeclaim data: not in the snapshot, so "
                               "where its volume can be used is not checked",)


def test_memory_pressure_taints_and_cordons_exclude_nodes_unless_tolerated():
    pressure = node("p", 4, conditions=[{"type": "MemoryPressure", "status": "True"}])
    objects = [pressure, node("c", 4, cordoned=True), node("r", 4, ready=False)]
    result = plan(objects, {"g": queued("g", 1, spec(1))})
    reason = result.waiting["g"]  # waits: pressure and readiness pass, so "not now", never "never"
    assert "g" not in result.rejected
    assert dict(reason.excluded) == {"taint node.kubernetes.io/memory-pressure:NoSchedule": 1, "cordoned": 1,
                                     "not ready": 1}
    tolerant = spec(1, tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                     "effect": "NoSchedule"}])
    assert nodes_of(plan(objects, {"g": queued("g", 1, tolerant)}), "g") == ["c"]


def test_pod_os_must_match_the_node():
    objects = [node("win", 4, labels={"kubernetes.io/os": "windows"}), node("lin", 4)]
    result = plan(objects, {"g": queued("g", 1, spec(1, os={"name": "linux"}))})
    assert nodes_of(result, "g") == ["lin"]


def test_unmodelled_fields_are_warnings_naming_the_pod():
    result = plan([node("n0", 4)], {"g": queued("g", 1, spec(1, runtimeClassName="nvidia"))})
    assert result.warnings == (
        "g: pod g-0: the node selector and tolerations RuntimeClass nvidia adds at admission not modelled; "
        "kube-scheduler may refuse or delay the placement",)


def test_a_pod_with_resource_claims_waits_instead_of_being_placed():
    """Only kube-scheduler allocates a ResourceClaim: det-k8s never binds nor pins such a pod, it waits, saying so."""
    body = spec(1, resourceClaims=[{"name": "gpu", "resourceClaimName": "a100"}])
    result = plan([node("n0", 4)], {"g": queued("g", 1, body), "other": queued("other", 1, spec(1))})
    assert "g" not in result.placements and nodes_of(result, "other") == ["n0"]
    reason = result.waiting["g"]
    assert reason.code == "dra" and reason.dra is not None and reason.dra.claims == ("gpu",)
    assert "ResourceClaims (gpu), which only kube-scheduler allocates" in describe(reason)
    assert not result.warnings


# -- preemption ----------------------------------------------------------------------------------------

def test_a_terminating_group_is_capacity_coming_back_not_a_reason_for_another_victim():
    objects = [node("n0", 8), node("n1", 8), *running("leaving", ["n0"], gpus=8, priority=10, deleting=True),
               *running("low", ["n1"], gpus=8, priority=10)]
    result = plan(objects, {"hi": queued("hi", 1, spec(8), priority=90)}, Policy(preemption=True))
    assert result.victims == () and result.preempting == {"hi": ("leaving",)}
    assert nodes_of(result, "hi") == ["n0"]


def test_one_victim_where_one_does_not_two():
    # greedy by priority would take p10 first (too small alone), then p20; p20 alone suffices
    objects = [node("n0", 8), node("n1", 8), *running("p10", ["n0"], gpus=2, priority=10),
               *running("p20", ["n1"], gpus=8, priority=20), pod("x", node_name="n0", gpus=6)]
    result = plan(objects, {"hi": queued("hi", 1, spec(8), priority=90)}, Policy(preemption=True))
    assert result.victims == ("p20",)


def test_fewest_groups_wins_over_lower_priorities():
    objects = [node("n0", 8), *running("a", ["n0"], gpus=4, priority=10),
               *running("b", ["n0"], gpus=4, priority=10, created="2024-02-01T00:00:00Z"),
               node("n1", 8), *running("big", ["n1"], gpus=8, priority=40)]
    result = plan(objects, {"hi": queued("hi", 1, spec(8), priority=90)}, Policy(preemption=True))
    assert result.victims == ("big",)  # one group of priority 40 rather than two of priority 10


def test_other_namespaces_groups_are_never_victims():
    objects = [node("n0", 8), *running("theirs", ["n0"], gpus=8, priority=10, namespace="other")]
    result = plan(objects, {"hi": queued("hi", 1, spec(8), priority=90)}, Policy(preemption=True))
    assert result.victims == () and "hi" in result.waiting
    assert "preemption: no lower-priority group in this queue to evict" in describe(result.waiting["hi"])


def test_a_reservation_is_never_made_for_groups_judged_by_pod_rules():
    objects = [node("n0", 8), node("n1", 8), *running("r", ["n0", "n1"], gpus=8)]
    result = plan(objects, {"g": queued("g", 2, spec(8, affinity=ONE_PER_NODE))}, Policy(reserve_after=0),
                  now=datetime(2024, 1, 1, 1, tzinfo=UTC))
    assert result.reservations == {} and "g" in result.waiting


def test_with_strict_order_a_group_waiting_for_its_volume_holds_the_queue():
    objects = [node("n0", 4), *volume_objects()]
    groups = {"vol": queued("vol", 1, spec(1, volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])),
              "next": queued("next", 1, spec(1))}
    strict = plan(objects, groups, Policy(backfill=False))
    assert strict.waiting["next"].code is ReasonCode.STRICT_ORDER and "next" not in strict.placements
    assert "next" in plan(objects, groups).placements


def test_volume_attach_limits_and_csi_capacity_are_warnings_naming_the_pod():
    """kube-scheduler's NodeVolumeLimits (the CSINode's attach limit per driver) and CSIStorageCapacity filters are
    not modelled: a pod that mounts an attachable volume, or one its class provisions when the pod is scheduled,
    is planned with a warning saying so, never silently. Volumes that attach nowhere (local, NFS) warn nothing."""
    zone = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": HOST, "operator": "In", "values": ["n0"]}]}]}}
    objects = [node("n0", 4), *volume_objects(),
               {"kind": "StorageClass", "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
                "volumeBindingMode": "WaitForFirstConsumer"},
               {"kind": "PersistentVolume", "metadata": {"name": "pv-ebs"},
                "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                         "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0a1b"}, "nodeAffinity": zone,
                         "claimRef": {"namespace": "research", "name": "ebs"}}, "status": {"phase": "Bound"}},
               {"kind": "PersistentVolume", "metadata": {"name": "pv-nfs"},
                "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                         "nfs": {"server": "nfs.example.com", "path": "/data"},
                         "claimRef": {"namespace": "research", "name": "shared"}}, "status": {"phase": "Bound"}},
               *({"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "research"},
                  "spec": {"storageClassName": klass, "accessModes": ["ReadWriteOnce"], "volumeName": volume,
                           "resources": {"requests": {"storage": "10Gi"}}}, "status": {"phase": phase}}
                 for name, klass, volume, phase in (("ebs", "fast", "pv-ebs", "Bound"), ("shared", "", "pv-nfs", "Bound"),
                                                    ("fresh", "gp3", None, "Pending")))]
    mounts = {"e": "ebs", "s": "shared", "f": "fresh"}
    groups = {name: queued(name, 1, spec(1, volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]))
              for name, claim in mounts.items()}
    result = plan(objects, groups, NO_TOPOLOGY)
    assert result.warnings == (
        "e: pod e-0: persistentvolumeclaim ebs: the per-node attach limit of ebs.csi.aws.com (NodeVolumeLimits) "
        "not modelled; kube-scheduler may refuse or delay the placement",
        "f: pod f-0: persistentvolumeclaim fresh: whether class gp3 has the capacity to provision it on the node "
        "(CSIStorageCapacity) and the per-node attach limit of its driver (NodeVolumeLimits) not modelled; "
        "kube-scheduler may refuse or delay the placement")
    assert nodes_of(result, "e") == ["n0"] and nodes_of(result, "s") == ["n0"] and nodes_of(result, "f") == ["n0"]


def test_a_group_whose_spread_and_affinity_select_only_its_own_pods_is_placed_by_preemption():
    """Spread and affinity are not judged with victims gone, so such a group was never placed by preemption, and a
    high-priority trial spread one pod per node (matchLabelKeys on its own group) starved behind low-priority work.
    When no candidate victim's pod matches its selectors, evicting victims cannot change what the rules say:
    it is placed by preemption like any group. A rule that selects a victim's pods still keeps it waiting."""
    own = {"labelSelector": {}, "matchLabelKeys": ["det-k8s.io/group"]}
    body = spec(4, topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
                                               **own}],
                affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {**own, "topologyKey": "topology.kubernetes.io/region"}]}})
    region = {"topology.kubernetes.io/region": "r1"}
    objects = [node("n0", 4, labels=region), node("n1", 4, labels=region),
               *running("low-a", ["n0"], gpus=4, priority=10), *running("low-b", ["n1"], gpus=4, priority=20)]
    result = plan(objects, {"hi": queued("hi", 2, body, priority=90)}, Policy(preemption=True))
    assert sorted(result.victims) == ["low-a", "low-b"] and sorted(nodes_of(result, "hi")) == ["n0", "n1"]
    survivors = [o for o in objects if (o.get("metadata") or {}).get("labels", {}).get("det-k8s.io/group")
                 not in result.victims]
    kube_cluster = kube.Cluster(survivors)
    for pod_object, where in zip(queued("hi", 2, body, priority=90), nodes_of(result, "hi"), strict=True):
        assert kube_cluster.refusal(pod_object, where) is None
        kube_cluster.add(pod_object, where)
    # a spread whose selector also counts the victims' pods: not judged with them gone, so it waits
    theirs = spec(4, topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
                                                 "labelSelector": {"matchLabels": {"det-k8s.io/user": "bob"}}}])
    waiting = plan(objects, {"hi": queued("hi", 2, theirs, priority=90)}, Policy(preemption=True))
    assert waiting.victims == () and "hi" in waiting.waiting


def admitted_after_victims(objects: Sequence[Mapping[str, Any]], groups: Mapping[str, Sequence[Mapping[str, Any]]],
                           result: Plan, gid: str) -> None:
    """Replay a preemptor's pods once its victims (and the groups it waits for) are gone, each seeing the ones
    before it, as kube-scheduler schedules pods created together; the pass's other placements were created first."""
    cluster = kube.Cluster(objects)
    for other in result.order:
        if other in result.placements and not result.preempting.get(other) and other != gid:
            for p in groups[other]:
                cluster.add(p, dict(result.placements[other])[p["metadata"]["name"]])
    leaving = set(result.victims) | set(result.preempting.get(gid, ()))
    cluster.remove({(o["metadata"].get("namespace", "default"), o["metadata"]["name"]) for o in objects
                    if o.get("kind") == "Pod" and (o["metadata"].get("labels") or {}).get("det-k8s.io/group") in leaving})
    nodes = dict(result.placements[gid])
    for p in groups[gid]:
        why = cluster.refusal(p, nodes[p["metadata"]["name"]])
        assert why is None, (p["metadata"]["name"], nodes[p["metadata"]["name"]], why)
        cluster.add(p, nodes[p["metadata"]["name"]])


@pytest.mark.parametrize("rule", ["together", "spread"])
def test_a_preemptors_own_pods_see_each_other_as_kube_scheduler_will(rule):
    # z1: n0 held by a low-priority group; z2: n1 with 4 GPUs free. The preemptor's second pod must see its first
    # (they are created together once the victim is gone); it did not, and went wherever the first's rule no longer
    # held: beside nothing of its group (together), or into the same zone (spread)
    objects = [node("n0", 8, zone="z1"), node("n1", 8, zone="z2"), node("n2", 8, zone="z2"),
               *running("low", ["n0"], gpus=8, priority=10), *running("high", ["n1"], gpus=4, priority=90),
               *running("high2", ["n2"], gpus=8, priority=90)]
    own = {"det-k8s.io/group": "p"}
    if rule == "together":
        body = spec(4, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": own}, "topologyKey": ZONE}]}})
    else:
        body = spec(4, topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": HOST,
                                                   "whenUnsatisfiable": "DoNotSchedule",
                                                   "labelSelector": {"matchLabels": own}}])
    groups = {"p": queued("p", 2, body, priority=80)}
    for policy in (Policy(preemption=True), Policy(preemption=True, topology_key="")):
        result = plan(objects, groups, policy)
        if "p" in result.placements:
            admitted_after_victims(objects, groups, result, "p")
    result = plan(objects, groups, Policy(preemption=True))
    if rule == "together":  # zone by zone: both in z1 once the low group is gone (z2 has room for one)
        assert result.victims == ("low",) and nodes_of(result, "p") == ["n0", "n0"]
    else:  # one pod per node: never both on the node the victim frees
        assert result.victims == ("low",) and sorted(nodes_of(result, "p")) == ["n0", "n1"]


def test_a_group_placed_now_stays_out_of_the_domains_a_preemptors_spread_counts():
    # p (priority 80) is placed on n0 in z1 once the low group is gone, with zone spread over app=train. q (50),
    # app=train too, fits now: it is created first, so in z1 it would count against p (z1: q and p, z2: none,
    # skew 2 > 1) and kube-scheduler would refuse p. q goes to z2, or waits
    objects = [node("n0", 8, zone="z1"), node("n1", 8, zone="z2"), node("n2", 8, zone="z1"),
               *running("low", ["n0"], gpus=8, priority=10), *running("high", ["n1"], gpus=2, priority=90),
               *running("high2", ["n2"], gpus=4, priority=90)]
    train = {"app": "train"}
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": train}}]
    groups = {"p": queued("p", 1, spec(8, topologySpreadConstraints=spread), priority=80, labels=train),
              "q": queued("q", 1, spec(4), priority=50, labels=train)}
    result = plan(objects, groups, Policy(preemption=True, backfill=True, topology_key=""))
    assert result.victims == ("low",) and nodes_of(result, "p") == ["n0"]
    assert nodes_of(result, "q") == ["n1"]  # it went to n2 (z1), the tightest fit, before the fix
    admitted_by_kubernetes(objects, groups, result)
    admitted_after_victims(objects, groups, result, "p")
