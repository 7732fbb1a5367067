"""ResourceQuotas against the API emulator, which enforces them as the API server's quota admission does.

The defect this answers: a 3-pod group under a GPU quota used to be created a pod at a time, refused on the
next, torn down and tried again every pass without end. Now the pass reads the quota and the group waits,
naming it; a refusal that still happens (the quota changed after the pass read it) is one retry after a pause.
"""

from __future__ import annotations

import datetime
import time

import pytest

from det_k8s.errors import Forbidden
from det_k8s.kube.kinds import PODS
from det_k8s.live import scheduler as live
from det_k8s.live.queue import FAILED, QUEUED, RUNNING, QueueStore
from det_k8s.live.scheduler import QUOTA_BACKOFF, LiveScheduler
from det_k8s.scheduling.experiments import parse_experiment
from det_k8s.scheduling.groups import build_group
from det_k8s.scheduling.model import Policy
from det_k8s.settings import Document, load_settings
from tests.support.k8s_emulator import node, pod

ON_REAL_CLUSTER_TOO = True

SETTINGS = load_settings([Document("s", "maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")]).settings()
NS = "team-a"
T0 = datetime.datetime(2026, 11, 21, 12, 0, tzinfo=datetime.UTC)


def submit(cluster, group_id: str, slots: int, sequence: int = 1) -> None:
    from det_k8s.cli.live import entry_for

    text = f"name: exp-{group_id}\nresources: {{slots_per_trial: {slots}}}\n"
    experiment = parse_experiment(text, f"{group_id}.yaml").get()
    group = build_group(experiment, SETTINGS, group_id=group_id, user="u", submitted_at="2026-11-21T12:00:00Z",
                        sequence=sequence, namespace=NS)
    QueueStore(cluster.connect(NS), NS).add(entry_for(experiment, text, SETTINGS, group, NS))


def gpu_quota(hard: int) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": NS},
            "spec": {"hard": {"requests.nvidia.com/gpu": str(hard)}}}


def pod_posts(cluster) -> int | None:
    """The pod creations sent so far, as the emulator counts them (None on a real cluster, which keeps no count: there
    the rest of each test still holds)."""
    return cluster.api.count("POST", "pods") if hasattr(cluster.api, "count") else None


def run(cluster, at: datetime.datetime = T0):
    return LiveScheduler(cluster.connect(NS), NS, Policy(), "c", clock=lambda: at).run_pass()


@pytest.fixture
def twelve_gpus(cluster):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    return cluster


def test_the_emulator_refuses_a_pod_over_quota_as_the_api_server_does(twelve_gpus):
    cluster = twelve_gpus
    cluster.api.put(gpu_quota(4))
    api = cluster.connect(NS)
    api.create(PODS, pod("a", namespace=NS, requests={"nvidia.com/gpu": "4"}, phase="Pending"), NS)
    assert cluster.api.get("resourcequotas", "gpu-quota", NS)["status"]["used"] == {"requests.nvidia.com/gpu": "4"}
    with pytest.raises(Forbidden) as refused:
        api.create(PODS, pod("b", namespace=NS, requests={"nvidia.com/gpu": "1"}, phase="Pending"), NS)
    assert ('pods "b" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, used: '
            "requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4") in str(refused.value)
    cluster.api.remove("pods", "a", NS)  # the quota controller gives its use back (on a real cluster, a moment later)
    deadline = time.monotonic() + 60  # a guard against hanging, not a speed assertion
    while (used := cluster.api.get("resourcequotas", "gpu-quota", NS)["status"]["used"]) != {
            "requests.nvidia.com/gpu": "0"} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert used == {"requests.nvidia.com/gpu": "0"}


def test_a_group_over_quota_waits_naming_the_quota_and_creates_nothing(twelve_gpus):
    cluster = twelve_gpus
    cluster.api.put(gpu_quota(8))
    submit(cluster, "aaaa0001", 12)
    for minute in range(3):
        report = run(cluster, T0 + datetime.timedelta(minutes=minute))
        assert report.waiting["aaaa0001"].startswith(
            "namespace team-a: quota gpu-quota: requests.nvidia.com/gpu 0 of 8 used, the group needs 12")
        assert report.requeued == {}
    assert pod_posts(cluster) in (0, None)  # not one pod created and deleted again
    entry = QueueStore(cluster.connect(NS), NS).get("aaaa0001")
    assert (entry.state, entry.attempts) == (QUEUED, 0) and "quota gpu-quota" in entry.reason
    cluster.api.update("resourcequotas", "gpu-quota", {"spec": gpu_quota(12)["spec"]}, NS)  # the admin raises it
    assert "aaaa0001" in run(cluster).placed
    assert cluster.api.get("resourcequotas", "gpu-quota", NS)["status"]["used"] == {"requests.nvidia.com/gpu": "12"}


