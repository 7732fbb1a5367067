"""det-k8s as the scheduler of the Determined master's task pods, through the real client against the emulator.

Pods are created exactly as each supported master creates them (`tests/support/master_pods.py`), bound by live passes
(`LiveScheduler(serve="coscheduler")`), and checked the way a user would: node of each pod, the PodScheduled
condition `kubectl describe` shows, and the Events the master copies into the trial log.
"""

from __future__ import annotations

import time

import pytest

from det_k8s.kube.kinds import PODS
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.support.k8s_emulator import node
from tests.support.master_pods import VERSIONS, create_pods, create_task, honour_preemption, master_task

ON_REAL_CLUSTER_TOO = True  # the master's pods bound on the real API server too, beside the real kube-scheduler
REWRITTEN = ("nodes are available", "successfully assigned", "pod triggered scale-up", "skip schedule deleting pod")


DEFAULT_POLICY = Policy()


def run_pass(cluster, *, policy: Policy = DEFAULT_POLICY, holder: str = "sched", workers: int = 8):
    return LiveScheduler(cluster.connect(), "default", policy, holder, serve="coscheduler", workers=workers).run_pass()


def nodes(cluster, count: int, gpus: int = 4) -> None:
    for i in range(count):
        cluster.api.put(node(f"gpu-{i}", gpus=gpus))


def submit(cluster, version: str, **kwargs):
    return create_task(cluster.connect(), master_task(version, **kwargs), job_controller=getattr(cluster, "real", False))


def pods_of(cluster, task):
    return [p for p in cluster.api.items("pods") if p["metadata"]["labels"].get("determined") == task.allocation]


def condition(pod):
    return next((c for c in (pod.get("status") or {}).get("conditions") or () if c["type"] == "PodScheduled"), None)


def events_on(cluster, pod):
    """The events on `pod` (a name, or the pod: then not those on an earlier pod of the same name, which on a real
    cluster a controller or an earlier test's event recorder may still be writing after that test was cleaned up)."""
    name, uid = (pod, None) if isinstance(pod, str) else (pod["metadata"]["name"], pod["metadata"].get("uid"))
    return [e for e in cluster.api.items("events") if e["involvedObject"]["name"] == name
            and (uid is None or e["involvedObject"].get("uid") in (None, uid))]


def partly_bound(cluster, task) -> bool:
    pods = pods_of(cluster, task)
    bound = [p for p in pods if p["spec"].get("nodeName")]
    return 0 < len(bound) < len(pods)


def gpu_use(cluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in cluster.api.items("pods"):
        where = pod["spec"].get("nodeName")
        if where and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            asked = pod["spec"]["containers"][-1]["resources"].get("requests", {}).get("nvidia.com/gpu", "0")
            used[where] = used.get(where, 0) + int(asked)
    return used


def assert_waiting_with_reason(cluster, task, words: str) -> None:
    for pod in pods_of(cluster, task):
        assert not pod["spec"].get("nodeName")
        scheduled = condition(pod)
        assert scheduled is not None and scheduled["status"] == "False" and scheduled["reason"] == "Unschedulable"
        assert words in scheduled["message"] and scheduled["message"].startswith("det-k8s: ")
        found = events_on(cluster, pod)
        assert found and all(e["source"]["component"] == "det-k8s" and e["reportingComponent"] == "det-k8s"
                             for e in found)
        assert any(words in e["message"] for e in found)
        for text in [scheduled["message"], *(e["message"] for e in found)]:
            assert not any(phrase in text.lower() for phrase in REWRITTEN), text


@pytest.mark.parametrize("version", VERSIONS)
def test_a_distributed_trial_is_bound_whole(cluster, version):
    nodes(cluster, 2)
    task = submit(cluster, version, slots_per_trial=8, max_slots_per_pod=4)
    report = run_pass(cluster)
    assert list(report.placed) == [master_pod_group_id(task)]
    pods = pods_of(cluster, task)
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-0", "gpu-1"]
    for pod in pods:
        assert condition(pod)["status"] == "True"  # set by the API server's binding
        (scheduled,) = [e for e in events_on(cluster, pod) if e["reason"] == "Scheduled"]
        name, where = pod["metadata"]["name"], pod["spec"]["nodeName"]
        assert scheduled["message"] == f"Successfully assigned default/{name} to {where}"


def master_pod_group_id(task) -> str:
    return f"default/{task.group_name}" + ("" if task.job else f"#{task.allocation}")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.emulator_only
def test_a_gang_is_bound_only_once_all_its_pods_exist(cluster, version):
    nodes(cluster, 3)
    task = master_task(version, slots_per_trial=12, max_slots_per_pod=4)
    create_task(cluster.connect(), task, pods=2)
    run_pass(cluster)
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, task))
    assert_waiting_with_reason(cluster, task, "2 of 3 exist")
    create_pods(cluster.connect(), task, task.pods[2:])
    run_pass(cluster)
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, task))


