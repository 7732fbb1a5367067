"""Attempts to break det-k8s as the scheduler of the master's pods, as a Volcano or Kueue engineer would try.

Each test is a scenario that failed before its fix: the real `kubernetes` client against the emulator, pods as
each master version creates them (`tests/support/master_pods.py`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.live.test_master_scheduling import events_on, nodes, pods_of, run_pass, submit
from tests.support.master_pods import VERSIONS
from tests.support.needs import need

ON_REAL_CLUSTER_TOO = True


@pytest.mark.emulator_only  # the emulator fails API calls on demand: fault injection
@pytest.mark.parametrize("version", VERSIONS)
def test_a_refused_condition_write_does_not_stop_the_pass_and_the_reason_still_goes_out_once(cluster, version):
    nodes(cluster, 1)
    running = submit(cluster, version, experiment=1, slots_per_trial=4)
    second = submit(cluster, version, experiment=2, slots_per_trial=4)
    third = submit(cluster, version, experiment=3, slots_per_trial=4)
    # RBAC without pods/status (or a webhook refusing it): every condition write is refused
    cluster.api.fail("PATCH", "pods", 403, 'pods is forbidden: User "det-k8s" cannot patch resource "pods/status"',
                     times=1000)
    loop = LiveScheduler(cluster.connect(), "default", Policy(), "sched", serve="coscheduler")  # one, as `scheduler run`
    report = loop.run_pass()  # raised Forbidden before the fix: the loop counted a failed pass and backed off
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, running))
    assert len(report.waiting) == 2
    for task in (second, third):
        for pod in pods_of(cluster, task):
            (event,) = [e for e in events_on(cluster, pod["metadata"]["name"])]
            assert event["reason"] == "GangWaiting" and "waiting for resources" in event["message"]
            assert any(pod["metadata"]["name"] in problem and "PodScheduled" in problem for problem in report.problems)
    before = {e["metadata"]["name"]: e["count"] for e in cluster.api.items("events")}
    loop.run_pass()
    assert {e["metadata"]["name"]: e["count"] for e in cluster.api.items("events")} == before  # no event per pass


@pytest.mark.parametrize("version", VERSIONS)
def test_a_node_removed_between_plan_and_binding_does_not_leave_the_gang_holding_gpus(cluster, version, run_cli):
    from det_k8s.kube.kinds import PODS

    nodes(cluster, 2)
    task = submit(cluster, version, slots_per_trial=8)
    # a pass planned gpu-0 and gpu-1, then gpu-1 went away (scale-down, a spot VM) before its binding: the API
    # server accepts a binding to any node name (BindingREST checks only the pod), so both bindings succeed
    api = cluster.connect()
    for pod, where in zip(sorted(task.names), ("gpu-0", "gpu-1"), strict=True):
        uid = cluster.api.get("pods", pod)["metadata"]["uid"]
        api.create_subresource(PODS, pod, "binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {
            "name": pod, "uid": uid}, "target": {"apiVersion": "v1", "kind": "Node", "name": where}})
    cluster.api.remove("nodes", "gpu-1")
    report = run_pass(cluster)
    (why,) = report.repaired.values()  # before the fix: nothing; gpu-0's GPUs held by a trial that can never start
    assert "no longer exists" in why and "deleted 2 bound pods" in why
    # the master sees its pods go and restarts the trial whole; on a real cluster kwok confirms the deletion on gpu-0,
    # while the pod bound to gpu-1 (gone: no kubelet confirms) stays Terminating until PodGC force-deletes it
    deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion
    while [p for p in pods_of(cluster, task) if p["spec"].get("nodeName") != "gpu-1"]:
        assert time.monotonic() < deadline, "det-k8s's deletion of the pod on gpu-0 never completed"
        time.sleep(0.05)
    assert [p["metadata"]["name"] for p in pods_of(cluster, task) if not p["metadata"].get("deletionTimestamp")] == []
    if not getattr(cluster, "real", False):
        assert pods_of(cluster, task) == []
    lost = [e for e in cluster.api.items("events") if e["reason"] == "GangNodeLost"]
    assert {e["involvedObject"]["name"] for e in lost} == set(task.names) and "gpu-1" in lost[0]["message"]
    result = run_cli("doctor")
    assert "GangNodeLost" in result.out


@pytest.mark.emulator_only  # the emulator fails API calls on demand: fault injection
def test_a_node_the_view_has_not_seen_yet_is_not_taken_for_gone(cluster):
    from det_k8s.kube.kinds import PODS

    nodes(cluster, 1)
    task = submit(cluster, "0.38.1", slots_per_trial=4)
    (pod,) = task.names
    api = cluster.connect()
    api.create_subresource(PODS, pod, "binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {
        "name": pod, "uid": cluster.api.get("pods", pod)["metadata"]["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-new"}})
    cluster.api.fail("GET", "nodes", 500, "etcdserver: request timed out", name="gpu-new")  # cannot confirm it
    report = run_pass(cluster)
    assert report.repaired == {} and [p["spec"]["nodeName"] for p in pods_of(cluster, task)] == ["gpu-new"]


CHARTS = Path(__file__).resolve().parents[2].parent / "shared" / "determined" / "charts"


@pytest.mark.parametrize("tag", ["0.17.15", "v0.38.1"])
def test_scheduler_run_names_the_official_charts_coscheduler_that_would_fight_it(cluster, run_cli, helm3, tmp_path,
                                                                                 tag):
    from tests.integration.test_helm_chart import helm_run

    need((CHARTS / tag).is_dir(), f"{CHARTS / tag} is absent: the official charts are read from there")
    rendered = helm_run(helm3, "template", "det", str(CHARTS / tag), "--namespace", "det",
                        "--set", "defaultScheduler=coscheduler", "--set", "maxSlotsPerPod=4",
                        "--set", "checkpointStorage.type=shared_fs", "--set", "checkpointStorage.hostPath=/tmp",
                        "--set", "initialUserPassword=Not-A-Real-Secret-1",
                        home=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    deployments = [d for d in yaml.safe_load_all(rendered.stdout) if d and d.get("kind") == "Deployment"]
    plugin = [d for d in deployments if any("--scheduler-name=coscheduler" in " ".join(map(str, c.get("command") or []))
                                            + " ".join(map(str, c.get("args") or []))
                                            for c in d["spec"]["template"]["spec"]["containers"])]
    assert plugin, [d["metadata"]["name"] for d in deployments]  # the oracle: what the official chart deploys
    for deployment in deployments:  # the master's Deployment too: it must not be taken for a scheduler
        deployment["metadata"].setdefault("namespace", "det")
        cluster.api.put(deployment)
    try:
        scheduler_run_refuses(cluster, run_cli, plugin[0])
    finally:  # the plugin's Deployment is in kube-system, which a real cluster keeps from one test to the next
        for deployment in deployments:
            cluster.api.remove("deployments", deployment["metadata"]["name"], deployment["metadata"]["namespace"])


def scheduler_run_refuses(cluster, run_cli, plugin) -> None:
    nodes(cluster, 1)
    refused = run_cli("scheduler", "run", "--once")  # an error, not a warning (issue 21): it would fight it
    assert refused.code == 1, refused.err
    where = f"{plugin['metadata']['namespace']}/{plugin['metadata']['name']}"
    assert f"Deployment {where} (" in refused.err and "also serves scheduler coscheduler" in refused.err
    assert "--replicas=0" in refused.err and "--force" in refused.err
    assert refused.err.count("also serves scheduler") == 1
    forced = run_cli("scheduler", "run", "--once", "--force")
    assert forced.code == 0, forced.err
    assert "also serves scheduler coscheduler" in forced.err and "partly bound (--force)" in " ".join(forced.err.split())
    quiet = run_cli("scheduler", "run", "--once", "--scheduler-name", "")  # det-k8s's own queue only: no rival
    assert quiet.code == 0 and "also serves scheduler" not in quiet.err


@pytest.mark.parametrize("version", VERSIONS)
def test_a_gang_with_a_gated_pod_waits_for_its_gates_and_is_never_torn_down(cluster, version):
    from tests.support.master_pods import create_task_on, master_task

    nodes(cluster, 2)
    task = master_task(version, slots_per_trial=8)
    gate = [{"name": "kueue.x-k8s.io/admission"}]
    if task.job is not None and getattr(cluster, "real", False):
        # the real Job controller makes every pod from the Job's template: all gated, then all but one let go
        task.job["spec"]["template"]["spec"]["schedulingGates"] = gate
        create_task_on(cluster, task)
        gated = sorted(task.names)[1]
        for name in task.names:
            if name != gated:
                cluster.api.update("pods", name, {"spec": {"schedulingGates": None}})
    else:
        gated = sorted(task.names)[1]
        for pod in task.pods:  # Kueue's pod integration (or another queue controller) holds one pod back
            if pod["metadata"]["name"] == gated:
                pod["spec"]["schedulingGates"] = gate
        create_task_on(cluster, task)
    for _ in range(2):  # before the fix: bound the other pod, the gated one's binding got 409, tore it down
        report = run_pass(cluster)
        assert report.placed == {} and report.repaired == {}
        assert "waits for its scheduling gates to be removed: kueue.x-k8s.io/admission" in "".join(
            report.waiting.values())
    pods = pods_of(cluster, task)
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(task.names)
    assert not any(p["spec"].get("nodeName") for p in pods)
    assert not any(e["reason"].startswith("Gang") for e in cluster.api.items("events"))  # nothing to tear down
    cluster.api.update("pods", gated, {"spec": {"schedulingGates": None}})  # the queue controller admits it
    report = run_pass(cluster)
    assert len(report.placed) == 1 and all(p["spec"].get("nodeName") for p in pods_of(cluster, task))
