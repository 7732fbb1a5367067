"""What becomes of a running group: still running, completed, or lost (torn down whole)."""

from __future__ import annotations

import pytest

from det_k8s.cluster.model import Pod
from det_k8s.scheduling.lifecycle import Charge, Health, Verdict, charge, group_health, next_attempt

NAMES = ["g-0", "g-1"]


def pods(*phases: str, deleting: int | None = None, reason: str = "") -> list[Pod]:
    return [Pod(name, node_name="n", phase=phase, deleting=i == deleting, reason=reason if phase == "Failed" else "")
            for i, (name, phase) in enumerate(zip(NAMES, phases, strict=True))]


def test_running_and_pending_pinned_pods_are_running():
    assert group_health(NAMES, pods("Running", "Pending")).verdict is Verdict.RUNNING


def test_all_succeeded_is_completed_and_some_succeeded_is_still_running():
    assert group_health(NAMES, pods("Succeeded", "Succeeded")).verdict is Verdict.COMPLETED
    assert group_health(NAMES, pods("Succeeded", "Running")).verdict is Verdict.RUNNING


def test_a_missing_pod_loses_the_group():
    health = group_health(NAMES, pods("Running", "Running")[:1])
    assert (health.verdict, health.detail, health.counts) == (Verdict.LOST, "pod g-1 is gone (deleted or evicted)", True)


def test_a_failed_pod_loses_the_group_and_counts():
    health = group_health(NAMES, pods("Running", "Failed", reason="Error"))
    assert (health.verdict, health.detail, health.counts) == (Verdict.LOST, "pod g-1 failed (Error)", True)


def test_a_pod_being_deleted_loses_the_group():
    health = group_health(NAMES, pods("Running", "Running", deleting=0))
    assert (health.verdict, health.detail) == (Verdict.LOST, "pod g-0 is being deleted")


@pytest.mark.parametrize("reason", ["OutOfnvidia.com/gpu", "OutOfcpu", "UnexpectedAdmissionError", "NodeAffinity"])
def test_a_kubelet_admission_rejection_does_not_count(reason):
    health = group_health(NAMES, pods("Running", "Failed", reason=reason))
    assert health.verdict is Verdict.LOST and not health.counts
    assert "the kubelet refused pod g-1" in health.detail


def test_the_retry_limit():
    assert next_attempt(0, 3) == (1, True)
    assert next_attempt(2, 3) == (3, False)


REJECTED = Health(Verdict.LOST, "refused", counts=False)
FAILED = Health(Verdict.LOST, "failed")


def test_admission_rejections_are_free_up_to_the_limit_then_count_as_attempts():
    assert charge(REJECTED, attempts=0, rejections=0, max_attempts=3, free_rejections=2) == Charge(0, 1, True)
    assert charge(REJECTED, attempts=0, rejections=1, max_attempts=3, free_rejections=2) == Charge(0, 2, True)
    assert charge(REJECTED, attempts=0, rejections=2, max_attempts=3, free_rejections=2) == Charge(1, 3, True)
    assert charge(REJECTED, attempts=2, rejections=4, max_attempts=3, free_rejections=2) == Charge(3, 5, False)


def test_a_failure_counts_and_leaves_the_rejection_count_alone():
    assert charge(FAILED, attempts=1, rejections=4, max_attempts=3) == Charge(2, 4, True)
    assert charge(FAILED, attempts=2, rejections=0, max_attempts=3) == Charge(3, 0, False)


def unschedulable_pods(since: str) -> list[Pod]:
    stuck = Pod("g-1", phase="Pending", unschedulable="0/3 nodes are available: 3 Insufficient cpu. preemption: "
                "0/3 nodes are available: 3 No preemption victims found for incoming pod.", unschedulable_since=since)
    return [Pod("g-0", node_name="n", phase="Running"), stuck]


def test_a_pod_unschedulable_past_the_grace_period_loses_the_group_without_counting():
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, 0, 2, tzinfo=UTC)
    assert group_health(NAMES, unschedulable_pods("2026-01-01T00:01:30Z"), now).verdict is Verdict.RUNNING
    health = group_health(NAMES, unschedulable_pods("2026-01-01T00:00:30Z"), now)
    assert health == Health(Verdict.LOST, "kube-scheduler cannot place pod g-1 on the node det-k8s chose "
                                          "(3 Insufficient cpu)", counts=False)
    assert group_health(NAMES, unschedulable_pods("2026-01-01T00:00:30Z")).verdict is Verdict.RUNNING  # no clock


def test_scheduler_messages_never_keep_the_phrase_the_determined_master_rewrites():
    from det_k8s.scheduling.lifecycle import scheduler_message

    assert scheduler_message("0/5 nodes are available: 2 node(s) had untolerated taint {gpu: x}, 3 Insufficient "
                             "nvidia.com/gpu. preemption: 0/5 nodes are available: 5 No preemption victims found.") == (
        "2 node(s) had untolerated taint {gpu: x}, 3 Insufficient nvidia.com/gpu")
    assert "nodes are available" not in scheduler_message("odd: nodes are available here")


def test_kube_scheduler_137_messages_are_quoted_whole_without_their_tails():
    # As the real kube-scheduler 1.37 writes them (tests/support/realkube); with
    # DynamicResources on, a post-filter note comes
    # before the preemption tail, and the quote ended mid-sentence ("... no new claims to deallocate,").
    from det_k8s.scheduling.lifecycle import scheduler_message

    assert scheduler_message("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated "
                             "taint(s). preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
                             "scheduling.") == "1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)"
    assert scheduler_message("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
                             "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
                             ) == "1 Insufficient nvidia.com/gpu"
