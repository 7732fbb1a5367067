"""A hyperparameter search is planned as the trials it runs at once, each its own gang (the newcomer's report)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import example
from tests.support.k8s_emulator import node

ASHA = """name: search-asha
resources: {slots_per_trial: 8}
searcher:
  name: adaptive_asha
  metric: loss
  max_trials: 16
  max_concurrent_trials: 2
  max_length: {epochs: 10}
"""
SNAPSHOT = example("snapshots") / "three-4gpu-nodes.yaml"


def test_an_asha_search_with_two_concurrent_trials_is_two_gangs(run_cli, tmp_path):
    exp = tmp_path / "asha.yaml"
    exp.write_text(ASHA)
    result = run_cli("plan", exp, "--snapshot", SNAPSHOT, "--set", "maxSlotsPerPod=4", "-o", "json")
    assert result.code == 0, result.err
    records = json.loads(result.out)["experiments"]
    assert [(r["name"], r["trial"], r["trials"]) for r in records] == [("search-asha", 1, 2), ("search-asha", 2, 2)]
    # 8 slots per trial, 4 per pod: each trial is a 2-pod gang; the three 4-GPU nodes hold one trial, not two.
    assert [r["status"] for r in records] == ["placed", "queued"]
    assert len(records[0]["pods"]) == 2 and {p["slots"] for p in records[0]["pods"]} == {4}
    assert ("search-asha: adaptive_asha search, 2 trials at once (max_trials 16 in 2 bracket(s), "
            "max_concurrent_trials 2); each trial is its own gang") in result.err


def test_the_table_names_each_trial(run_cli, tmp_path):
    exp = tmp_path / "asha.yaml"
    exp.write_text(ASHA.replace("slots_per_trial: 8", "slots_per_trial: 4"))
    result = run_cli("plan", exp, "--snapshot", SNAPSHOT, "--set", "maxSlotsPerPod=4")
    assert result.code == 0, result.err
    assert "search-asha (trial 1/2)" in result.out and "search-asha (trial 2/2)" in result.out
    assert "2 placed, 0 queued, 0 rejected" in result.err


def test_a_single_trial_experiment_is_planned_as_before(run_cli):
    result = run_cli("plan", example("experiments") / "small-4gpu.yaml", "--snapshot", SNAPSHOT, "-o", "json")
    (record,) = json.loads(result.out)["experiments"]
    assert "trial" not in record and record["name"] == "small-4gpu"


def test_experiment_create_refuses_a_search_it_cannot_run(run_cli, cluster, tmp_path):
    cluster.api.put(node("gpu-0", gpus=4))
    exp = tmp_path / "asha.yaml"
    exp.write_text(ASHA)
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\n")
    result = run_cli("experiment", "create", exp, "-f", settings)
    assert result.code == 1
    (line,) = [ln for ln in result.err.splitlines() if ln.startswith("error:")]
    assert "searcher adaptive_asha runs 2 trials at once" in line and "det-k8s plan" in line
    assert cluster.api.items("pods") == [] and cluster.api.items("configmaps") == []


@pytest.mark.parametrize(("searcher", "said"), [
    ("{name: random, metric: loss, max_trials: 16, max_concurrent_trials: 1, max_length: 10}",
     "searcher random runs 16 trials (max_trials 16), one at a time"),
    ("{name: async_halving, metric: loss, max_trials: 8, max_concurrent_trials: 1, num_rungs: 3, max_length: 10}",
     "searcher async_halving runs 8 trials (max_trials 8), one at a time"),
    ("{name: custom, metric: loss}", "searcher custom is a search (det-k8s does not model the custom searcher)"),
])
def test_experiment_create_refuses_a_search_that_runs_its_trials_one_at_a_time(run_cli, cluster, tmp_path, searcher,
                                                                               said):
    # Only searches running several trials at once were refused: a search of 16 trials one at a time was submitted,
    # and det-k8s (no searcher) ran its first trial and nothing else.
    cluster.api.put(node("gpu-0", gpus=4))
    exp = tmp_path / "search.yaml"
    exp.write_text(f"name: seq\nresources: {{slots_per_trial: 4}}\nsearcher: {searcher}\n")
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\n")
    result = run_cli("experiment", "create", exp, "-f", settings)
    assert result.code == 1
    (line,) = [ln for ln in result.err.splitlines() if ln.startswith("error:")]
    assert line.startswith(f"error: {exp}: {said}; det-k8s runs one trial per experiment")
    assert cluster.api.items("pods") == [] and cluster.api.items("configmaps") == []


def test_experiment_create_runs_a_search_of_one_trial(run_cli, cluster, tmp_path):
    cluster.api.put(node("gpu-0", gpus=4))
    exp = tmp_path / "one.yaml"
    exp.write_text("name: one\nresources: {slots_per_trial: 4}\n"
                   "searcher: {name: random, metric: loss, max_trials: 1, max_length: 10}\n")
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\n")
    result = run_cli("experiment", "create", exp, "-f", settings)
    assert result.code == 0, result.err