@pytest.mark.parametrize("version", VERSIONS)
def test_deadlock_one_a_16_gpu_trial_on_three_4_gpu_nodes_binds_nothing_and_says_why(cluster, version):
    nodes(cluster, 3)
    task = submit(cluster, version, slots_per_trial=16, max_slots_per_pod=4)
    report = run_pass(cluster)
    assert report.placed == {}
    assert not partly_bound(cluster, task) and gpu_use(cluster) == {}
    assert_waiting_with_reason(cluster, task, "never fits this cluster: needs 16 nvidia.com/gpu")
    assert all(e["type"] == "Warning" for p in pods_of(cluster, task) for e in events_on(cluster, p))


@pytest.mark.parametrize("version", VERSIONS)
def test_deadlock_two_two_12_gpu_trials_on_12_gpus_one_runs_whole_the_other_waits_whole(cluster, version):
    nodes(cluster, 3)
    first = submit(cluster, version, experiment=1, slots_per_trial=12)
    second = submit(cluster, version, experiment=2, slots_per_trial=12)
    run_pass(cluster)
    assert not partly_bound(cluster, first) and not partly_bound(cluster, second)
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, first))  # submitted first, same priority
    assert_waiting_with_reason(cluster, second, "waiting for resources: needs 3 pods x 4 nvidia.com/gpu")
    assert all(used <= 4 for used in gpu_use(cluster).values())
    for pod in pods_of(cluster, first):  # the first trial ends
        cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Succeeded"}})
    run_pass(cluster)
    if getattr(cluster, "real", False):  # the real Job controller and kwok act on the ended pods meanwhile: passes
        deadline = time.monotonic() + 60  # until then (a guard against hanging, however long they take when loaded)
        while not all(p["spec"].get("nodeName") for p in pods_of(cluster, second)) and time.monotonic() < deadline:
            time.sleep(0.5)
            run_pass(cluster)
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, second))
    assert not partly_bound(cluster, second)


def test_why_pending_is_written_once_per_reason_not_every_pass(cluster):
    nodes(cluster, 3)
    first = submit(cluster, "0.38.1", experiment=1, slots_per_trial=12)
    second = submit(cluster, "0.38.1", experiment=2, slots_per_trial=12)
    run_pass(cluster)
    # on a real cluster kwok moves the bound trial's pods to Running a moment later: let that land, and the pass
    # that sees it, before counting (the reason written for the waiting trial may say more once they run)
    deadline = time.monotonic() + 60
    while not all(p.get("status", {}).get("phase") == "Running" for p in pods_of(cluster, first)) and \
            getattr(cluster, "real", False) and time.monotonic() < deadline:
        time.sleep(0.2)
    run_pass(cluster)
    ours = {p["metadata"]["name"] for task in (first, second) for p in pods_of(cluster, task)}

    def counts() -> dict[str, int]:
        # det-k8s's events on the trials' pods (on a real cluster, nodes have events too, and a Kubernetes controller
        # may write its own on these pods a moment later: the taint-eviction controller once a new node's not-ready
        # taint is lifted, seen once in CI on a loaded machine)
        return {e["metadata"]["name"]: e["count"] for e in cluster.api.items("events")
                if (e.get("involvedObject") or {}).get("name") in ours
                and (e.get("source") or {}).get("component") == "det-k8s"}

    before = counts()
    assert before  # (the waiting trial's reason, at least)
    versions = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in pods_of(cluster, second)}
    for _ in range(3):
        run_pass(cluster)
    assert counts() == before
    assert {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in pods_of(cluster, second)} == versions


