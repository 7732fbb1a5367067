"""Reading Nodes and Pods as Kubernetes gives them: effective requests, taints, selectors, readiness."""

from __future__ import annotations

import pytest

from det_k8s.cluster.model import GPU, PODS, Constraints, Pod, Requirement, Snapshot, Taint, Toleration
from det_k8s.cluster.read import effective_requests, node_from_object, pod_from_object, snapshot_from_objects
from det_k8s.errors import InputError


def container(requests=None, limits=None, **extra):
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


def test_app_containers_add_up():
    spec = {"containers": [container({"cpu": "500m", "memory": "1Gi"}), container({"cpu": "1"})]}
    assert effective_requests(spec) == {"cpu": 1500, "memory": 2**30 * 1000}


def test_limits_stand_in_for_missing_requests():
    spec = {"containers": [container(limits={GPU: "2", "cpu": "2"}, requests={"cpu": "1"})]}
    assert effective_requests(spec) == {GPU: 2000, "cpu": 1000}


def test_init_containers_count_as_the_max_of_init_and_the_sum_of_apps():
    spec = {
        "initContainers": [container({"cpu": "3"}), container({"cpu": "1", GPU: "4"})],
        "containers": [container({"cpu": "1"}), container({"cpu": "1", GPU: "1"})],
    }
    assert effective_requests(spec) == {"cpu": 3000, GPU: 4000}


def test_sidecars_run_beside_the_apps_and_the_later_init_containers():
    spec = {
        "initContainers": [container({"cpu": "1"}, restartPolicy="Always"), container({"cpu": "2"})],
        "containers": [container({"cpu": "1"})],
    }
    # apps + sidecar = 2; init after the sidecar = 2 + 1 = 3
    assert effective_requests(spec) == {"cpu": 3000}


def test_overhead_is_added():
    spec = {"containers": [container({"cpu": "1"})], "overhead": {"cpu": "250m"}}
    assert effective_requests(spec) == {"cpu": 1250}


def test_pod_level_resources_replace_the_containers_cpu_and_memory():
    # PodLevelResources (beta, on by default since 1.34): kube-scheduler and the kubelet count the pod's request
    spec = {"containers": [container({"cpu": "1", GPU: "2"}), container({"cpu": "1"})],
            "resources": {"requests": {"cpu": "6", "memory": "8Gi"}}, "overhead": {"cpu": "250m"}}
    assert effective_requests(spec) == {"cpu": 6250, "memory": 8 * 2**30 * 1000, GPU: 2000}


def test_a_pod_level_limit_stands_in_only_where_no_container_asks():
    # API defaulting (KEP-2837): a missing pod-level request is the containers' total, else the pod-level limit
    spec = {"containers": [container({"cpu": "1"})], "resources": {"limits": {"cpu": "4", "memory": "2Gi"}}}
    assert effective_requests(spec) == {"cpu": 1000, "memory": 2 * 2**30 * 1000}


def test_bad_quantities_name_the_pod_and_resource():
    with pytest.raises(InputError, match="pod p: cpu"):
        pod_from_object({"metadata": {"name": "p"}, "spec": {"containers": [container({"cpu": "lots"})]}})


def test_node_readiness_taints_and_cordon():
    node = node_from_object({
        "metadata": {"name": "n", "labels": {"a": "b"}},
        "spec": {"unschedulable": True, "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "7910m", GPU: "4"},
                   "conditions": [{"type": "Ready", "status": "False"}]},
    })
    assert (node.name, node.ready, node.unschedulable, node.gpus) == ("n", False, True, 4)
    assert node.taints == (Taint("k", "v", "NoExecute"),)
    assert node.allocatable[PODS] == 110_000  # kubelet's default when not reported


def test_pod_binding_phase_and_constraints():
    pod = pod_from_object({
        "metadata": {"name": "p", "namespace": "ml", "labels": {"determined": "x"}},
        "spec": {
            "nodeName": "n1",
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "accelerator", "operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
            "containers": [container({GPU: "1"})],
        },
        "status": {"phase": "Running"},
    })
    assert (pod.node_name, pod.phase, pod.active, pod.namespace) == ("n1", "Running", True, "ml")
    assert pod.constraints.selector_matches({"pool": "gpu", "zone": "a"})
    assert not pod.constraints.selector_matches({"pool": "gpu", "zone": "b"})
    assert pod.constraints.untolerated([Taint("accelerator", "gpu")]) is None


