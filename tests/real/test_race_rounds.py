"""`benchmarks/race.py` on the real control plane, a few rounds: what RACE.md reports is what these functions count
(the full runs are hundreds of rounds, outside CI's time)."""

from __future__ import annotations

import pytest

from benchmarks.race import run, run_loop

pytestmark = pytest.mark.real


def test_a_loop_round_binds_the_second_gang_beside_the_first_and_kube_scheduler_never_adds_a_pod(real_cluster):
    """The loop's lingering fence with its watch-served check (issue 24): three rounds, fence on, none over-commits,
    and in each the node holds the first gang whatever happened to the second."""
    result = run_loop(real_cluster.plane, 3, say=lambda line: None, spread=0.2, fence=True)
    assert result["mode"] == "loop" and result["rounds"] == 3 and result["overcommits"] == 0
    assert result["det_k8s_first"] + result["kube_scheduler_first"] <= 3


def test_a_whole_pass_round_counts_who_got_the_node(real_cluster):
    result = run(real_cluster.plane, 2, say=lambda line: None, spread=0.2, fence=True)
    assert result["rounds"] == 2 and result["overcommits"] == 0
    assert result["det_k8s_first"] + result["kube_scheduler_first"] == 2  # the node went to exactly one of them
