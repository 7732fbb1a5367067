"""A Volcano/Kueue reviewer's attempts to break det-k8s as the scheduler of the master's pods (review 4).

Each test is a scenario that failed before its fix: the real `kubernetes` client against the emulator, pods as
each master version creates them (`tests/master_pods.py`).
"""

from __future__ import annotations

import pytest

from det_k8s.kube.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy

from tests.kube.test_master_scheduling import events_on, nodes, pods_of, submit
from tests.master_pods import VERSIONS


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
