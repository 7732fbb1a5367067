"""`det-k8s doctor` finds partly-started groups, also ones det-k8s did not create (API emulator)."""

from __future__ import annotations

import json

import pytest

from tests.support.k8s_emulator import node, pod

ON_REAL_CLUSTER_TOO = True  # doctor against the real API server too


def four_gpu_nodes(cluster, n: int = 3) -> None:
    for i in range(n):
        cluster.api.put(node(f"gpu-{i}", gpus=4))


def test_reports_the_documents_deadlock_from_determined_master_pods(run_cli, cluster):
    four_gpu_nodes(cluster)
    labels = {"determined": "exp-7.trial-7.1"}
    for i in range(4):  # the 16-GPU trial on three 4-GPU nodes: three pods run, the fourth never starts
        cluster.api.put(pod(f"exp-7-trial-7-{i}", labels=labels, node_name=f"gpu-{i}" if i < 3 else None,
                            phase="Running" if i < 3 else "Pending", requests={"nvidia.com/gpu": "4"}))
    result = run_cli("doctor", "-o", "json")
    assert result.code == 1
    (group,) = json.loads(result.out)["partialGroups"]
    assert (group["owner"], group["gpusHeld"], group["waiting"]) == ("determined", 12, ["exp-7-trial-7-3"])
    assert "pause or kill this experiment in Determined" in group["advice"]
    assert result.err.strip() == "error: 1 partly-started group(s) holding 12 GPU(s)"


@pytest.mark.emulator_only  # their pending pods name no scheduler: the real kube-scheduler places them
def test_names_a_deadlock_between_two_groups(run_cli, cluster):
    four_gpu_nodes(cluster)
    for name, nodes in (("a", ["gpu-0", "gpu-1", None]), ("b", ["gpu-2", None, None])):
        for i, where in enumerate(nodes):
            cluster.api.put(pod(f"{name}-{i}", labels={"determined": name}, node_name=where,
                                phase="Running" if where else "Pending", requests={"nvidia.com/gpu": "4"}))
    result = run_cli("doctor")
    assert result.code == 1
    assert "deadlock: a, b each wait for resources the others hold" in result.err


def test_a_healthy_cluster_exits_0(run_cli, cluster):
    four_gpu_nodes(cluster)
    cluster.api.put(pod("ok-0", labels={"determined": "ok"}, node_name="gpu-0", requests={"nvidia.com/gpu": "4"}))
    result = run_cli("doctor")
    assert result.code == 0
    assert "no partly-started groups in namespace default" in result.err


@pytest.mark.emulator_only  # their pending pods name no scheduler: the real kube-scheduler places them
def test_other_namespaces_only_with_all_namespaces(run_cli, cluster):
    four_gpu_nodes(cluster)
    cluster.api.put(pod("x-0", namespace="team-b", labels={"determined": "x"}, node_name="gpu-0",
                        requests={"nvidia.com/gpu": "4"}))
    cluster.api.put(pod("x-1", namespace="team-b", labels={"determined": "x"}, phase="Pending",
                        requests={"nvidia.com/gpu": "4"}))
    assert run_cli("doctor").code == 0
    assert run_cli("doctor", "-A").code == 1


@pytest.mark.emulator_only
def test_without_permission_to_list_events_it_still_reports_partial_groups(run_cli, cluster):
    four_gpu_nodes(cluster)
    for i, where in enumerate(["gpu-0", None]):
        cluster.api.put(pod(f"a-{i}", labels={"determined": "a"}, node_name=where,
                            phase="Running" if where else "Pending", requests={"nvidia.com/gpu": "4"}))
    cluster.api.fail("GET", "events", 403, 'events is forbidden: User "u" cannot list resource "events"')
    result = run_cli("doctor")
    assert result.code == 1
    assert "cannot list events, so the groups det-k8s tore down are not shown" in result.err
    assert "1 partly-started group(s) holding 4 GPU(s)" in result.err


def test_lists_the_schedulers_the_pods_name_and_the_other_gangs_among_them(run_cli, cluster):
    four_gpu_nodes(cluster, 1)
    for name, scheduler, labels, marks in (
            ("trial", "coscheduler", {}, {}),
            ("volcano", "coscheduler", {}, {"scheduling.k8s.io/group-name": "pg"}),
            ("kai", "kai-scheduler", {"kai.scheduler/queue": "team-a"}, {})):
        body = pod(name, phase="Pending", requests={"nvidia.com/gpu": "1"}, labels=labels)
        body["spec"]["schedulerName"] = scheduler
        body["metadata"]["annotations"] = marks
        cluster.api.put(body)
    result = run_cli("doctor", "-o", "json")
    assert result.code == 0, result.err
    rows = {row["name"]: row for row in json.loads(result.out)["schedulers"]}
    assert rows["coscheduler"] == {"name": "coscheduler", "pending": 2, "bound": 0, "otherGangs": {"Volcano": 1},
                                   "servedByDetK8s": True, "pods": ["default/trial", "default/volcano"]}
    assert rows["kai-scheduler"]["otherGangs"] == {"KAI": 1} and not rows["kai-scheduler"]["servedByDetK8s"]
    table = run_cli("doctor")
    assert table.code == 0, table.err
    flat = " ".join(table.out.split())
    assert "Schedulers" in flat and "Volcano 1" in flat and "det-k8s (not their gangs' pods)" in flat


def test_the_det_k8s_schedulers_pods_that_cannot_pull_their_image_are_a_finding_with_the_fix(run_cli, cluster):
    from tests.cli.test_status import scheduler_pod

    cluster.api.put(scheduler_pod(waiting="ErrImagePull", image="registry.example.com/det-k8s:0.1"))
    result = run_cli("doctor")
    assert result.code == 1
    text = " ".join(result.out.split())
    assert "det-k8s's scheduler pods" in result.out and "ErrImagePull" in result.out
    assert ("Problem: det-k8s's gang scheduler cannot start: its pod det-k8s-scheduler-demo-6c9f7-x2k4p is in "
            "ErrImagePull for registry.example.com/det-k8s:0.1; the master's task pods wait unbound") in text
    assert "set detK8sScheduler.image to it" in text and "detK8sScheduler.imagePullSecretName" in text
    assert "det-k8s's scheduler cannot run (1 problem above)" in result.err
    data = json.loads(run_cli("doctor", "-o", "json").out)
    assert data["detK8sSchedulerPods"][0]["deployment"] == "det-k8s-scheduler-demo"
    assert data["detK8sSchedulerProblems"][0]["problem"].startswith("det-k8s's gang scheduler cannot start")


def test_a_ready_det_k8s_scheduler_pod_is_no_finding(run_cli, cluster):
    from tests.cli.test_status import scheduler_pod

    cluster.api.put(scheduler_pod(waiting=None, ready=True))
    cluster.api.put(scheduler_pod(waiting="ImagePullBackOff", name="det-k8s-scheduler-demo-6c9f7-b7c8d"))
    result = run_cli("doctor")
    assert result.code == 0, result.out + result.err
    assert "cannot start" not in result.out