def test_a_reason_that_comes_back_is_counted_on_its_event(cluster):
    from det_k8s.kube.events import EventRecorder
    from det_k8s.live.binder import Binder
    from det_k8s.scheduling.master import master_groups, master_pod

    nodes(cluster, 1)
    task = submit(cluster, "0.38.1", slots_per_trial=4)
    api = cluster.connect()
    binder = Binder(api, EventRecorder(api, "test"))
    for text in ("det-k8s: A; x", "det-k8s: B; y", "det-k8s: A; x"):
        (group,) = master_groups([master_pod(p) for p in cluster.api.items("pods")])
        assert binder.report_waiting(group, "GangWaiting", text) == 1
    (pod,) = pods_of(cluster, task)
    counts = sorted((e["message"], e["count"]) for e in events_on(cluster, pod))
    assert counts == [("det-k8s: A; x", 2), ("det-k8s: B; y", 1)]
    (a,) = [e for e in events_on(cluster, pod) if e["message"] == "det-k8s: A; x"]
    assert a["lastTimestamp"] >= a["firstTimestamp"]


@pytest.mark.parametrize("version", VERSIONS)
def test_higher_priority_is_bound_first(cluster, version):
    nodes(cluster, 1)
    low = submit(cluster, version, experiment=1, slots_per_trial=4, priority=20)
    high = submit(cluster, version, experiment=2, slots_per_trial=4, priority=80)
    run_pass(cluster)
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, high))
    assert all(p["spec"]["priority"] == 80 for p in pods_of(cluster, high))  # resolved by admission
    assert_waiting_with_reason(cluster, low, "waiting for resources")


@pytest.mark.parametrize("version", VERSIONS)
def test_preemption_marks_the_whole_lower_trial_and_binds_the_preemptor_once_it_is_gone(cluster, version):
    nodes(cluster, 2)
    low = submit(cluster, version, experiment=1, slots_per_trial=8, priority=20)
    run_pass(cluster)
    high = submit(cluster, version, experiment=2, slots_per_trial=8, priority=80)
    report = run_pass(cluster, policy=Policy(preemption=True))
    assert list(report.marked) == [master_pod_group_id(low)]
    assert all(p["metadata"]["labels"].get("determined-preemption") == "true" for p in pods_of(cluster, low))
    assert_waiting_with_reason(cluster, high, "waits for preempted group(s) to stop")
    report = run_pass(cluster, policy=Policy(preemption=True))  # still checkpointing: no second victim
    assert report.marked == {} and not any(p["spec"].get("nodeName") for p in pods_of(cluster, high))
    assert honour_preemption(cluster.api) == [low.allocation]  # the master checkpoints and stops the trial
    run_pass(cluster, policy=Policy(preemption=True))
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, high)) and pods_of(cluster, low) == []
    assert all(used <= 4 for used in gpu_use(cluster).values())


