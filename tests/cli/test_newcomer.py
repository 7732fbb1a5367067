"""Issue 25, a newcomer's first hour: what a helm/kubectl user tries first does what they expect."""

from __future__ import annotations

import re

import pytest

from tests.conftest import example

EXPERIMENTS = example("experiments")
SNAPSHOTS = example("snapshots")
URGENT = EXPERIMENTS / "high-priority-8gpu.yaml"
MIXED = SNAPSHOTS / "mixed-cluster.yaml"
SETTINGS = example("gpu-cluster.yaml")


def test_plan_names_the_queue_it_planned_and_the_lower_priority_groups_elsewhere(run_cli):
    result = run_cli("plan", URGENT, "--snapshot", MIXED, "-f", SETTINGS, "--preemption")
    assert result.code == 0, result.err
    assert "no lower-priority group in this queue to evict" in result.out
    line = next(line for line in result.err.splitlines() if "planned for the queue" in line)
    assert "namespace default" in line
    assert "namespace determined: hp-sweep-trial-3 (priority 10)" in line
    assert "plan with -n determined" in line
    assert "llm-pretrain" in line  # priority 80 < 90: also a candidate there


def test_plan_in_the_victims_namespace_preempts_and_says_nothing_more(run_cli):
    result = run_cli("plan", URGENT, "--snapshot", MIXED, "-f", SETTINGS, "-n", "determined", "--preemption")
    assert result.code == 0, result.err
    assert "hp-sweep-trial-3" in result.out and "1 running group(s) preempted" in result.err
    assert "planned for the queue" not in result.err


def test_piped_map_lines_are_whole_not_cut_at_80_columns(run_cli, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    result = run_cli("plan", URGENT, "--snapshot", MIXED, "-f", SETTINGS, "-n", "determined", "--preemption", "--map")
    assert result.code == 0, result.err
    assert "planned, 2 pods; 8 slots in place of A" in result.out
    assert not [line for line in result.out.splitlines() if re.search(r"[a-z)]\.\.\.$", line)]  # nothing cut
    assert any(len(line) > 80 for line in result.out.splitlines())
