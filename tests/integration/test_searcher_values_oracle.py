"""The searcher values det-k8s refuses are the ones Determined's own validator refuses, at the same key.

`searchers.searcher_problems` mirrors the bounds of `searcher-*.json` and `hyperparameter-*.json` for the values
`plan` counts trials with (they crashed or hung it: `divisor: 1`, `num_rungs: 1000000000`, `maxval: .inf`). Each
sample goes through the validator of every tag read (tests/support/determined_oracle.py) and through parse_experiment:
both refuse it, det-k8s at the key the validator names, and both accept the valid neighbours.
"""

from __future__ import annotations

import pytest
import yaml

from det_k8s.determined import expconf
from det_k8s.scheduling.experiments import parse_experiment
from tests.integration.test_determined_schemas import SHARED, oracle
from tests.integration.test_experiment_schemas import with_
from tests.support.needs import need

ASHA = {"name": "adaptive_asha", "metric": "loss", "max_length": {"batches": 100}, "max_trials": 16}
GRID_HP = {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1, "count": 3}, "layers": {"type": "int", "minval": 1,
                                                                                             "maxval": 4, "count": 2}}
GRID = {"name": "grid", "metric": "loss", "max_length": {"batches": 10}}

# sample -> the key det-k8s must name (None: valid, both accept it)
REFUSED = {
    "divisor-1": (with_(searcher={**ASHA, "divisor": 1}), "searcher.divisor"),
    "divisor-negative": (with_(searcher={**ASHA, "divisor": -2.5}), "searcher.divisor"),
    "divisor-a-string": (with_(searcher={**ASHA, "divisor": "four"}), "searcher.divisor"),
    "max-trials-0": (with_(searcher={**ASHA, "max_trials": 0}), "searcher.max_trials"),
    "max-trials-a-float": (with_(searcher={**ASHA, "max_trials": 2.5}), "searcher.max_trials"),
    "max-concurrent-negative": (with_(searcher={**ASHA, "max_concurrent_trials": -1}), "searcher.max_concurrent_trials"),
    "max-rungs-0": (with_(searcher={**ASHA, "max_rungs": 0}), "searcher.max_rungs"),
    "bracket-rungs-of-strings": (with_(searcher={**ASHA, "bracket_rungs": ["a"]}), "searcher.bracket_rungs[0]"),
    "num-rungs-0": (with_(searcher={"name": "async_halving", "metric": "loss", "max_length": {"batches": 10},
                                    "max_trials": 4, "num_rungs": 0}), "searcher.num_rungs"),
    "grid-count-0": (with_(searcher=GRID, hyperparameters={**GRID_HP, "lr": {**GRID_HP["lr"], "count": 0}}),
                     "hyperparameters.lr.count"),
    "grid-int-bound-a-float": (with_(searcher=GRID, hyperparameters={
        **GRID_HP, "layers": {**GRID_HP["layers"], "maxval": 4.5}}), "hyperparameters.layers.maxval"),
    # (a string bound is left out: the validator itself raises comparing it with the other bound)
}
ACCEPTED = {
    "divisor-just-above-1": with_(searcher={**ASHA, "divisor": 1.01}),
    "huge-but-valid-counts": with_(searcher={**ASHA, "max_trials": 10**9, "max_concurrent_trials": 0, "max_rungs": 10**6,
                                             "bracket_rungs": [10**5, 3]}),
    "grid": with_(searcher=GRID, hyperparameters=GRID_HP),
}


@pytest.fixture(autouse=True)
def _shared() -> None:
    need((SHARED / "schemas").is_dir(), f"{SHARED} is absent: Determined's schemas are read from there")


@pytest.mark.parametrize("tag", list(expconf.TAGS))
def test_determined_and_det_k8s_refuse_the_same_searcher_values(tag):
    samples = [config for config, _ in REFUSED.values()] + list(ACCEPTED.values())
    verdicts = oracle(tag, "experiment.json", samples)
    for (name, (config, key)), found in zip(REFUSED.items(), verdicts, strict=False):
        assert found, f"{name}: Determined {tag} accepts it"
        parsed = parse_experiment(yaml.safe_dump(config), f"{name}.yaml", version=expconf.TAGS[tag])
        assert key in {p.path for p in parsed.errors}, (name, found, [p.render() for p in parsed.errors])
    for (name, config), found in zip(ACCEPTED.items(), verdicts[len(REFUSED):], strict=True):
        assert found == [], f"{name}: Determined {tag} refuses it: {found}"
        parsed = parse_experiment(yaml.safe_dump(config), f"{name}.yaml", version=expconf.TAGS[tag])
        assert parsed.errors == [], [p.render() for p in parsed.errors]