def test_snapshot_reads_typed_and_untyped_lists_and_skips_other_kinds():
    documents = [
        {"kind": "NodeList", "items": [{"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4"}}}]},
        {"kind": "List", "items": [
            {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [
                container({"cpu": "1"})]}, "status": {"phase": "Running"}},
            {"kind": "Service", "metadata": {"name": "s"}},
        ]},
    ]
    snapshot = snapshot_from_objects(documents)
    assert [n.name for n in snapshot.nodes] == ["n1"] and [p.name for p in snapshot.pods] == ["p"]
    assert snapshot.free["n1"]["cpu"] == 3000


def test_snapshot_rejects_a_file_that_is_no_list():
    with pytest.raises(InputError, match="expected a Kubernetes List"):
        snapshot_from_objects(["just text"], "f.yaml")


def test_finished_and_unbound_pods_hold_nothing():
    nodes = (node_from_object({"metadata": {"name": "n"}, "status": {"allocatable": {GPU: "4"}}}),)
    pods = (Pod("a", node_name="n", phase="Succeeded", requests={GPU: 4000}),
            Pod("b", node_name="n", phase="Failed", requests={GPU: 4000}),
            Pod("c", node_name=None, requests={GPU: 4000}),
            Pod("d", node_name="n", phase="Running", requests={GPU: 1000}))
    snapshot = Snapshot(nodes, pods)
    assert snapshot.free["n"][GPU] == 3000
    assert snapshot.free["n"][PODS] == 109_000


def test_free_capacity_never_goes_negative():
    nodes = (node_from_object({"metadata": {"name": "n"}, "status": {"allocatable": {GPU: "1"}}}),)
    snapshot = Snapshot(nodes, (Pod("a", node_name="n", phase="Running", requests={GPU: 2000}),))
    assert snapshot.free["n"][GPU] == 0


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (Toleration("k", "Equal", "v", "NoSchedule"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "w", "NoSchedule"), Taint("k", "v", "NoSchedule"), False),
        (Toleration("k", "Exists", "", ""), Taint("k", "v", "NoExecute"), True),
        (Toleration("", "Exists", "", ""), Taint("any", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v", "NoExecute"), Taint("k", "v", "NoSchedule"), False),
        (Toleration("", "Equal", "", ""), Taint("k", "", "NoSchedule"), False),
    ],
)
def test_tolerations_follow_kubernetes(toleration, taint, tolerated):
    assert toleration.tolerates(taint) is tolerated


def test_prefer_no_schedule_taints_do_not_exclude():
    assert Constraints().untolerated([Taint("soft", "", "PreferNoSchedule")]) is None
    assert Constraints().untolerated([Taint("hard", "", "NoSchedule")]) == Taint("hard", "", "NoSchedule")


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("In", ("a", "b"), {"k": "a"}, True),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"k": "b"}, True),
        ("NotIn", ("a",), {}, True),
        ("Exists", (), {"k": ""}, True),
        ("DoesNotExist", (), {"k": ""}, False),
        ("Gt", ("3",), {"k": "4"}, True),
        ("Lt", ("3",), {"k": "4"}, False),
        ("Gt", ("3",), {"k": "x"}, False),
    ],
)
def test_node_selector_requirements(operator, values, labels, expected):
    assert Requirement("k", operator, values).matches(labels) is expected


def test_unhashable_values_are_input_errors_or_accepted_as_before():
    with pytest.raises(InputError, match="pod p: cpu"):
        pod_from_object({"metadata": {"name": "p"}, "spec": {"containers": [container({"cpu": [1]})]}})
    pod = pod_from_object({"metadata": {"name": "q"}, "spec": {"nodeSelector": {"zone": {"a": "b"}}, "containers": []}})
    assert pod.constraints.node_selector == {"zone": "{'a': 'b'}"}


def test_a_pods_priority_is_what_admission_set_from_its_priority_class():
    def pod(spec):
        return pod_from_object({"metadata": {"name": "p"}, "spec": {"containers": [], **spec}})

    assert pod({"priorityClassName": "x-priorityclass", "priority": 42}).priority == 42
    assert pod({}).priority is None
    assert pod({"priority": "42"}).priority is None and pod({"priority": True}).priority is None


