"""Intent records (live/creation_records.py): a creation recorded before its first pod, and what a killed process leaves
repaired the same way by every det-k8s entry point that takes the scheduling Lease next."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import threading
import time

import pytest

from det_k8s.kube.watch import ClusterView
from det_k8s.labels import HOLDER_PROCESS
from det_k8s.live.creation_records import ATTEMPT_LABEL, close_intents, mark_intent, unfinished
from det_k8s.live.lease import LEASE_NAME, LeaseHeld, SchedulingLease, died_here, process_key
from det_k8s.live.queue import QueueStore
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.conftest import example
from tests.live.test_live_scheduler import submit
from tests.support.k8s_emulator import node

ON_REAL_CLUSTER_TOO = True


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@pytest.fixture
def twelve_gpus(cluster):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    return cluster


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def pods_of(cluster, group: str) -> list[dict]:
    return [p for p in cluster.api.items("pods") if p["metadata"]["labels"].get("det-k8s.io/group") == group]


def crashed(cluster, group: str, created: int, attempt: str = "dead0001") -> list[str]:
    """The state a creation killed outright leaves: the intent, `created` of its pods, the Lease still held by its
    (ended) process."""
    store = QueueStore(cluster.connect(), "default")
    entry = store.get(group)
    names = [str(m["metadata"]["name"]) for m in entry.pods]
    store.update(mark_intent(entry, attempt, names, now()))
    for i, manifest in enumerate(entry.pods[:created]):
        meta = {**manifest["metadata"], "labels": {**manifest["metadata"]["labels"], ATTEMPT_LABEL: attempt}}
        cluster.api.put({**manifest, "metadata": meta, "spec": {**manifest["spec"], "nodeName": f"gpu-{i}"}})
    stamp = now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": LEASE_NAME, "namespace": "default",
                                  "annotations": {HOLDER_PROCESS: process_key(dead_pid())}},
                     "spec": {"holderIdentity": "killed@host-1", "leaseDurationSeconds": 30, "renewTime": stamp,
                              "acquireTime": stamp}})
    return names


@pytest.mark.emulator_only  # the emulator holds a write at the API server: fault injection
def test_the_intent_is_recorded_before_the_first_pod_and_cleared_once_the_group_runs(twelve_gpus):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    held = cluster.api.pause("POST", "pods")
    scheduler = LiveScheduler(cluster.connect(), "default", Policy(), "a", workers=1)
    thread = threading.Thread(target=scheduler.run_pass)
    thread.start()
    assert held.reached.wait(30)
    (entry,) = QueueStore(cluster.connect(), "default").entries()
    ((_, mark),) = unfinished([entry])
    assert mark["intent"] == "create" and len(mark["pods"]) == 3 and pods_of(cluster, "aaaa0001") == []
    held.release()
    thread.join(30)
    (entry,) = QueueStore(cluster.connect(), "default").entries()
    assert entry.state == "running" and entry.doomed == () and len(pods_of(cluster, "aaaa0001")) == 3


def _pass(cluster, run_cli) -> None:
    LiveScheduler(cluster.connect(), "default", Policy(), "successor", lease_wait=0).run_pass()


def _scheduler_once(cluster, run_cli) -> None:
    result = run_cli("scheduler", "run", "--once", "--scheduler-name", "")
    assert result.code == 0, result.err


def _another_create(cluster, run_cli, tmp_path=None) -> None:
    settings = cluster.kubeconfig.parent / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    result = run_cli("experiment", "create", example("experiments") / "distributed-12gpu-b.yaml", "-f", settings)
    assert result.code == 0, result.err


def _loop_pass(cluster, run_cli) -> None:
    """A `scheduler run` loop's pass: the cluster read from its watch, the master's pods served."""
    api = cluster.connect()
    view = ClusterView(api.clone(), "coscheduler", queue_namespace="default").start()
    try:
        assert view.wait_synced()
        LiveScheduler(api, "default", Policy(), "loop", lease_wait=0, serve="coscheduler", view=view).run_pass()
    finally:
        view.stop()


def _list(cluster, run_cli) -> None:
    assert run_cli("experiment", "list").code == 0


def _doctor(cluster, run_cli) -> None:
    run_cli("doctor")  # (exits 1 on what it reports)


SUCCESSORS = [_pass, _scheduler_once, _another_create, _loop_pass]


def stopping(cluster, group: str) -> None:
    """Its pods being deleted (gracefully: kubelet has not confirmed them stopped yet)."""
    for pod in pods_of(cluster, group):
        cluster.api.put({**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-11-27T00:00:00Z"}})


# Every state a creation killed outright can leave its intent record in (the pods it had made by then).
CRASHES = {"intent, no pods": (0, False), "intent, some pods": (2, False), "intent, all pods": (3, False),
           "intent, all pods stopping": (3, True)}


@pytest.mark.parametrize("crash", [crash for crash in CRASHES if crash != "intent, all pods stopping"])
@pytest.mark.parametrize("successor", SUCCESSORS)
def test_whoever_takes_the_lease_next_undoes_a_killed_creation_first(twelve_gpus, run_cli, crash, successor):
    undone(twelve_gpus, run_cli, crash, successor)


# the emulator keeps a pod with the deletionTimestamp a test gives it: a real API server sets that only itself, and
# kwok confirms a deletion at once
@pytest.mark.emulator_only
@pytest.mark.parametrize("successor", SUCCESSORS)
def test_whoever_takes_the_lease_next_undoes_a_killed_creation_whose_pods_are_stopping(twelve_gpus, run_cli,
                                                                                       successor):
    undone(twelve_gpus, run_cli, "intent, all pods stopping", successor)


def settled_pods(cluster, group: str) -> list[dict]:
    """The group's pods once those being deleted are gone (on a real cluster kwok confirms a deletion a moment
    later); a guard against hanging, not a speed assertion."""
    deadline = time.monotonic() + 60
    while any(p["metadata"].get("deletionTimestamp") for p in pods_of(cluster, group)) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    return pods_of(cluster, group)


def undone(cluster, run_cli, crash: str, successor) -> None:
    submit(cluster, "aaaa0001", 12, 1)
    created, deleting = CRASHES[crash]
    crashed(cluster, "aaaa0001", created)
    if deleting:
        stopping(cluster, "aaaa0001")
    successor(cluster, run_cli)
    pods = settled_pods(cluster, "aaaa0001")
    left = [p for p in pods if p["metadata"]["labels"].get(ATTEMPT_LABEL) == "dead0001"]
    assert left == []  # whatever the killed creation made is gone (the group may have started again, whole)
    assert len(pods) in (0, 3)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert unfinished([entry]) == []
    assert "dead0001" in [r["attempt"] for r in entry.doomed]  # a pod of it landing later still goes on sight
    assert entry.state in ("queued", "running") and entry.attempts == 0  # an interrupted creation costs nothing
    assert not cluster.api.get("leases", LEASE_NAME)["spec"].get("holderIdentity")


@pytest.mark.parametrize("successor", SUCCESSORS)
def test_a_creation_that_settled_is_left_running_by_whoever_comes_next(twelve_gpus, run_cli, successor):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    assert "aaaa0001" in LiveScheduler(cluster.connect(), "default", Policy(), "first", lease_wait=0).run_pass().placed
    before = sorted((p["metadata"]["name"], p["metadata"]["uid"]) for p in pods_of(cluster, "aaaa0001"))
    successor(cluster, run_cli)
    assert sorted((p["metadata"]["name"], p["metadata"]["uid"]) for p in pods_of(cluster, "aaaa0001")) == before
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert (entry.state, entry.doomed) == ("running", ())


@pytest.mark.parametrize("successor", [*SUCCESSORS, _list, _doctor])
def test_a_pod_of_a_closed_record_landing_late_goes_whoever_sees_it(twelve_gpus, run_cli, successor):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    crashed(cluster, "aaaa0001", 1)
    store = QueueStore(cluster.connect(), "default")
    store.update(close_intents(store.get("aaaa0001")))  # what a successor's sweep leaves; then a late write lands
    successor(cluster, run_cli)
    assert [p for p in pods_of(cluster, "aaaa0001") if p["metadata"]["labels"].get(ATTEMPT_LABEL) == "dead0001"] == []


@pytest.mark.parametrize("created", [0, 2])
def test_commands_without_the_lease_report_an_intent_and_never_delete_its_pods(twelve_gpus, run_cli, created):
    cluster = twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    crashed(cluster, "aaaa0001", created)
    listing = run_cli("experiment", "list", "-o", "json")
    assert listing.code == 0, listing.err
    (record,) = json.loads(listing.out)["experiments"]
    assert "aaaa0001" not in record["reason"]  # never "held by" itself: the next pass deletes those pods first
    assert len(pods_of(cluster, "aaaa0001")) == created  # the creation may be in flight in another process
    doctor = run_cli("doctor")
    assert doctor.code == 1
    exist = "none of its pods exist" if not created else f"{created} of its 3 pods exist"
    assert "aaaa0001: a creation begun at" in doctor.err and exist in doctor.err
    assert "1 unfinished creation(s)" in doctor.err
    assert len(pods_of(cluster, "aaaa0001")) == created
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert unfinished([entry]) != []  # left for whoever takes the Lease next


def test_a_lease_whose_process_ended_here_is_taken_at_once_a_live_ones_is_not(cluster):
    api = cluster.connect()
    stamp = now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def held_by(key: str) -> None:
        if cluster.api.get("leases", LEASE_NAME) is not None:  # (a real API server creates, never replaces)
            cluster.api.remove("leases", LEASE_NAME)
        cluster.api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                         "metadata": {"name": LEASE_NAME, "namespace": "default", "annotations": {HOLDER_PROCESS: key}},
                         "spec": {"holderIdentity": "other@host", "leaseDurationSeconds": 30, "renewTime": stamp}})

    assert died_here(process_key(dead_pid())) and not died_here(process_key(1)) and not died_here("")
    assert not died_here("another-boot/1/" + str(dead_pid()))  # another machine's process: unknown, not dead
    held_by(process_key(os.getppid()))
    assert not SchedulingLease(api, "default", "me").try_acquire()
    held_by(process_key(dead_pid()))
    lease = SchedulingLease(api, "default", "me")
    assert lease.try_acquire()
    annotations = cluster.api.get("leases", LEASE_NAME)["metadata"]["annotations"]
    assert annotations[HOLDER_PROCESS] == process_key()  # the next one can tell whether this process still runs
    lease.release()


def test_a_lease_past_its_time_says_when_it_is_free_not_a_time_gone_by(cluster):
    old = (now() - datetime.timedelta(seconds=40)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": LEASE_NAME, "namespace": "default"},
                     "spec": {"holderIdentity": "other@host", "leaseDurationSeconds": 30, "renewTime": old}})
    with pytest.raises(LeaseHeld) as caught, SchedulingLease(cluster.connect(), "default", "me").held():
        pass
    assert "not renewed since" in caught.value.message and "free by" in caught.value.message
    assert "unless renewed" not in caught.value.message


@pytest.fixture
def real_twelve_gpus(real_cluster):
    for i in range(3):
        real_cluster.api.put(node(f"gpu-{i}", gpus=4))
    return real_cluster


@pytest.mark.parametrize("crash", ["intent, no pods", "intent, some pods"])
@pytest.mark.parametrize("successor", [_scheduler_once, _loop_pass])
def test_a_killed_creation_is_undone_the_same_way_on_the_real_api_server(real_twelve_gpus, run_cli, crash,
                                                                          successor):
    cluster = real_twelve_gpus
    submit(cluster, "aaaa0001", 12, 1)
    crashed(cluster, "aaaa0001", CRASHES[crash][0])
    successor(cluster, run_cli)
    live = [p for p in pods_of(cluster, "aaaa0001") if not p["metadata"].get("deletionTimestamp")]
    assert [p for p in live if p["metadata"]["labels"].get(ATTEMPT_LABEL) == "dead0001"] == []
    assert len(live) in (0, 3)
    entry = QueueStore(cluster.connect(), "default").get("aaaa0001")
    assert unfinished([entry]) == [] and "dead0001" in [r["attempt"] for r in entry.doomed]
    assert entry.attempts == 0
    assert not cluster.api.get("leases", LEASE_NAME)["spec"].get("holderIdentity")
