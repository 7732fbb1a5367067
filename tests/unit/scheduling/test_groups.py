"""From an experiment to pods: how many, what they ask for, and manifests Kubernetes 1.31 accepts."""

from __future__ import annotations

import re

import kubernetes_validate
import pytest

from det_k8s.cluster.model import GPU, Toleration
from det_k8s.errors import Unschedulable
from det_k8s.scheduling import labels as L
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.groups import build_group, headless_service_manifest, pod_manifests, pods_for
from det_k8s.settings import Document, load_settings
from tests.conftest import example
from tests.support.builders import node_of

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def settings(text: str = "maxSlotsPerPod: 4", *sets: str):
    return load_settings([Document("s.yaml", text)], sets).settings()


def experiment(text: str = ""):
    return parse_experiment(text or "name: e", "e.yaml").get()


def group_of(exp, cfg, group_id="3f9c0a1b2d4e5f60"):
    return build_group(
        exp, cfg, group_id=group_id, user="alice", submitted_at="2024-05-01T12:00:00Z", sequence=7
    )


@pytest.mark.parametrize(
    ("slots", "max_per_pod", "expected"),
    [
        (1, 4, (1, 1)),
        (0, 4, (1, 0)),
        (3, 4, (1, 3)),
        (4, 4, (1, 4)),
        (8, 4, (2, 4)),
        (16, 4, (4, 4)),
        (16, 8, (2, 8)),
    ],
)
def test_n_slots_become_n_over_max_slots_per_pod_pods(slots, max_per_pod, expected):
    assert pods_for(slots, max_per_pod) == expected


