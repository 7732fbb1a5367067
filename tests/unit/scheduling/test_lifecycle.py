"""What becomes of a running group: still running, completed, or lost (torn down whole)."""

from __future__ import annotations

import pytest

from det_k8s.cluster.model import Pod
from det_k8s.scheduling.lifecycle import Verdict, group_health, next_attempt

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