def refused_once(cluster, monkeypatch) -> None:
    """A pass whose creation a rival pod makes the quota refuse: it landed after the pass read the quota."""
    cluster.api.put(gpu_quota(12))
    submit(cluster, "aaaa0001", 8)
    real = live.decide

    def decide_then_a_rival_lands(*args, **kwargs):  # between the pass's decision and its acts
        decision = real(*args, **kwargs)
        cluster.api.put(pod("rival", namespace=NS, requests={"nvidia.com/gpu": "8"}, phase="Pending"))
        return decision

    monkeypatch.setattr(live, "decide", decide_then_a_rival_lands)
    first = run(cluster)
    monkeypatch.setattr(live, "decide", real)
    assert "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=" \
        in first.requeued["aaaa0001"]
    assert first.requeued["aaaa0001"].endswith("a ResourceQuota refused it: trying again once in 30 s "
                                               "(not counted as an attempt)")
    assert [p["metadata"]["name"] for p in cluster.api.items("pods", NS)] == ["rival"]  # nothing of the group left


def test_a_quota_filled_after_the_pass_read_it_is_one_retry_after_a_pause(twelve_gpus, monkeypatch):
    cluster = twelve_gpus
    refused_once(cluster, monkeypatch)
    cluster.api.remove("pods", "rival", NS)
    posts = pod_posts(cluster)
    held = run(cluster, T0 + datetime.timedelta(seconds=5))  # room again, but the pause is not over
    assert pod_posts(cluster) == posts and held.placed == {}
    assert held.waiting["aaaa0001"].endswith("next try in 25 s")
    assert "aaaa0001" in run(cluster, T0 + datetime.timedelta(seconds=QUOTA_BACKOFF + 1)).placed
    entry = QueueStore(cluster.connect(NS), NS).get("aaaa0001")
    assert (entry.state, entry.attempts) == (RUNNING, 0)


def test_after_a_refusal_the_next_pass_reads_the_quota_and_waits_for_it(twelve_gpus, monkeypatch):
    cluster = twelve_gpus
    refused_once(cluster, monkeypatch)
    posts = pod_posts(cluster)
    for seconds in (5, 60, 120):
        report = run(cluster, T0 + datetime.timedelta(seconds=seconds))
        assert report.waiting["aaaa0001"].startswith(
            "namespace team-a: quota gpu-quota: requests.nvidia.com/gpu 8 of 12 used, the group needs 8")
    assert pod_posts(cluster) == posts
    cluster.api.remove("pods", "rival", NS)  # the pass sees the room: no blind retry, an informed one
    assert "aaaa0001" in run(cluster, T0 + datetime.timedelta(seconds=121)).placed


@pytest.mark.emulator_only  # the emulator fails API calls on demand and counts them: fault injection
def test_refusals_det_k8s_cannot_foresee_are_bounded(twelve_gpus):
    """Without leave to list ResourceQuotas nothing holds the group back: one free retry, then counted attempts."""
    cluster = twelve_gpus
    cluster.api.put(gpu_quota(4))
    cluster.api.fail("GET", "resourcequotas", 403, 'resourcequotas is forbidden: User "u" cannot list resource '
                     '"resourcequotas"', times=1000)
    submit(cluster, "aaaa0001", 8)
    reports = [run(cluster, T0 + datetime.timedelta(seconds=s)) for s in (0, 10, 31, 40, 62, 93, 124, 155)]
    assert "trying again once in 30 s (not counted as an attempt); det-k8s may not list resourcequotas here" \
        in reports[0].requeued["aaaa0001"]
    assert reports[1].placed == {} and "next try in 20 s" in reports[1].waiting["aaaa0001"]
    assert "a ResourceQuota refused it again" in reports[2].requeued["aaaa0001"]
    assert reports[2].requeued["aaaa0001"].endswith("(attempt 2 of 3)")
    assert "next try in" in reports[3].waiting["aaaa0001"]
    assert reports[4].requeued["aaaa0001"].endswith("(attempt 3 of 3)")
    assert reports[5].failed["aaaa0001"].endswith("gave up after 3 attempts")
    entry = QueueStore(cluster.connect(NS), NS).get("aaaa0001")
    assert (entry.state, entry.attempts) == (FAILED, 3)
    assert cluster.api.count("POST", "pods") == 4 * 2  # the free retry and three counted creations of its 2 pods