@pytest.mark.parametrize("slots", [99999999999, 100000000000, 40001])
def test_slots_no_cluster_can_run_are_refused_as_such_not_with_a_multiple_next_to_them(slots):
    with pytest.raises(Unschedulable) as caught:
        pods_for(slots, 4)
    pods = -(-slots // 4)
    assert (caught.value.message, caught.value.hint) == (
        f"slots_per_trial {slots} would need {pods} pods of 4 slots; det-k8s starts at most 10000 pods as one group",
        "no Kubernetes cluster can run it; use at most 40000 slots, a multiple of 4",
    )


def test_slots_that_do_not_divide_are_rejected_with_the_reason_and_a_fix():
    with pytest.raises(Unschedulable) as caught:
        pods_for(6, 4)
    assert (caught.value.message, caught.value.hint) == (
        "slots_per_trial 6 is not a multiple of maxSlotsPerPod 4",
        "use 4 or 8 slots",
    )


def test_a_group_carries_the_experiment_priority_user_and_sequence():
    group = group_of(experiment("name: e\nresources: {slots_per_trial: 8, priority: 70}"), settings())
    assert (group.priority, group.user, group.sequence, group.size, group.slots_per_pod) == (
        70,
        "alice",
        7,
        2,
        4,
    )
    assert all(pod.requests == {GPU: 4000} for pod in group.pods)


def test_requests_come_from_the_final_pod_spec_including_the_experiment_pod_spec():
    exp = experiment("""
name: e
resources: {slots_per_trial: 4}
environment:
  pod_spec:
    spec:
      initContainers: [{name: init, image: busybox, resources: {requests: {cpu: "6"}}}]
      containers:
        - name: determined-container
          resources: {requests: {cpu: "2", memory: 8Gi}}
        - name: sidecar
          image: busybox
          resources: {limits: {cpu: "1"}}
      tolerations: [{key: accelerator, operator: Exists}]
""")
    pod = group_of(exp, settings()).pods[0]
    assert pod.requests == {GPU: 4000, "cpu": 6000, "memory": 8 * 2**30 * 1000}  # max(init 6, apps 2 + 1)
    assert pod.constraints.tolerations == (Toleration("accelerator", "Exists"),)


def test_cpu_slots_ask_for_slot_cpus_times_slots():
    cfg = settings("maxSlotsPerPod: 2\nslotType: cpu\nslotResourceRequests: {cpu: 7.5}")
    group = group_of(experiment("name: e\nresources: {slots_per_trial: 4}"), cfg)
    assert group.size == 2 and group.pods[0].requests == {"cpu": 15000}


def test_the_settings_pod_spec_is_the_base_unless_the_experiment_brings_its_own():
    cfg = settings(example("gpu-cluster.yaml").read_text())
    assert group_of(experiment(), cfg).pods[0].constraints.tolerations  # gpuPodSpec tolerates accelerator=gpu
    own = experiment("name: e\nenvironment: {pod_spec: {spec: {priorityClassName: x}}}")
    assert group_of(own, cfg).pods[0].constraints.tolerations == ()  # replaced, as in Determined


def manifests(exp_text="", cfg=None, namespace="ml"):
    exp = experiment(exp_text or "name: My Big_Experiment\nresources: {slots_per_trial: 8}")
    cfg = cfg or settings()
    group = group_of(exp, cfg)
    placement = [(pod.name, f"node-{pod.rank}") for pod in group.pods]
    return (
        group,
        pod_manifests(group, exp, cfg, placement, namespace),
        headless_service_manifest(group, namespace),
    )


def test_every_manifest_validates_against_kubernetes_1_31():
    cfg = settings(example("gpu-cluster.yaml").read_text())
    for text in (
        "",
        "name: e\nresources: {slots_per_trial: 0}\nentrypoint: [sleep, '1']",
        (example("experiments") / "distributed-16gpu.yaml").read_text(),
        (example("experiments") / "high-priority-8gpu.yaml").read_text(),
    ):
        _, pods, service = manifests(text, cfg)
        for doc in [*pods, service]:
            kubernetes_validate.validate(doc, "1.31.0", strict=True)


def test_pods_are_pinned_labelled_and_named_as_dns_labels():
    group, pods, _ = manifests()
    assert [node_of(p) for p in pods] == ["node-0", "node-1"]
    assert all("nodeName" not in p["spec"] for p in pods)  # pinned by node affinity: kube-scheduler still runs
    assert [p["metadata"]["name"] for p in pods] == [
        "my-big-experiment-3f9c0a1b-0",
        "my-big-experiment-3f9c0a1b-1",
    ]
    labels = pods[1]["metadata"]["labels"]
    assert labels == {
        L.MANAGED_BY: "det-k8s",
        L.GROUP: group.id,
        L.EXPERIMENT: "My-Big_Experiment",
        L.USER: "alice",
        L.PRIORITY: "50",
        L.SIZE: "2",
        L.RANK: "1",
    }
    assert pods[0]["metadata"]["annotations"] == {L.SUBMITTED_AT: "2024-05-01T12:00:00Z"}
    assert all(p["spec"]["restartPolicy"] == "Never" for p in pods)


def test_long_names_are_truncated_to_valid_hostnames():
    _, pods, service = manifests("name: " + "x" * 100 + "\nresources: {slots_per_trial: 40}")
    names = [p["metadata"]["name"] for p in pods]
    assert all(len(n) <= 63 and DNS_LABEL.match(n) for n in names) and len(set(names)) == 10
    assert names[-1].endswith("-3f9c0a1b-9") and len(service["metadata"]["name"]) <= 63


def test_names_start_with_a_letter():
    _, pods, service = manifests("name: 2024 run\nresources: {slots_per_trial: 1}")
    assert service["metadata"]["name"] == "exp-2024-run-3f9c0a1b"


def test_slots_are_requested_and_limited():
    _, pods, _ = manifests()
    resources = pods[0]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}


def test_rendezvous_environment_points_at_rank_0_through_the_headless_service():
    group, pods, service = manifests(
        "name: e\nresources: {slots_per_trial: 8}\n"
        "environment: {environment_variables: [NCCL_DEBUG=INFO, RANK=99]}"
    )
    env = {e["name"]: e["value"] for e in pods[1]["spec"]["containers"][0]["env"]}
    chief = f"{pods[0]['metadata']['name']}.{service['metadata']['name']}.ml.svc"
    assert env == {
        "NCCL_DEBUG": "INFO",
        "DET_K8S_WORLD_SIZE": "2",
        "DET_K8S_RANK": "1",
        "DET_K8S_SLOTS_PER_POD": "4",
        "DET_K8S_CHIEF_ADDR": chief,
        "DET_K8S_CHIEF_PORT": "29500",
        "DET_K8S_GROUP": group.id,
        "WORLD_SIZE": "2",
        "RANK": "1",
        "MASTER_ADDR": chief,
        "MASTER_PORT": "29500",
    }
    assert (pods[1]["spec"]["hostname"], pods[1]["spec"]["subdomain"]) == (
        pods[1]["metadata"]["name"],
        service["metadata"]["name"],
    )


def test_the_headless_service_selects_the_group_and_publishes_not_ready_pods():
    group, _, service = manifests()
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": {L.GROUP: group.id},
        "publishNotReadyAddresses": True,
        "ports": [{"name": "rendezvous", "port": 29500, "targetPort": 29500, "protocol": "TCP"}],
    }


