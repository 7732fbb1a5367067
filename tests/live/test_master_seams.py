"""The seams between the master's pods (issue 11) and placement Kubernetes agrees with (issue 12).

The master's pods are bound through `pods/binding`, which skips kube-scheduler: whatever its filters would
hold for them, det-k8s's model must hold. Each test creates master-shaped pods (`tests/support/master_pods.py`), adds
what a user's `environment.pod_spec` would add, runs a live pass against the emulator and checks where the pods
went with the independent model (`tests/support/kube_model.py`) where one applies.
"""

from __future__ import annotations

import pytest

from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task_on, master_task

ON_REAL_CLUSTER_TOO = True

DEFAULT_POLICY = Policy()


def run_pass(cluster, *, policy: Policy = DEFAULT_POLICY, namespace: str = "default"):
    return LiveScheduler(cluster.connect(), namespace, policy, "sched", serve="coscheduler").run_pass()


def pods_of(cluster, task):
    return [p for p in cluster.api.items("pods")
            if (p["metadata"].get("labels") or {}).get("determined") == task.allocation]


def where(cluster, task) -> list[str | None]:
    return sorted((p["spec"].get("nodeName") or "-") for p in pods_of(cluster, task))


def with_spec(task, **extra):
    """The task's pods with pod-spec fields added (what `environment.pod_spec` merges into them)."""
    for pod in task.pods:
        pod["spec"].update(extra)
    if task.job is not None:  # the real Job controller makes the pods from the Job's template
        task.job["spec"]["template"]["spec"].update(extra)
    return task


@pytest.mark.parametrize("version", ["0.26.2", "0.38.1"])
def test_a_trials_anti_affinity_among_its_own_pods_holds(cluster, version):
    """One pod per node (required anti-affinity on the trial's own label): kube-scheduler would never put two
    on one node, and the kubelet does not check it, so binding must not either."""
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=8))
    task = master_task(version, slots_per_trial=8, max_slots_per_pod=4)
    with_spec(task, affinity={**task.pods[0]["spec"].get("affinity", {}), "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"determined": task.allocation}},
            "topologyKey": "kubernetes.io/hostname"}]}})
    for i in range(2):
        cluster.api.update("nodes", f"gpu-{i}", {"metadata": {"labels": {"kubernetes.io/hostname": f"gpu-{i}"}}}, None)
    create_task_on(cluster, task)
    run_pass(cluster)
    assert where(cluster, task) == ["gpu-0", "gpu-1"]


def test_another_pods_anti_affinity_against_the_masters_pods_holds(cluster):
    """A running pod that keeps Determined's pods off its node (anti-affinity on the `determined` label)."""
    cluster.api.put(node("gpu-0", gpus=4, labels={"kubernetes.io/hostname": "gpu-0"}))  # the best fit, but
    cluster.api.put(node("gpu-1", gpus=8, labels={"kubernetes.io/hostname": "gpu-1"}))
    cluster.api.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "loner", "namespace": "default", "labels": {}},
                     "spec": {"nodeName": "gpu-0", "containers": [{"name": "c", "image": "busybox"}],
                              "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                                  "labelSelector": {"matchExpressions": [{"key": "determined",
                                                                          "operator": "Exists"}]},
                                  "topologyKey": "kubernetes.io/hostname"}]}}},
                     "status": {"phase": "Running"}})
    task = create_task_on(cluster, master_task("0.38.1", slots_per_trial=4))
    run_pass(cluster)
    assert where(cluster, task) == ["gpu-1"]


def test_a_claim_in_the_masters_namespace_is_found_there(cluster):
    """The master's pods in namespace `det` mount a claim of namespace `det`, bound to a volume on gpu-1."""
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4, labels={"kubernetes.io/hostname": f"gpu-{i}"}))
    cluster.api.put({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-data"},
                     "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                              "storageClassName": "local", "local": {"path": "/data"},
                              "claimRef": {"namespace": "det", "name": "data"},
                              "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                  {"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-1"]}]}]}}},
                     "status": {"phase": "Bound"}})
    cluster.api.put({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": "data", "namespace": "det"},
                     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "volumeName": "pv-data",
                              "resources": {"requests": {"storage": "10Gi"}}},
                     "status": {"phase": "Bound"}})
    task = master_task("0.38.1", slots_per_trial=4, namespace="det")
    with_spec(task, volumes=[*task.pods[0]["spec"]["volumes"],
                             {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    create_task_on(cluster, task)
    report = run_pass(cluster)
    assert where(cluster, task) == ["gpu-1"], report.waiting


@pytest.mark.parametrize("version", ["0.17.15", "0.38.1"])
def test_a_trial_pinned_to_a_node_by_its_pod_spec_is_bound_there(cluster, version):
    """matchFields `metadata.name In [gpu-1]` in the user's pod spec: the pod is pending, not on gpu-1 yet."""
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    task = master_task(version, slots_per_trial=4)
    pin = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}
    terms = (task.pods[0]["spec"].get("affinity") or {}).get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms") or [{}]
    with_spec(task, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{**term, **pin} for term in terms]}}})
    create_task_on(cluster, task)
    report = run_pass(cluster)
    assert where(cluster, task) == ["gpu-1"], (report.waiting, report.placed)


