"""Scheduling passes against the API emulator: two clients racing for the same GPUs, only one wins."""

from __future__ import annotations

import threading

import pytest

from det_k8s.kube.lease import LeaseHeld
from det_k8s.kube.queue import QueueStore
from det_k8s.kube.scheduler import LiveScheduler
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.groups import build_group
from det_k8s.scheduling.model import Policy
from det_k8s.settings import Document, load_settings
from tests.k8s_emulator import node

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
        used[pod["spec"]["nodeName"]] = used.get(pod["spec"]["nodeName"], 0) + gpus
    return used


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
