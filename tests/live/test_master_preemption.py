"""Preempting the Determined master's trials, per release, the way each master hears it (emulator; the real 0.38.1
master is in tests/real/test_real_master.py).

Before 0.34 the master looks a labelled pod up by its own name among its task pods, so the label on the victim's
pods is enough. From 0.34 it looks the labelled pod's name up among its Job names (`tasks.preemption_lookup.*`), so
det-k8s also sends a notice: a pod named as the victim's Job, labelled, owned by the Job, never bound. A victim
that is still there `preemption_grace` after it was marked, or whose notice cannot be made, has its pods deleted:
Determined restarts the trial from its latest checkpoint.
"""

from __future__ import annotations

import datetime
import json
import time

import pytest

from det_k8s.live.binder import NOTICE_SCHEDULER, PREEMPTION_OVERDUE
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task_on, honour_preemption, master_task

ON_REAL_CLUSTER_TOO = True

PREEMPT = Policy(preemption=True)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime(2026, 12, 7, 12, 0, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now


def scheduler(cluster, clock: Clock, grace: float = 600.0) -> LiveScheduler:
    return LiveScheduler(cluster.connect(), "default", PREEMPT, "sched", serve="coscheduler", clock=clock,
                         preemption_grace=grace)


def task_pods(cluster, task):
    return [p for p in cluster.api.items("pods") if (p["metadata"].get("labels") or {}).get("determined")
            == task.allocation]


def gone(cluster, task) -> list:
    """The task's pods once those being deleted are gone (on a real cluster, once kwok and the Job controller let them
    go); a guard against hanging, not a speed assertion."""
    deadline = time.monotonic() + 60
    while (left := task_pods(cluster, task)) and all(p["metadata"].get("deletionTimestamp") for p in left) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def victim_and_preemptor(cluster, version: str, clock: Clock, grace: float = 600.0):
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    low = create_task_on(cluster, master_task(version, experiment=1, slots_per_trial=8, priority=10))
    scheduler(cluster, clock, grace).run_pass()
    assert all(p["spec"].get("nodeName") for p in task_pods(cluster, low))
    high = create_task_on(cluster, master_task(version, experiment=2, slots_per_trial=8, priority=90))
    report = scheduler(cluster, clock, grace).run_pass()
    return low, high, report


@pytest.mark.parametrize("version", ["0.17.15", "0.26.2"])
def test_before_jobs_the_label_on_the_victims_pods_is_what_the_master_hears(cluster, version):
    clock = Clock()
    low, high, report = victim_and_preemptor(cluster, version, clock)
    assert list(report.marked)
    assert not [p for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == NOTICE_SCHEDULER]
    assert honour_preemption(cluster.api) == [low.allocation]
    scheduler(cluster, clock).run_pass()
    assert all(p["spec"].get("nodeName") for p in task_pods(cluster, high))


def test_from_jobs_a_notice_named_as_the_job_is_what_the_master_hears(cluster):
    clock = Clock()
    low, high, report = victim_and_preemptor(cluster, "0.38.1", clock)
    job = low.job["metadata"]["name"]
    (notice,) = [p for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == NOTICE_SCHEDULER]
    assert notice["metadata"]["name"] == job
    assert notice["metadata"]["labels"]["determined-preemption"] == "true"
    assert "determined" not in notice["metadata"]["labels"]  # never one of the master's task pods
    (owner,) = notice["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Job", job)
    assert not notice["spec"].get("nodeName")
    assert honour_preemption(cluster.api) == [low.allocation]
    scheduler(cluster, clock).run_pass()
    assert all(p["spec"].get("nodeName") for p in task_pods(cluster, high))
    assert not [p for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == NOTICE_SCHEDULER]


def test_the_label_alone_is_not_heard_by_a_master_of_jobs(cluster):
    clock = Clock()
    low, _, _ = victim_and_preemptor(cluster, "0.38.1", clock)
    cluster.api.remove("pods", low.job["metadata"]["name"])  # the notice gone: the labelled task pods remain
    assert all("determined-preemption" in p["metadata"]["labels"] for p in task_pods(cluster, low))
    assert honour_preemption(cluster.api) == []


def test_a_victim_still_there_after_the_grace_has_its_pods_deleted_and_says_so(cluster):
    clock = Clock()
    low, high, _ = victim_and_preemptor(cluster, "0.38.1", clock, grace=300)
    clock.now += datetime.timedelta(seconds=200)
    report = scheduler(cluster, clock, grace=300).run_pass()
    assert report.repaired == {} and len(task_pods(cluster, low)) == 2  # within the grace: waited on
    clock.now += datetime.timedelta(seconds=200)
    report = scheduler(cluster, clock, grace=300).run_pass()
    (why,) = report.repaired.values()
    assert "preempted 7 min ago and still there" in why
    assert gone(cluster, low) == []
    assert not [p for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == NOTICE_SCHEDULER]
    overdue = [e for e in cluster.api.items("events") if e["reason"] == PREEMPTION_OVERDUE]
    assert overdue and all(e["type"] == "Warning" for e in overdue)
    assert "did not stop within 7 min" in overdue[0]["message"]
    assert "restarts it from its latest checkpoint" in overdue[0]["message"]
    scheduler(cluster, clock, grace=300).run_pass()
    assert all(p["spec"].get("nodeName") for p in task_pods(cluster, high))


@pytest.mark.emulator_only  # the emulator fails API calls on demand: fault injection
def test_a_notice_that_cannot_be_made_deletes_the_victims_pods_at_once(cluster):
    clock = Clock()
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    low = create_task_on(cluster, master_task("0.38.1", experiment=1, slots_per_trial=8, priority=10))
    scheduler(cluster, clock).run_pass()
    create_task_on(cluster, master_task("0.38.1", experiment=2, slots_per_trial=8, priority=90))
    cluster.api.fail("POST", "pods", 403, 'pods is forbidden: User "x" cannot create resource "pods"')
    scheduler(cluster, clock).run_pass()
    assert gone(cluster, low) == []
    (event, *_) = [e for e in cluster.api.items("events") if e["reason"] == PREEMPTION_OVERDUE]
    assert "its preemption notice could not be created" in event["message"]


def test_doctor_shows_a_preemption_taking_longer_than_expected(cluster, run_cli):
    clock = Clock()
    clock.now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=12)  # marked 12 minutes ago
    low, _, _ = victim_and_preemptor(cluster, "0.38.1", clock, grace=3600)
    result = run_cli("doctor", "-o", "json")
    (found,) = json.loads(result.out)["preemptionsInProgress"]
    assert (found["allocation"], found["pods"]) == (low.allocation, 2)
    assert 11 <= found["minutes"] <= 13 and found["by"].endswith("attempt-1")
    result = run_cli("doctor")
    assert f"preemption of default/{low.allocation} is taking longer than expected (12 min)" in result.err
    assert "--preemption-grace" in result.err


def test_a_victim_outside_det_k8s_namespace_gets_no_notice_and_its_pods_are_deleted(cluster):
    """det-k8s's shipped RBAC lets it create pods in its own namespace only: a notice for a victim elsewhere would be
    refused, so none is sent; its pods are deleted at once (Determined restarts the trial from its checkpoint)."""
    clock = Clock()
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    elsewhere = LiveScheduler(cluster.connect(), "det", PREEMPT, "sched", serve="coscheduler", clock=clock)
    low = create_task_on(cluster, master_task("0.38.1", experiment=1, slots_per_trial=8, priority=10))
    elsewhere.run_pass()
    create_task_on(cluster, master_task("0.38.1", experiment=2, slots_per_trial=8, priority=90))
    LiveScheduler(cluster.connect(), "det", PREEMPT, "sched", serve="coscheduler", clock=clock).run_pass()
    assert gone(cluster, low) == []
    assert not [p for p in cluster.api.items("pods") if p["spec"].get("schedulerName") == NOTICE_SCHEDULER]
    (event, *_) = [e for e in cluster.api.items("events") if e["reason"] == PREEMPTION_OVERDUE]
    assert "creates pods only in its own namespace det" in event["message"]