def test_a_masters_pod_without_the_gpu_toleration_is_not_bound_to_a_tainted_node(cluster):
    """With the policy saying the ExtendedResourceToleration plugin runs, a pod that exists already and carries
    no such toleration (it went through admission without it) must still not go to a GPU-tainted node: binding
    skips kube-scheduler's TaintToleration filter, and the kubelet checks NoExecute taints only."""
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    cluster.api.put(node("gpu-0", gpus=4, taints=taint))
    cluster.api.put(node("gpu-1", gpus=4))
    busy = create_task_on(cluster, master_task("0.38.1", experiment=1, slots_per_trial=4))
    run_pass(cluster, policy=Policy(extended_resource_toleration=True))
    assert where(cluster, busy) == ["gpu-1"]
    task = create_task_on(cluster, master_task("0.38.1", experiment=2, slots_per_trial=4))
    report = run_pass(cluster, policy=Policy(extended_resource_toleration=True))
    assert where(cluster, task) == ["-"]
    assert "1 taint nvidia.com/gpu=present:NoSchedule" in next(iter(report.waiting.values()))


def test_a_masters_pod_with_a_runtime_class_is_planned_without_a_warning(cluster):
    """`runtimeClassName: nvidia` (the GPU operator's): admission merged the class's scheduling into the pod's
    spec when the master created it, so nothing is left unmodelled; only pods det-k8s has yet to create warn."""
    cluster.api.put(node("gpu-0", gpus=4))
    if getattr(cluster, "real", False):  # the RuntimeClass admission plugin refuses a pod naming a class not there
        cluster.api.put({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                         "handler": "nvidia"})
    task = create_task_on(cluster, with_spec(master_task("0.38.1", slots_per_trial=4),
                                                    runtimeClassName="nvidia"))
    report = run_pass(cluster)
    assert where(cluster, task) == ["gpu-0"]
    assert not [p for p in report.problems if "RuntimeClass" in p], report.problems


def test_det_k8s_pods_naming_the_served_scheduler_are_never_taken_for_the_masters(cluster):
    """An experiment's pod spec naming `schedulerName: coscheduler` (copied from a Determined pod spec): its pods
    stay det-k8s's group, pinned to their node and counted there; the binder never binds, marks or reasons them."""
    from det_k8s.cli.live import entry_for
    from det_k8s.live.queue import QueueStore
    from det_k8s.scheduling.experiments import parse_experiment
    from det_k8s.scheduling.groups import build_group
    from tests.live.test_live_scheduler import SETTINGS

    cluster.api.put(node("gpu-0", gpus=4))
    text = ("name: exp-a\nresources: {slots_per_trial: 4, priority: 50}\n"
            "environment: {pod_spec: {spec: {schedulerName: coscheduler}}}\n")
    experiment = parse_experiment(text, "a.yaml").get()
    group = build_group(experiment, SETTINGS, group_id="aaaa0001", user="u", submitted_at="2026-11-21T12:00:00Z",
                        sequence=1)
    QueueStore(cluster.connect(), "default").add(entry_for(experiment, text, SETTINGS, group, "default"))
    assert list(run_pass(cluster).placed) == ["aaaa0001"]  # created, pinned to gpu-0, left to its scheduler
    trial = create_task_on(cluster, master_task("0.38.1", slots_per_trial=4, priority=70))
    report = run_pass(cluster)
    assert report.placed == {}  # gpu-0's GPUs are the experiment's
    assert where(cluster, trial) == ["-"]
    (ours,) = [p for p in cluster.api.items("pods") if p["metadata"]["name"].startswith("exp-a")]
    assert not ours["spec"].get("nodeName") and not (ours.get("status") or {}).get("conditions")
    assert not [e for e in cluster.api.items("events") if e["involvedObject"]["name"] == ours["metadata"]["name"]]


def test_why_pending_names_the_masters_trials_that_hold_the_gpus(cluster):
    """A group waiting behind the master's bound trials is told which trials hold the GPUs, as the map names them
    (and as det-k8s's own groups are named), not "pods in default"."""
    from tests.live.test_live_scheduler import submit as submit_experiment

    cluster.api.put(node("gpu-0", gpus=4))
    create_task_on(cluster, master_task("0.38.1", experiment=7, trial=3, slots_per_trial=4, priority=80))
    create_task_on(cluster, master_task("0.26.2", experiment=8, trial=5, slots_per_trial=4, priority=70))
    run_pass(cluster)
    submit_experiment(cluster, "aaaa0001", 4, 1, priority=20)
    report = run_pass(cluster)
    assert "held by exp 7 trial 3 4" in report.waiting["aaaa0001"], report.waiting
    (trial,) = [why for gid, why in report.waiting.items() if "exp8trial5" in gid]
    assert "held by exp 7 trial 3 4" in trial and "pods in default" not in trial
    assert "1 group ahead: exp 8 trial 5" in report.waiting["aaaa0001"]