def test_an_equal_priority_trial_and_a_command_are_never_victims(cluster):
    nodes(cluster, 2)
    same = submit(cluster, "0.38.1", experiment=1, slots_per_trial=4, priority=80)
    command = submit(cluster, "0.38.1", task_type="COMMAND", slots_per_trial=4, priority=10)
    run_pass(cluster)
    high = submit(cluster, "0.38.1", experiment=2, slots_per_trial=4, priority=80)
    report = run_pass(cluster, policy=Policy(preemption=True))
    assert report.marked == {}
    assert not any("determined-preemption" in p["metadata"]["labels"] for p in cluster.api.items("pods"))
    assert_waiting_with_reason(cluster, high, "waiting for resources")
    del same, command


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.emulator_only
def test_a_binding_failing_part_way_deletes_what_was_bound(cluster, version, run_cli):
    nodes(cluster, 2)
    task = submit(cluster, version, slots_per_trial=8)
    second = sorted(task.names)[1]
    cluster.api.fail("POST", "pods", 409, f'pod {second} is already assigned to node "gpu-9"', name=second)
    report = run_pass(cluster, workers=1)
    (why,) = report.repaired.values()
    assert "binding failed part-way" in why and "deleted 1 bound pod so" in why
    remaining = pods_of(cluster, task)
    assert [p["metadata"]["name"] for p in remaining] == [second]  # the bound one is gone: the master restarts
    assert not any(p["spec"].get("nodeName") for p in remaining)
    failed = [e for e in cluster.api.items("events") if e["reason"] == "GangBindingFailed"]
    assert {e["involvedObject"]["name"] for e in failed} == set(task.names)
    assert all(e["type"] == "Warning" for e in failed)
    assert all("; deleted the 1 pod already bound, so Determined restarts" in e["message"] for e in failed)
    result = run_cli("doctor")
    assert "GangBindingFailed" in result.out and "Groups det-k8s tore down" in result.out


@pytest.mark.emulator_only
def test_a_binding_that_may_have_landed_is_not_counted_as_bound(cluster):
    nodes(cluster, 2)
    task = submit(cluster, "0.38.1", slots_per_trial=8)
    second = sorted(task.names)[1]
    cluster.api.fail("POST", "pods", 504, "the server was unable to return a response in the time allotted",
                     name=second)
    report = run_pass(cluster, workers=1)
    (why,) = report.repaired.values()
    assert "deleted 1 bound pod and 1 whose binding may have landed so Determined restarts it whole" in why
    assert "pod(s)" not in why
    (event,) = {e["message"] for e in cluster.api.items("events") if e["reason"] == "GangBindingFailed"}
    assert "; deleted the 1 pod already bound and 1 pod whose binding may have landed, so Determined" in event


def test_a_group_found_partly_bound_is_torn_down_and_doctor_reports_it(cluster, run_cli):
    nodes(cluster, 2)
    task = submit(cluster, "0.26.2", slots_per_trial=8)
    api = cluster.connect()
    from det_k8s.kube.kinds import PODS

    first = cluster.api.get("pods", task.names[0])
    api.create_subresource(PODS, task.names[0], "binding", {  # an earlier scheduler stopped after one binding
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": task.names[0], "uid": first["metadata"]["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-0"}})
    result = run_cli("doctor", "-o", "json")
    assert result.code == 1 and task.allocation in result.out  # partly started, before the pass
    report = run_pass(cluster)
    assert list(report.repaired) == [master_pod_group_id(task)]
    assert [p["metadata"]["name"] for p in pods_of(cluster, task)] == [task.names[1]]
    result = run_cli("doctor", "-o", "json")
    assert result.code == 0  # repaired: nothing partly started any more, but the repair is reported
    import json

    (repaired,) = json.loads(result.out)["repairedGroups"]
    assert repaired["reason"] == "GangPartlyBound" and sorted(repaired["pods"]) == sorted(task.names)
    assert "deleted the bound pods so Determined restarts the task whole" in repaired["message"]


def test_the_masters_trial_and_det_k8s_experiments_share_one_queue(cluster):
    from det_k8s.live.queue import QueueStore
    from tests.live.test_live_scheduler import submit as submit_experiment

    nodes(cluster, 1)
    submit_experiment(cluster, "aaaa0001", 4, 1, priority=50)
    trial = submit(cluster, "0.38.1", slots_per_trial=4, priority=70)
    report = run_pass(cluster)
    assert list(report.placed) == [master_pod_group_id(trial)]  # higher priority, whichever kind
    assert "aaaa0001" in report.waiting
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").state == "queued"


@pytest.mark.emulator_only
def test_a_masters_trial_preempts_a_lower_det_k8s_group_and_the_reverse(cluster):
    from det_k8s.live.queue import QueueStore
    from tests.live.test_live_scheduler import submit as submit_experiment

    nodes(cluster, 1)
    submit_experiment(cluster, "aaaa0001", 4, 1, priority=10)
    run_pass(cluster)
    trial = submit(cluster, "0.38.1", slots_per_trial=4, priority=70)
    report = run_pass(cluster, policy=Policy(preemption=True))
    assert report.preempted == {"aaaa0001": master_pod_group_id(trial)}
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").state == "queued"
    cluster.api.finish_deletions()
    run_pass(cluster, policy=Policy(preemption=True))
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, trial))
    # and a det-k8s experiment of higher priority marks the master's trial for preemption
    submit_experiment(cluster, "bbbb0002", 4, 2, priority=90)
    report = run_pass(cluster, policy=Policy(preemption=True))
    assert report.marked == {master_pod_group_id(trial): "bbbb0002"}