def test_every_placement_rule_of_a_pod_spec_is_read():
    labels = {"app": "train", "det-k8s.io/group": "g", "rev": "7"}
    spec = {
        "containers": [container({GPU: "1"}, ports=[{"containerPort": 29500}, {"containerPort": 8080, "hostPort": 80,
                                                                              "protocol": "UDP", "hostIP": "10.0.0.1"}])],
        "hostNetwork": True,
        "os": {"name": "linux"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n3"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z"]}]}}]},
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"det-k8s.io/group": "g"}}, "topologyKey": "zone",
                 "matchLabelKeys": ["rev"]}]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                 "topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}]}},
        "topologySpreadConstraints": [
            {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
             "labelSelector": {"matchLabels": {"app": "train"}}, "nodeTaintsPolicy": "Honor"},
            {"maxSkew": 1, "topologyKey": "host", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}}],
        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "s", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "fast",
                                                                                  "accessModes": ["ReadWriteOncePod"]}}}},
                    {"name": "cfg", "configMap": {"name": "c"}}],
    }
    c = pod_from_object({"metadata": {"name": "p", "namespace": "ml", "labels": labels}, "spec": spec}).constraints
    assert c.required_terms == ((Requirement("pool", "In", ("a",)), Requirement("metadata.name", "NotIn", ("n3",), True)),)
    assert c.preferred_terms == ((5, (Requirement("zone", "In", ("z",)),)),)
    (together,) = c.affinity
    assert together.namespaces == ("ml",) and together.selector.requirements[-1] == Requirement("rev", "In", ("7",))
    (apart,) = c.anti_affinity
    assert apart.namespace_selector is not None and apart.namespace_selector.empty and apart.namespaces == ()
    assert apart.matches({"app": "web"}, "anywhere")
    (spread,) = c.spread  # ScheduleAnyway only scores
    assert (spread.max_skew, spread.min_domains, spread.honor_affinity, spread.honor_taints) == (2, 3, True, True)
    assert [str(p) for p in c.host_ports] == ["29500/TCP", "80/UDP on 10.0.0.1"]
    assert [(v.name, v.ephemeral, v.storage_class, v.read_write_once_pod) for v in c.claims] == [
        ("data", False, None, False), ("s", True, "fast", True)]
    assert c.os == "linux" and c.interpod


def test_node_conditions_become_the_taints_the_node_lifecycle_controller_adds():
    node = node_from_object({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4"}, "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"},
        {"type": "MemoryPressure", "status": "False"}]}})
    assert node.taints == (Taint("node.kubernetes.io/disk-pressure", "", "NoSchedule"),)


def test_owners_mirrors_nominations_pins_and_scheduling_failures_are_read():
    pinned = pod_from_object({
        "metadata": {"name": "p", "ownerReferences": [{"kind": "Job", "controller": False},
                                                     {"kind": "DaemonSet", "controller": True}]},
        "spec": {"containers": [container({"cpu": "1"})], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert (pinned.owner_kind, pinned.permanent, pinned.node_name, pinned.node, pinned.active) == (
        "DaemonSet", True, None, "n2", True)
    assert (pinned.unschedulable, pinned.unschedulable_since) == ("0/3 nodes are available", "2026-01-01T00:00:00Z")
    nominated = pod_from_object({"metadata": {"name": "q", "annotations": {"kubernetes.io/config.mirror": "x"}},
                                 "spec": {"containers": []}, "status": {"nominatedNodeName": "n1"}})
    assert (nominated.node, nominated.mirror, nominated.permanent) == ("n1", True, True)


def test_claims_volumes_classes_and_namespaces_are_read_with_the_kinds_listed():
    snapshot = snapshot_from_objects([{"kind": "List", "items": [
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "ml", "annotations": {
            "volume.kubernetes.io/selected-node": "n1"}},
         "spec": {"volumeName": "", "storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                  "resources": {"requests": {"storage": "1Gi"}}}},
        {"kind": "PersistentVolume", "metadata": {"name": "v", "labels": {"topology.kubernetes.io/zone": "a__b"}},
         "spec": {"capacity": {"storage": "2Gi"}, "claimRef": {"namespace": "ml", "name": "c"},
                  "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}},
        {"kind": "StorageClass", "metadata": {"name": "local", "annotations": {
            "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "kubernetes.io/no-provisioner",
         "volumeBindingMode": "WaitForFirstConsumer",
         "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]},
        {"kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "x"}}},
    ]}])
    (claim,), (volume,), (klass,) = snapshot.claims, snapshot.volumes, snapshot.classes
    assert (claim.namespace, claim.storage_class, claim.bound, claim.request, claim.selected_node) == (
        "ml", "local", False, 2**30 * 1000, "n1")
    assert (volume.claim, volume.capacity, volume.labels) == (("ml", "c"), 2 * 2**30 * 1000,
                                                              {"topology.kubernetes.io/zone": "a__b"})
    assert (klass.default, klass.binding_mode, klass.allowed_topologies) == (
        True, "WaitForFirstConsumer", ((Requirement("zone", "In", ("a",)),),))
    assert snapshot.namespaces == {"ml": {"team": "x"}}
    assert snapshot.listed >= {"PersistentVolumeClaim", "PersistentVolume", "StorageClass", "Namespace"}
