"""`trials_at_once` is total and bounded: whatever a searcher section holds, it answers at once, between 1 and
MAX_TRIALS_AT_ONCE, and never raises (it crashed on `divisor: 1`, `num_rungs: 1000000000`, `maxval: .inf` and hung
on `max_trials: 1000000000` without a concurrency limit)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from det_k8s.scheduling.searchers import MAX_TRIALS_AT_ONCE, searcher_problems, trials_at_once
from tests.fuzz.harness import FUZZ, time_bound

NUMBERS = st.one_of(st.integers(-5, 5), st.integers(min_value=-(10**30), max_value=10**30), st.integers(
    min_value=10**300, max_value=10**310), st.floats(allow_nan=True, allow_infinity=True), st.just(True), st.none(),
    st.text(max_size=3), st.lists(st.integers(-3, 10**6), max_size=4))
SEARCHER_KEYS = ["max_trials", "max_concurrent_trials", "divisor", "num_rungs", "max_rungs", "bracket_rungs",
                 "population_size", "max_time", "mode", "max_length"]
SEARCHERS = st.fixed_dictionaries({"name": st.sampled_from(["random", "grid", "async_halving", "adaptive_asha", "pbt",
                                                            "single", "custom", "x"])},
                                  optional={key: NUMBERS for key in SEARCHER_KEYS})
HYPERPARAMETER = st.fixed_dictionaries({"type": st.sampled_from(["int", "double", "log", "categorical", "const", "x"])},
                                       optional={"count": NUMBERS, "minval": NUMBERS, "maxval": NUMBERS,
                                                 "vals": NUMBERS})


@FUZZ
@given(SEARCHERS, st.dictionaries(st.text(max_size=3), HYPERPARAMETER, max_size=40), st.sampled_from(
    ["0.17.15", "0.26.2", "0.38.1"]))
def test_any_searcher_section_is_answered_at_once(searcher, hyperparameters, version):
    config = {"searcher": searcher, "hyperparameters": hyperparameters}
    with time_bound(20):
        search = trials_at_once(config, version)
        problems = searcher_problems(config)
    assert 1 <= search.trials <= MAX_TRIALS_AT_ONCE
    assert len(search.why) < 1000
    assert all(isinstance(message, str) and len(message) < 200 for _, message in problems)


def test_a_billion_trials_at_once_are_planned_as_the_first_thousand():
    search = trials_at_once({"searcher": {"name": "random", "max_trials": 10**9, "max_concurrent_trials": 0}}, "0.38.1")
    assert search.trials == MAX_TRIALS_AT_ONCE == 1000
    assert search.why == ("max_trials 1000000000, max_concurrent_trials 0: 1000000000 at once, of which det-k8s plans "
                          "the first 1000")
    grid = {"h": {"type": "int", "minval": 0, "maxval": 10**9, "count": 10**9}}
    huge = trials_at_once({"searcher": {"name": "grid", "max_concurrent_trials": 0},
                           "hyperparameters": {f"h{i}": grid["h"] for i in range(600)}}, "0.38.1")
    assert huge.trials == 1000 and huge.why.startswith("more than 10^5399 grid points")
