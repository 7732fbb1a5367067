"""Scheduling passes against the API emulator: two clients racing for the same GPUs, only one wins."""

from __future__ import annotations

import datetime
import threading

import pytest

from det_k8s.live.lease import LeaseHeld
from det_k8s.live.queue import FAILED, QueueStore
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.groups import build_group
from det_k8s.scheduling.model import Policy
from det_k8s.settings import Document, load_settings
from tests.support.builders import node_of
from tests.support.k8s_emulator import node

SETTINGS = load_settings([Document("s", "maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")]).settings()


def submit(cluster, group_id: str, slots: int, sequence: int, priority: int = 50) -> None:
    from det_k8s.cli.live import entry_for

    text = f"name: exp-{group_id}\nresources: {{slots_per_trial: {slots}, priority: {priority}}}\n"
    experiment = parse_experiment(text, f"{group_id}.yaml").get()
    group = build_group(experiment, SETTINGS, group_id=group_id, user="u", submitted_at="2026-11-21T12:00:00Z",
                        sequence=sequence)
    QueueStore(cluster.connect(), "default").add(entry_for(experiment, text, SETTINGS, group, "default"))


def gpu_use(cluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in cluster.api.items("pods"):
        gpus = int(pod["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu", "0"))
        used[node_of(pod)] = used.get(node_of(pod), 0) + gpus
    return used


def leave_pods(cluster, manifests, status=None) -> None:
    """Put a group's pods in the cluster as an earlier, unrecorded pass would have left them (pod i on gpu-i)."""
    for i, manifest in enumerate(manifests):
        pod = {**manifest, "spec": {**manifest["spec"], "nodeName": f"gpu-{i}"}}
        cluster.api.put({**pod, "status": status} if status else pod)


@pytest.fixture
def twelve_gpus(cluster):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    return cluster


@pytest.mark.parametrize("round_", range(5))
def test_two_clients_racing_for_the_same_gpus_only_one_group_wins(twelve_gpus, round_):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    submit(cluster, "bbbb0002", 12, 2)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def client(name: str) -> None:
        scheduler = LiveScheduler(cluster.connect(), "default", Policy(), name, lease_wait=20)
        barrier.wait()
        try:
            scheduler.run_pass()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(f"client-{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    groups = {p["metadata"]["labels"]["det-k8s.io/group"] for p in cluster.api.items("pods")}
    assert len(groups) == 1  # exactly one group runs, whole
    assert len(cluster.api.items("pods")) == 3
    assert all(used <= 4 for used in gpu_use(cluster).values())
    states = {e.id: e.state for e in QueueStore(cluster.connect(), "default").entries()}
    assert sorted(states.values()) == ["queued", "running"]


def test_a_pass_refuses_to_run_while_another_client_holds_the_lease(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    holder = LiveScheduler(cluster.connect(), "default", Policy(), "holder")
    other = LiveScheduler(cluster.connect(), "default", Policy(), "other", lease_wait=0)
    with holder.lease().held(), pytest.raises(LeaseHeld):
        other.run_pass()
    assert cluster.api.items("pods") == []


def test_pods_created_by_a_pass_count_as_used_by_the_next_before_they_run(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 8, 1)
    LiveScheduler(cluster.connect(), "default", Policy(), "first").run_pass()
    assert all(p["status"]["phase"] == "Pending" for p in cluster.api.items("pods"))  # not running yet
    submit(cluster, "bbbb0002", 8, 2)
    report = LiveScheduler(cluster.connect(), "default", Policy(), "second").run_pass()
    assert "bbbb0002" in report.waiting
    assert all(used <= 4 for used in gpu_use(cluster).values())


def test_victims_are_requeued_not_lost(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1, priority=10)
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    submit(cluster, "bbbb0002", 4, 2, priority=90)
    report = LiveScheduler(cluster.connect(), "default", Policy(preemption=True), "c").run_pass()
    assert report.preempted == {"aaaa0001": "bbbb0002"}
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert entry.state == "queued" and entry.attempts == 0
    assert "preempted by bbbb0002" in entry.reason


def test_a_live_pass_reserves_only_for_a_group_that_has_waited_reserve_after(twelve_gpus):
    import datetime

    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    submit(cluster, "bbbb0002", 12, 2)  # both submitted at 12:00:00

    def pass_at(minute: int, second: int):
        moment = datetime.datetime(2026, 11, 21, 12, minute, second, tzinfo=datetime.UTC)
        return LiveScheduler(cluster.connect(), "default", Policy(), "c", clock=lambda: moment).run_pass().plan

    first = pass_at(0, 10)
    assert set(first.placements) == {"aaaa0001"} and first.reservations == {}
    assert pass_at(4, 59).reservations == {}
    assert set(pass_at(5, 0).reservations) == {"bbbb0002"}  # 300 s after submission


def submit_in(cluster, namespace: str, group_id: str, slots: int, sequence: int, priority: int = 50) -> None:
    from det_k8s.cli.live import entry_for

    text = f"name: exp-{group_id}\nresources: {{slots_per_trial: {slots}, priority: {priority}}}\n"
    experiment = parse_experiment(text, f"{group_id}.yaml").get()
    group = build_group(experiment, SETTINGS, group_id=group_id, user="u", submitted_at="2026-11-21T12:00:00Z",
                        sequence=sequence)
    QueueStore(cluster.connect(), namespace).add(entry_for(experiment, text, SETTINGS, group, namespace))


@pytest.mark.parametrize("round_", range(4))
def test_queues_in_two_namespaces_racing_for_the_same_gpus_one_wins(twelve_gpus, round_):
    cluster = twelve_gpus
    submit_in(cluster, "team-a", "aaaa0001", 12, 1)
    submit_in(cluster, "team-b", "bbbb0002", 12, 2)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def client(namespace: str) -> None:
        scheduler = LiveScheduler(cluster.connect(namespace=namespace), namespace, Policy(), namespace, lease_wait=20)
        barrier.wait()
        try:
            scheduler.run_pass()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(ns,)) for ns in ("team-a", "team-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len({p["metadata"]["namespace"] for p in cluster.api.items("pods")}) == 1
    assert all(used <= 4 for used in gpu_use(cluster).values())
    assert cluster.api.items("leases")[0]["metadata"]["namespace"] == "default"  # one lease for the cluster


def test_preemption_never_reaches_into_another_namespaces_queue(twelve_gpus):
    cluster = twelve_gpus
    submit_in(cluster, "team-a", "aaaa0001", 12, 1, priority=10)
    LiveScheduler(cluster.connect(namespace="team-a"), "team-a", Policy(), "a").run_pass()
    submit_in(cluster, "team-b", "bbbb0002", 4, 2, priority=90)
    report = LiveScheduler(cluster.connect(namespace="team-b"), "team-b", Policy(preemption=True), "b").run_pass()
    assert report.preempted == {}
    assert "bbbb0002" in report.waiting
    assert len(cluster.api.items("pods", "team-a")) == 3


def test_pods_left_by_an_interrupted_creation_are_cleared_then_the_group_runs(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    leftover = {**entry.pods[1], "spec": {**entry.pods[1]["spec"], "nodeName": "gpu-1"}}
    cluster.api.put(leftover)  # one pod of three exists, the entry still says queued
    first = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "waiting for its previous pods to stop" in first.waiting["aaaa0001"]
    assert cluster.api.items("pods") == []  # cleared, not kept forever
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert len(cluster.api.items("pods")) == 3


def test_a_complete_running_set_of_pods_is_adopted(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    leave_pods(cluster, entry.pods)
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "aaaa0001" in report.placed
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").state == "running"
    assert len(cluster.api.items("pods")) == 3  # the work already running is kept
    assert cluster.api.get("services", entry.service["metadata"]["name"]) is not None  # so its pods find each other


def test_an_incomplete_set_of_leftover_pods_is_deleted_gracefully_and_waited_for(twelve_gpus):
    cluster = twelve_gpus
    cluster.api.graceful_pods = True
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    first = entry.pods[0]
    leave_pods(cluster, [first], status={"phase": "Running"})
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    (pod,) = cluster.api.items("pods")
    assert pod["metadata"].get("deletionTimestamp")  # asked to stop, not removed under a running container
    assert report.waiting["aaaa0001"] == f"waiting for its previous pods to stop: {first['metadata']['name']}"
    cluster.api.finish_deletions()
    assert "aaaa0001" in LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass().placed


def test_a_pod_stuck_terminating_on_a_notready_node_is_explained_not_forced(twelve_gpus):
    cluster = twelve_gpus
    cluster.api.graceful_pods = True
    cluster.api.put(node("gpu-0", gpus=4, ready=False))
    submit(cluster, "aaaa0001", 12, 1)  # three pods: one alone is no complete set to adopt
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    name = entry.pods[0]["metadata"]["name"]
    leave_pods(cluster, entry.pods[:1])
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()  # deletes it; the kubelet never confirms
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert report.waiting["aaaa0001"] == (
        f"waiting for its previous pods to stop: {name}; {name} cannot be confirmed stopped while their node is "
        f"NotReady (if it is gone for good: kubectl delete pod {name} -n default --force --grace-period=0)")
    assert len(cluster.api.items("pods")) == 1


def test_adoption_waits_until_the_groups_service_can_be_created(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    leave_pods(cluster, entry.pods)
    cluster.api.fail("POST", "services", 500, "etcd unavailable")
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "aaaa0001" not in report.placed and "could not create its service" in report.problems[0]
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").state == "queued"
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "aaaa0001" in report.placed and len(cluster.api.items("services")) == 1


def test_a_pass_that_loses_the_lease_stops_before_creating_pods(twelve_gpus):
    from det_k8s.live.lease import LeaseLost

    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    cluster.api.fail("PUT", "leases", 409, "the object has been modified")  # the renewal before the first write
    with pytest.raises(LeaseLost, match="taken over"):
        LiveScheduler(cluster.connect(), "default", Policy(), "slow").run_pass()
    assert cluster.api.items("pods") == []


def test_a_kubelet_admission_rejection_is_no_attempt_of_the_job(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    (pod,) = cluster.api.items("pods")
    cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Failed", "reason": "OutOfnvidia.com/gpu"}})
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "the kubelet refused pod" in report.requeued["aaaa0001"]
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").attempts == 0
    assert "admission rejection 1 of 5 not counted" in report.requeued["aaaa0001"]


def test_a_node_that_keeps_refusing_the_group_fails_it_in_the_end(twelve_gpus):
    """Rejections are forgiven five times; after that each counts as an attempt, so the queue cannot loop forever."""
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    store = QueueStore(cluster.connect(), "default")
    for _ in range(20):
        LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
        if store.get("aaaa0001").state == FAILED:
            break
        for pod in cluster.api.items("pods"):
            cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Failed", "reason": "OutOfcpu"}})
    entry = store.get("aaaa0001")
    assert (entry.state, entry.rejections, entry.attempts) == (FAILED, 8, 3)
    assert entry.reason.endswith("gave up after 3 attempts")


def test_an_interrupted_kill_is_finished_by_the_next_pass(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 8, 1)
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    store = QueueStore(cluster.connect(), "default")
    store.update(store.get("aaaa0001").with_event("killed", state="killed"))  # ...and then the client died
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert cluster.api.items("pods") == []


def test_a_failed_group_whose_teardown_partly_failed_is_cleared_by_the_next_pass(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 8, 1)
    LiveScheduler(cluster.connect(), "default", Policy(), "c", max_attempts=1).run_pass()
    first, second = sorted(p["metadata"]["name"] for p in cluster.api.items("pods"))
    cluster.api.update("pods", first, {"status": {"phase": "Failed", "reason": "Error"}})
    cluster.api.fail("DELETE", "pods", 500, "etcd unavailable", name=second)
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c", max_attempts=1).run_pass()
    assert report.failed["aaaa0001"].endswith("gave up after 1 attempt") and any(second in p for p in report.problems)
    LiveScheduler(cluster.connect(), "default", Policy(), "c", max_attempts=1).run_pass()
    assert cluster.api.get("pods", second) is None  # its GPUs are free again
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").attempts == 1  # one failure, charged once


def test_a_lost_group_none_of_whose_pods_could_be_deleted_is_charged_once_they_can(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 8, 1)
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    first, second = sorted(p["metadata"]["name"] for p in cluster.api.items("pods"))
    cluster.api.update("pods", first, {"status": {"phase": "Failed", "reason": "Error"}})
    cluster.api.fail("DELETE", "pods", 500, "etcd unavailable", times=2)
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert (entry.state, entry.attempts) == ("running", 0) and len(report.problems) == 1
    assert entry.reason == f"pod {first} failed (Error); tearing the group down (could not delete {first}, {second} yet)"
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "(attempt 2 of 3)" in report.requeued["aaaa0001"]
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").attempts == 1  # one failure, charged once


def test_admission_rejections_are_forgotten_once_the_group_runs(twelve_gpus):
    """A long-lived group must not use up its free rejections on races spread over its whole life."""
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    store = QueueStore(cluster.connect(), "default")
    for _ in range(2):
        LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
        (pod,) = cluster.api.items("pods")
        cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Failed", "reason": "OutOfcpu"}})
        LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()  # torn down, requeued
    assert store.get("aaaa0001").rejections == 2
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()  # placed again
    (pod,) = cluster.api.items("pods")
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert store.get("aaaa0001").rejections == 2  # created, not yet admitted: nothing is forgotten yet
    cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Running"}})
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    entry = store.get("aaaa0001")
    assert (entry.state, entry.rejections, entry.attempts) == ("running", 0, 0)


def test_a_group_whose_pods_are_refused_for_good_fails_after_its_attempts(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    cluster.api.fail("POST", "pods", 403, 'admission webhook "gpu-policy" denied the request: no GPUs for you',
                     times=100)
    store = QueueStore(cluster.connect(), "default")
    reports = [LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass() for _ in range(3)]
    assert "(attempt 2 of 3)" in reports[0].requeued["aaaa0001"]
    assert "denied the request" in reports[1].requeued["aaaa0001"]
    entry = store.get("aaaa0001")
    assert (entry.state, entry.attempts) == (FAILED, 3)
    assert reports[2].failed["aaaa0001"].endswith("gave up after 3 attempts")
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert store.get("aaaa0001").attempts == 3  # a failed group is not tried again


@pytest.mark.parametrize("status, message", [
    (500, "etcdserver: request timed out"),
])
def test_a_passing_creation_failure_is_retried_without_counting(twelve_gpus, status, message):
    """A 5xx passes: it may not fail the group. (A quota's refusal is one retry after a pause:
    tests/live/test_resource_quotas_live.py.)"""
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    cluster.api.fail("POST", "pods", status, message, times=4)
    store = QueueStore(cluster.connect(), "default")
    before = len(store.get("aaaa0001").events)
    for _ in range(4):
        report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
        assert report.requeued["aaaa0001"].endswith("; trying again (not counted as an attempt)")
    assert (store.get("aaaa0001").state, store.get("aaaa0001").attempts) == ("queued", 0)
    assert len(store.get("aaaa0001").events) == before + 1  # the same failure is recorded once, not every pass
    assert "aaaa0001" in LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass().placed


def test_an_invalid_pod_is_a_lasting_refusal(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    cluster.api.fail("POST", "pods", 422, 'Pod "x" is invalid: spec.containers[0].image: Required value')
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "(attempt 2 of 3)" in report.requeued["aaaa0001"]
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").attempts == 1


def test_leftover_pods_that_all_succeeded_complete_the_group_and_keep_their_logs(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    leave_pods(cluster, entry.pods, status={"phase": "Succeeded"})
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert report.completed == ["aaaa0001"] and "aaaa0001" not in report.placed
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").state == "completed"
    assert len(cluster.api.items("pods")) == 3  # not deleted, not run a second time


def test_leftover_pods_that_failed_cost_the_group_an_attempt(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    leave_pods(cluster, entry.pods, status={"phase": "Failed", "reason": "Error"})
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "failed (Error)" in report.requeued["aaaa0001"] and "(attempt 2 of 3)" in report.requeued["aaaa0001"]
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert entry.attempts == 1 and entry.reason == report.requeued["aaaa0001"]  # the reason is kept
    assert cluster.api.items("pods") == []


def test_leftover_pods_that_failed_are_charged_once_even_if_clearing_them_takes_two_passes(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    leave_pods(cluster, entry.pods, status={"phase": "Failed", "reason": "Error"})
    cluster.api.fail("DELETE", "pods", 500, "etcd unavailable", name=entry.pods[2]["metadata"]["name"])
    for _ in range(3):
        LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
        assert QueueStore(cluster.connect(), "default").get("aaaa0001").attempts == 1  # charged at once, and once


def test_leftover_pods_that_failed_on_the_last_attempt_fail_the_group(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    leave_pods(cluster, entry.pods, status={"phase": "Failed", "reason": "Error"})
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c", max_attempts=1).run_pass()
    assert report.failed["aaaa0001"].endswith("gave up after 1 attempt")
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").state == FAILED
    assert cluster.api.items("pods") == []
    assert cluster.api.items("services") == []  # nothing of a failed group is left behind


def test_a_group_torn_down_by_a_pass_keeps_its_reason_and_is_deleted_once(twelve_gpus):
    cluster = twelve_gpus
    cluster.api.graceful_pods = True
    submit(cluster, "aaaa0001", 4, 1)
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    (pod,) = cluster.api.items("pods")
    cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Failed", "reason": "Error"}})
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "aaaa0001" not in report.waiting and not report.problems
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").reason.startswith(
        f"pod {pod['metadata']['name']} failed (Error); the group was torn down and requeued")
    assert cluster.api.count("DELETE", "pods") == 1


def test_a_group_whose_pods_all_vanished_is_placed_again_in_the_same_pass(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 4, 1)
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    (pod,) = cluster.api.items("pods")
    cluster.api.remove("pods", pod["metadata"]["name"])  # evicted and garbage-collected between passes
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert "is gone" in report.requeued["aaaa0001"] and "aaaa0001" in report.placed


def test_created_pods_are_pinned_by_node_affinity_so_kube_scheduler_still_runs_its_filters(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)  # three pods of 4 GPUs
    LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    pods = cluster.api.items("pods")
    assert all("nodeName" not in p["spec"] for p in pods)
    terms = [p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
             for p in pods]
    assert sorted(t[0]["matchFields"][0]["values"][0] for t in terms) == ["gpu-0", "gpu-1", "gpu-2"]


def unschedulable(cluster, since: str) -> None:
    """kube-scheduler's verdict on one pod of the group: it cannot go to the node it is pinned to."""
    name = cluster.api.items("pods")[0]["metadata"]["name"]
    cluster.api.update("pods", name, {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": since,
         "message": "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
                    "affinity/selector. preemption: 0/3 nodes are available: 3 No preemption victims found."}]}})


def test_a_pod_kube_scheduler_cannot_place_tears_the_group_down_after_a_grace_period(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    clock = [datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)]
    scheduler = LiveScheduler(cluster.connect(), "default", Policy(), "c", clock=lambda: clock[0])
    scheduler.run_pass()
    unschedulable(cluster, "2026-11-21T12:00:00Z")
    clock[0] += datetime.timedelta(seconds=30)  # kube-scheduler retries a pod as other pods come and go: not yet
    assert "aaaa0001" not in scheduler.run_pass().requeued
    clock[0] += datetime.timedelta(seconds=31)
    why = scheduler.run_pass().requeued["aaaa0001"]
    assert why.startswith("kube-scheduler cannot place pod ") and "1 Insufficient nvidia.com/gpu" in why
    assert "nodes are available" not in why  # the Determined master would rewrite such a message
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert (entry.state, entry.attempts, entry.rejections) == ("queued", 0, 1)


def test_a_complete_set_of_pods_pinned_but_not_bound_yet_is_adopted(twelve_gpus):
    """An interrupted pass left the pods as it creates them: pinned by node affinity, kube-scheduler yet to bind."""
    from det_k8s.scheduling.groups import pin

    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    for i, manifest in enumerate(entry.pods):
        cluster.api.put({**manifest, "spec": pin(manifest["spec"], f"gpu-{i}"), "status": {"phase": "Pending"}})
    report = LiveScheduler(cluster.connect(), "default", Policy(), "c").run_pass()
    assert report.placed["aaaa0001"] == tuple(sorted((p["metadata"]["name"], f"gpu-{i}")
                                                     for i, p in enumerate(entry.pods)))
    assert len(cluster.api.items("pods")) == 3