@pytest.mark.parametrize(
    ("settings_text", "exp_text", "image"),
    [
        ("maxSlotsPerPod: 4", "name: e\nenvironment: {image: {gpu: mine}}", "mine"),
        ("maxSlotsPerPod: 4\ntaskContainerDefaults: {cpuImage: c, gpuImage: g}", "name: e", "g"),
        (
            "maxSlotsPerPod: 4\ntaskContainerDefaults: {cpuImage: c, gpuImage: g}",
            "name: e\nresources: {slots_per_trial: 0}",
            "c",
        ),
        (
            "maxSlotsPerPod: 4\nimageRegistry: reg.example.com/det\nappVersion: '0.17.15'",
            "name: e",
            "reg.example.com/det/environments:cuda-11.3-pytorch-1.10-lightning-1.5-tf-2.8-gpu-ed66d8a",
        ),
        (
            "maxSlotsPerPod: 4\nimageRegistry: reg.example.com/det\ndefaultImages: {gpuImage: mirror/gpu:1}",
            "name: e",
            "mirror/gpu:1",
        ),
    ],
)
def test_the_image_is_the_experiments_then_the_settings_then_determineds_default(
    settings_text, exp_text, image
):
    _, pods, _ = manifests(exp_text, settings(settings_text))
    assert pods[0]["spec"]["containers"][0]["image"] == image


def test_entrypoint_is_the_command_and_force_pull_sets_the_pull_policy():
    _, pods, _ = manifests(
        "name: e\nentrypoint: python3 train.py",
        settings("maxSlotsPerPod: 4", "taskContainerDefaults.forcePullImage=true"),
    )
    container = pods[0]["spec"]["containers"][0]
    assert (container["command"], container["imagePullPolicy"]) == (["python3", "train.py"], "Always")
    _, pods, _ = manifests("name: e")
    assert "command" not in pods[0]["spec"]["containers"][0]
    assert pods[0]["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_the_user_container_and_other_containers_are_kept():
    _, pods, _ = manifests("""
name: e
environment:
  pod_spec:
    metadata: {labels: {team: vision}}
    spec:
      containers:
        - name: sidecar
          image: busybox
        - name: determined-container
          volumeMounts: [{name: data, mountPath: /data}]
          env: [{name: FROM_SPEC, value: "1"}]
      volumes: [{name: data, emptyDir: {}}]
""")
    spec = pods[0]["spec"]
    assert [c["name"] for c in spec["containers"]] == ["sidecar", "determined-container"]
    main = spec["containers"][1]
    assert (
        main["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
        and main["env"][0]["name"] == "FROM_SPEC"
    )
    assert pods[0]["metadata"]["labels"]["team"] == "vision"


def test_a_placement_missing_a_pod_is_a_programming_error():
    exp, cfg = experiment("name: e\nresources: {slots_per_trial: 8}"), settings()
    group = group_of(exp, cfg)
    with pytest.raises(ValueError, match="no node for pods"):
        pod_manifests(group, exp, cfg, {group.pods[0].name: "n"}, "ml")


def test_pinning_keeps_the_pods_own_node_affinity_and_adds_the_node_to_each_term():
    from det_k8s.scheduling.groups import pin

    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}],
         "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}},
        "podAntiAffinity": {"x": 1}}
    pinned = pin({"nodeName": "stale", "affinity": affinity, "containers": []}, "n1")
    terms = pinned["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    name = {"key": "metadata.name", "operator": "In", "values": ["n1"]}
    assert terms == [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}], "matchFields": [name]},
                     {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}],
                      "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}, name]}]
    assert "nodeName" not in pinned and pinned["affinity"]["podAntiAffinity"] == {"x": 1}
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0] == {
        "matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}  # the input is not changed
    assert node_of({"spec": pinned}) == "n1"


def test_pods_carry_their_labels_and_namespace_and_a_template_node_name_is_a_requirement():
    cfg = settings()
    exp = experiment("name: e\nresources: {slots_per_trial: 8}\nenvironment:\n  pod_spec:\n    metadata:\n"
                     "      labels: {team: vision}\n    spec:\n      nodeName: n7\n")
    group = build_group(exp, cfg, group_id="3f9c0a1b2d4e5f60", user="alice", submitted_at="t", sequence=1,
                        namespace="ml")
    first = group.pods[0]
    assert first.namespace == "ml" and first.labels["team"] == "vision" and first.labels[L.RANK] == "0"
    assert first.constraints.pinned_node == "n7"
    (pod,) = pod_manifests(group, exp, cfg, {p.name: "n7" for p in group.pods}, "ml")[:1]
    assert node_of(pod) == "n7" and "nodeName" not in pod["spec"]


def test_a_group_round_trips_through_its_queue_entry_with_every_constraint():
    from det_k8s.cluster.read import constraints_from_spec
    from det_k8s.scheduling.model import PodGroup, PodRequest
    from det_k8s.scheduling.serialize import group_from_dict, group_to_dict

    spec = {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}], "os": {"name": "linux"},
            "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 3, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}]},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"g": "x"}}, "topologyKey": "zone", "namespaceSelector": {
                        "matchLabels": {"team": "a"}}}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": None, "topologyKey": "host"}]}},
            "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "zone", "labelSelector": {}}],
            "volumes": [{"name": "v", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "s"}}}}],
            "resourceClaims": [{"name": "r"}]}
    constraints = constraints_from_spec(spec, "ml", {"g": "x"})
    group = PodGroup("id", "e", "u", 50, "t", 1, (PodRequest("p", 0, {GPU: 1000}, constraints, {"g": "x"}, "ml"),), 1)
    assert group_from_dict(group_to_dict(group)) == group
    old = group_to_dict(group)
    for pod in old["pods"]:  # an entry written before labels, namespace and the newer constraints existed
        del pod["labels"], pod["namespace"]
        pod["constraints"] = {k: v for k, v in pod["constraints"].items()
                              if k in ("nodeSelector", "requiredTerms", "tolerations")}
    back = group_from_dict(old).pods[0]
    assert (back.labels, back.namespace, back.constraints.affinity, back.constraints.tolerations) == (
        {}, "", (), constraints.tolerations)


