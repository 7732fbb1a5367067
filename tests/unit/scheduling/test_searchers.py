"""How many trials a Determined search runs at once, per searcher (master/pkg/searcher/*.go).

The bracket arithmetic is checked against the values Determined's own tests pin
(master/pkg/searcher/adaptive_asha_test.go: TestBracketMaxTrials, TestBracketMaxConcurrentTrials).
"""

from __future__ import annotations

import pytest

from det_k8s.scheduling.searchers import (
    bracket_max_concurrent_trials,
    bracket_max_trials,
    grid_points,
    trials_at_once,
)


@pytest.mark.parametrize(("args", "expected"), [
    ((20, 3.0, [3, 2, 1]), [12, 5, 3]),
    ((50, 3.0, [4, 3]), [35, 15]),
    ((50, 4.0, [3, 2]), [37, 13]),
    ((100, 4.0, [4, 3, 2]), [70, 22, 8]),
])
def test_bracket_max_trials_as_determined_tests_it(args, expected):
    assert bracket_max_trials(*args) == expected


@pytest.mark.parametrize(("args", "expected"), [
    ((0, 3.0, [9, 3, 1]), [3, 3, 3]),
    ((11, 3.0, [9, 3, 1]), [4, 4, 3]),
    ((0, 4.0, [40, 10]), [10, 10]),
])
def test_bracket_max_concurrent_trials_as_determined_tests_it(args, expected):
    assert bracket_max_concurrent_trials(*args) == expected


def search(app_version: str = "0.38.1", hyperparameters=None, **searcher):
    config = {"searcher": searcher, **({"hyperparameters": hyperparameters} if hyperparameters else {})}
    return trials_at_once(config, app_version)


def test_the_newcomers_adaptive_asha_search_runs_its_max_concurrent_trials():
    found = search(name="adaptive_asha", metric="loss", max_trials=16, max_concurrent_trials=2,
                   max_length={"epochs": 10})
    assert (found.searcher, found.trials) == ("adaptive_asha", 2)
    assert "max_concurrent_trials 2" in found.why


def test_adaptive_asha_gives_each_bracket_at_least_one_trial():
    # max_trials 64 and a long max_length give 3 brackets in standard mode: 3 trials even when 1 is asked for.
    assert search(name="adaptive_asha", max_trials=64, max_concurrent_trials=1, max_length={"batches": 6400}).trials == 3
    assert search(name="adaptive_asha", max_trials=64, max_concurrent_trials=1, mode="aggressive",
                  max_length={"batches": 6400}).trials == 1


def test_the_default_concurrency_depends_on_the_determined_version():
    new = search("0.38.1", name="random", max_trials=40)
    old = search("0.17.15", name="random", max_trials=40)
    assert (new.trials, old.trials) == (16, 40)
    assert "Determined 0.38.1's default is 16" in new.why and "Determined 0.17.15's default is no limit" in old.why


@pytest.mark.parametrize(("searcher", "expected"), [
    ({"name": "single"}, 1),
    ({"name": "random", "max_trials": 5, "max_concurrent_trials": 2}, 2),
    ({"name": "random", "max_trials": 3, "max_concurrent_trials": 8}, 3),
    ({"name": "random", "max_trials": 3, "max_concurrent_trials": 0}, 3),
    ({"name": "async_halving", "max_trials": 100, "num_rungs": 3, "max_concurrent_trials": 0}, 16),
    ({"name": "async_halving", "max_trials": 10, "num_rungs": 3, "max_concurrent_trials": 0}, 10),
    ({"name": "async_halving", "max_trials": 100, "num_rungs": 3, "max_concurrent_trials": 5}, 5),
    ({"name": "pbt", "population_size": 6}, 6),
    ({"name": "custom"}, 1),
    ({"name": "adaptive_simple", "max_trials": 50}, 1),
])
def test_each_searcher_starts_as_determined_does(searcher, expected):
    assert search(**searcher).trials == expected


def test_a_searcher_det_k8s_does_not_model_says_so():
    assert "does not model the custom searcher" in search(name="custom").why


def test_grid_points_are_the_product_of_each_hyperparameters_values():
    hps = {"lr": {"type": "log", "minval": -4, "maxval": -1, "base": 10, "count": 4},
           "batch": {"type": "categorical", "vals": [32, 64, 128]},
           "layers": {"type": "int", "minval": 1, "maxval": 2, "count": 5},  # only 2 integers in range
           "model": {"depth": {"type": "const", "val": 3}, "width": 8}}
    assert grid_points(hps) == 4 * 3 * 2
    assert search(name="grid", hyperparameters=hps, max_concurrent_trials=0).trials == 24
    assert search(name="grid", hyperparameters=hps, max_concurrent_trials=5).trials == 5
    assert grid_points({"lr": {"type": "double", "minval": 0, "maxval": 1}}) is None


def test_no_searcher_or_a_wrong_one_is_one_trial():
    assert trials_at_once({}, "0.38.1").trials == 1
    assert trials_at_once({"searcher": "random"}, "0.38.1").trials == 1
    assert search(name="random").trials == 1  # no max_trials: Determined would reject it anyway


@pytest.mark.parametrize(("max_slots", "slots", "expected"), [(8, 4, 2), (9, 4, 2), (4, 4, 1), (64, 4, 5), (None, 4, 5)])
def test_resources_max_slots_caps_the_trials_running_at_once(max_slots, slots, expected):
    # The master's Kubernetes resource manager skips a trial while the experiment's running trials plus it would
    # exceed resources.max_slots (schedulePendingTasks: slotsUsedPerGroup[group] + SlotsNeeded > *maxSlots, in
    # 0.17.15, 0.26.2 and v0.38.1): a random search with max_concurrent_trials 5 and max_slots 8 runs 2 4-GPU trials.
    config = {"resources": {"slots_per_trial": slots, **({"max_slots": max_slots} if max_slots else {})},
              "searcher": {"name": "random", "max_trials": 10, "max_concurrent_trials": 5}}
    found = trials_at_once(config, "0.38.1")
    assert found.trials == expected
    assert (f"resources.max_slots {max_slots}" in found.why) == (expected < 5), found.why