def test_experiment_create_passes_keep_the_one_priority_order_while_a_loop_serves_the_master(cluster):
    from det_k8s.live.queue import QueueStore
    from tests.live.test_live_scheduler import submit as submit_experiment

    nodes(cluster, 1)
    api = cluster.connect()
    loop = LiveScheduler(api, "default", Policy(), "loop", serve="coscheduler", advertise_for=120)
    busy = submit(cluster, "0.38.1", experiment=1, slots_per_trial=4, priority=50)
    loop.run_pass()  # the loop binds it, and says in the Lease that it serves coscheduler
    trial = submit(cluster, "0.38.1", experiment=2, slots_per_trial=4, priority=80)  # waits for busy's GPUs
    submit_experiment(cluster, "aaaa0001", 4, 1, priority=20)
    for pod in pods_of(cluster, busy):  # busy ends: 4 GPUs free, wanted by the trial (80) and aaaa0001 (20)
        cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Succeeded"}})
    create_pass = LiveScheduler(api, "default", Policy(), "someone").run_pass()  # what `experiment create` runs
    assert create_pass.placed == {} and "aaaa0001" in create_pass.waiting  # the trial comes first, even here
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, trial))  # and it only planned it
    assert QueueStore(api, "default").get("aaaa0001").state == "queued"
    loop.run_pass()
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, trial))


def test_without_a_serving_loop_experiment_create_ignores_the_masters_pending_pods(cluster):
    from tests.live.test_live_scheduler import submit as submit_experiment

    nodes(cluster, 1)
    submit(cluster, "0.38.1", slots_per_trial=4, priority=80)  # nobody serves coscheduler: it stays pending
    submit_experiment(cluster, "aaaa0001", 4, 1, priority=20)
    report = LiveScheduler(cluster.connect(), "default", Policy(), "someone").run_pass()
    assert list(report.placed) == ["aaaa0001"]


def test_a_gang_bound_by_someone_else_with_a_pod_missing_is_torn_down(cluster, run_cli):
    """Issue 24 (4), found on the real control plane: one pod bound by another hand, the other deleted. It was counted
    as running, never torn down, and held its GPUs; doctor said the next pass would delete it."""
    nodes(cluster, 2)
    task = submit(cluster, "0.26.2", slots_per_trial=8)
    first, second = task.names
    cluster.connect().create_subresource(PODS, first, "binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": first, "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-0"}}, "default")
    cluster.api.remove("pods", second)
    report = run_pass(cluster)
    assert master_pod_group_id(task) in report.repaired
    left = cluster.api.get("pods", first)
    assert left is None or left["metadata"].get("deletionTimestamp")


def test_a_gang_whose_pod_finished_first_is_not_torn_down(cluster):
    nodes(cluster, 2)
    task = submit(cluster, "0.26.2", slots_per_trial=8)
    run_pass(cluster)
    first, second = task.names
    cluster.api.update("pods", first, {"status": {"phase": "Succeeded"}})
    report = run_pass(cluster)
    assert report.repaired == {}
    assert cluster.api.get("pods", second)["spec"]["nodeName"]