def test_master_labels_of_the_settings_default_pod_spec_never_reach_det_k8s_pods():
    # taskContainerDefaults.gpuPodSpec serves the master's pods too (which carry `determined` anyway); on det-k8s's own
    # pods a `determined` label made the 0.17 master delete them when it started.
    cfg = settings("maxSlotsPerPod: 4\ntaskContainerDefaults:\n  gpuPodSpec:\n    metadata:\n      labels:\n"
                   "        determined: x\n        determined-preemption: 'true'\n        team: a\n")
    exp = experiment("name: e\nresources: {slots_per_trial: 4}")
    group = group_of(exp, cfg)
    (manifest,) = pod_manifests(group, exp, cfg, {group.pods[0].name: "n1"}, "default")
    for labels in (manifest["metadata"]["labels"], group.pods[0].labels):
        assert labels["team"] == "a" and not set(L.MASTER_LABELS) & set(labels), labels


POOLS = ("maxSlotsPerPod: 4\nresourcePools:\n  - pool_name: default\n  - pool_name: small\n"
         "    task_container_defaults:\n      kubernetes:\n        max_slots_per_pod: 2\n")


@pytest.mark.parametrize(("text", "app", "expected"), [
    ("resources: {slots_per_trial: 4, resource_pool: small}", "0.38.1", (2, 2)),
    ("resources: {slots_per_trial: 4, resource_pool: default}", "0.38.1", (1, 4)),
    ("resources: {slots_per_trial: 4}", "0.38.1", (1, 4)),
    ("resources: {slots_per_trial: 4, resource_pool: small}", "0.26.2", (2, 2)),
    ("resources: {slots_per_trial: 4, resource_pool: small}", "0.26.0", (1, 4)),  # no per-pool override yet
])
def test_a_pools_own_max_slots_per_pod_splits_its_trials(text, app, expected):
    # The master's Kubernetes resource manager gives each pool the max_slots_per_pod of its
    # task_container_defaults.kubernetes when set (kubernetesrm, 0.26.x and v0.38.1): a 4-slot trial in pool `small`
    # (2 per pod) runs as 2 pods of 2; det-k8s planned 1 pod of 4.
    cfg = settings(POOLS, f"appVersion={app}")
    group = group_of(experiment(f"name: e\n{text}"), cfg)
    assert (len(group.pods), group.slots_per_pod) == expected


def test_the_default_compute_pool_s_override_applies_to_an_experiment_naming_none():
    cfg = settings(POOLS + "defaultComputeResourcePool: small\n")
    group = group_of(experiment("name: e\nresources: {slots_per_trial: 4}"), cfg)
    assert (len(group.pods), group.slots_per_pod) == (2, 2)
