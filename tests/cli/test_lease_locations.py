"""One lease for everyone: clients with different DET_K8S_LEASE_NAMESPACE never overbook, and say why they stop.

Two real `det-k8s experiment create` processes, each told another lease namespace, submit a
12-GPU experiment to a 12-GPU cluster at the same moment, round after round. Without a check both
would take "the" lease (each its own) and place their groups on the same GPUs.
"""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from det_k8s.labels import LAST_PASS
from det_k8s.live.lease import LeaseLocationConflict, SchedulingLease
from tests.cli.test_completion import det_k8s
from tests.conftest import example
from tests.support.builders import node_of
from tests.support.k8s_emulator import node

EXP = example("experiments")


def gpus_by_node(cluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in cluster.api.items("pods"):
        for c in pod["spec"]["containers"]:
            node_name = node_of(pod)  # bound, or pinned by node affinity (how det-k8s pins its pods)
            used[node_name] = used.get(node_name, 0) + int(c["resources"]["requests"].get("nvidia.com/gpu", "0"))
    return used


def create(cluster, settings, queue: str, lease: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "USER": "tester", "DET_K8S_LEASE_NAMESPACE": lease}
    return subprocess.run([det_k8s(), "experiment", "create", str(EXP / "distributed-12gpu-a.yaml"), "-f",
                           str(settings), "-n", queue], env=env, capture_output=True, text=True, timeout=120)


def test_two_lease_locations_never_overbook(cluster, tmp_path):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    refusals: list[str] = []
    for round_ in range(6):
        results: dict[str, subprocess.CompletedProcess[str]] = {}
        barrier = threading.Barrier(2)

        def client(queue: str, lease: str, barrier: threading.Barrier, results: dict) -> None:
            barrier.wait()
            results[queue] = create(cluster, settings, queue, lease)

        threads = [threading.Thread(target=client, args=(f"team-{x}", f"sched-{x}", barrier, results))
                   for x in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(used <= 4 for used in gpus_by_node(cluster).values()), (round_, gpus_by_node(cluster))
        for result in results.values():
            assert "Traceback" not in result.stderr and "internal error" not in result.stderr
            if result.returncode != 0:
                refusals.append(result.stderr)
        for pod in cluster.api.items("pods"):  # the next round starts from a free cluster; leases are kept
            cluster.api.remove("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
    assert refusals, "clients at two lease locations never noticed each other"
    for text in refusals:
        assert "sched-a/det-k8s-scheduler" in text and "sched-b/det-k8s-scheduler" in text
        assert "DET_K8S_LEASE_NAMESPACE=sched-" in text


def test_a_client_at_another_location_refuses_without_writing(cluster, monkeypatch):
    first = SchedulingLease(cluster.connect(), "sched-a", "alice@a")
    with first.held():
        pass
    assert LAST_PASS in cluster.api.get("leases", "det-k8s-scheduler", "sched-a")["metadata"]["annotations"]
    monkeypatch.setenv("DET_K8S_LEASE_NAMESPACE", "sched-b")
    second = SchedulingLease(cluster.connect(), "sched-b", "bob@b")
    with pytest.raises(LeaseLocationConflict) as info, second.held():
        pass
    assert "another det-k8s scheduler uses the scheduling lease sched-a/det-k8s-scheduler (last pass" in str(info.value)
    assert "this client uses sched-b/det-k8s-scheduler (DET_K8S_LEASE_NAMESPACE=sched-b)" in str(info.value)
    assert info.value.hint == ("every det-k8s client of the cluster must use one location: set "
                               "DET_K8S_LEASE_NAMESPACE=sched-a here")
    assert cluster.api.get("leases", "det-k8s-scheduler", "sched-b") is None  # refused before taking anything
    with SchedulingLease(cluster.connect(), "sched-a", "carol@a").held():  # the location in use works on
        pass


def test_a_held_lease_elsewhere_is_seen_after_taking_ours(cluster):
    """The race: both take their own lease; the check after taking it sees the other one held."""
    other = SchedulingLease(cluster.connect(), "sched-a", "alice@a")
    assert other.try_acquire()  # held, no pass finished yet (no last-pass annotation)
    mine = SchedulingLease(cluster.connect(), "default", "bob@b")
    with pytest.raises(LeaseLocationConflict, match=r"sched-a/det-k8s-scheduler \(held by alice@a\)"), mine.held():
        raise AssertionError("must not get here")
    lease = cluster.api.get("leases", "det-k8s-scheduler", "default")
    assert lease is None or not lease["spec"].get("holderIdentity")  # given back at once


def test_a_location_idle_for_long_does_not_block(cluster):
    import datetime

    stale = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    cluster.api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "det-k8s-scheduler", "namespace": "old", "annotations": {LAST_PASS: stale}},
                     "spec": {"holderIdentity": ""}})
    with SchedulingLease(cluster.connect(), "default", "bob@b").held():
        pass


@pytest.mark.parametrize("spec", [{"holderIdentity": "x", "renewTime": "2026-01-01T00:00:00",
                                   "leaseDurationSeconds": "soon"}, {"holderIdentity": ["x"]}, "nonsense"])
def test_a_foreign_lease_of_that_name_never_crashes_the_check(cluster, spec):
    cluster.api.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "det-k8s-scheduler", "namespace": "elsewhere",
                                  "annotations": {LAST_PASS: "2001-01-01T00:00:00"}}, "spec": spec})
    try:
        with SchedulingLease(cluster.connect(), "default", "bob@b").held():
            pass
    except LeaseLocationConflict as exc:
        assert "elsewhere/det-k8s-scheduler" in str(exc)
