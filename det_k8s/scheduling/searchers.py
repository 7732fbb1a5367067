"""How many trials a Determined hyperparameter search runs at once, read from its `searcher` section.

A search's trials are separate tasks: each gets its own pods, all of a trial's pods start
together, and different trials start independently. So a search that runs N trials at once is
planned as N gangs, not one. N is what the Determined master creates when the search starts,
per searcher (master/pkg/searcher/*.go in determined-ai/determined):

- `single`: 1.
- `random`: `max_trials`, at most `max_concurrent_trials` when that is above 0 (`random.go`).
- `grid`: the number of grid points, at most `max_concurrent_trials` when above 0 (`grid.go`).
- `async_halving`: `max_concurrent_trials` (at most `max_trials`); at 0, `divisor ** (num_rungs - 1)`
  clamped to 1..`max_trials` (`asha_stopping.go`).
- `adaptive_asha`: one async-halving search per bracket, all started together; each bracket's
  `max_trials` and `max_concurrent_trials` are shared out as `getBracketMaxTrials` and
  `getBracketMaxConcurrentTrials` do (`adaptive_asha.go`; its tests pin the arithmetic).
- `pbt`: `population_size`.
- `custom`, and the end-of-life `adaptive`, `adaptive_simple`, `sync_halving`: not modelled;
  planned as one trial, and the plan says so.

Whatever the searcher, `resources.max_slots` caps the count at `max_slots // slots_per_trial` (the master's
Kubernetes resource manager keeps an experiment's running trials within it).

`max_concurrent_trials` defaults to 16 from Determined 0.26.2 and to 0 (no limit) at 0.17.15
(`determined/versions.py`); the plan names the default it assumed.

`searcher_problems` refuses the values these counts read that Determined's schemas refuse (an integer
below its minimum, a `divisor` not above 1, a grid bound of the wrong type; `parse_experiment` reports them
with file:line), and `trials_at_once` never raises whatever it is given: a value of the wrong type is
ignored, powers that would overflow are capped, and a search never plans more than
`MAX_TRIALS_AT_ONCE` trials (the plan says "the first N"), so `max_trials: 1000000000` with no
concurrency limit is answered at once instead of building a billion groups. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..determined.versions import DEFAULT, has, parse_version
from ..safe_read import type_name

DIVISOR = 4.0  # every searcher's `divisor` default
MAX_RUNGS = 5  # adaptive_asha's `max_rungs` default
MAX_RUNGS_MODELLED = 64  # more rungs (brackets) than any search has: beyond it the bracket shares no longer change
MAX_TRIALS_AT_ONCE = 1000  # trials of one search planned as groups; a larger search is planned as its first 1000
MODES = ("standard", "conservative", "aggressive")
NOT_MODELLED = ("custom", "adaptive", "adaptive_simple", "sync_halving")


@dataclass(frozen=True)
class Search:
    """A search's name, how many trials it runs at once, and why that many (for the plan's output)."""

    searcher: str
    trials: int
    why: str


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    """A finite number as a float (an integer too large for a float, NaN and infinities are None)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _divisor(searcher: Mapping[str, Any]) -> float:
    """`divisor` when it is what Determined accepts (a number above 1), else the default."""
    given = _number(searcher.get("divisor"))
    return given if given is not None and given > 1 else DIVISOR


def _power(base: float, exponent: int, cap: float = math.inf) -> float:
    """`base ** exponent` (base > 1), at most `cap`, and never an OverflowError."""
    if exponent <= 0:
        return 1.0
    exponent = min(exponent, 1 << 60)  # a float holds it; for a base above 1 the result is as large either way
    if cap < math.inf and exponent * math.log(base) >= math.log(cap):
        return cap
    try:
        return min(base ** exponent, cap)
    except OverflowError:
        return cap


def searcher_problems(config: Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """(key path, message) for each value this module reads that Determined's schema refuses (`searcher-*.json`,
    `hyperparameter-*.json`: integers with a minimum, `divisor` above 1, grid bounds and counts). Keys a searcher
    does not have are `check_keys`'s to report; a value that is missing is the schema's default."""
    problems: list[tuple[tuple[str | int, ...], str]] = []

    def integer(value: Any, path: tuple[str | int, ...], low: int | None) -> None:
        if value is None:
            return
        if _int(value) is None:
            problems.append((path, f"expected an integer, found {_kind(value)}"))
        elif low is not None and value < low:
            problems.append((path, f"must be at least {low}, found {value}"))

    searcher = config.get("searcher")
    if isinstance(searcher, Mapping):
        for key, low in (("max_trials", 1), ("max_concurrent_trials", 0), ("num_rungs", 1), ("max_rungs", 1),
                         ("population_size", 1), ("num_rounds", 1), ("max_time", None)):
            integer(searcher.get(key), ("searcher", key), low)
        divisor = searcher.get("divisor")
        if divisor is not None:
            number = _number(divisor)
            if number is None or number <= 1:
                found = _kind(divisor) if number is None and not isinstance(divisor, int | float) else \
                    _shown_number(divisor)
                problems.append((("searcher", "divisor"), f"must be a number above 1, found {found}"))
        rungs = searcher.get("bracket_rungs")
        if isinstance(rungs, list):
            for index, rung in enumerate(rungs):
                if _int(rung) is None:
                    problems.append((("searcher", "bracket_rungs", index), f"expected an integer, found {_kind(rung)}"))
        elif rungs is not None:
            problems.append((("searcher", "bracket_rungs"), f"expected a list of integers, found {_kind(rungs)}"))
    pending: list[tuple[Any, tuple[str | int, ...]]] = [(config.get("hyperparameters"), ("hyperparameters",))]
    while pending:  # nested hyperparameters: iterative (inputs are depth-bounded, this stays flat anyway)
        hyperparameters, where = pending.pop()
        if not isinstance(hyperparameters, Mapping):
            continue
        for name, value in hyperparameters.items():
            path = (*where, str(name))
            if not isinstance(value, Mapping):
                continue
            kind = value.get("type")
            if "type" not in value:
                pending.append((value, path))
            elif kind in ("int", "double", "log"):
                integer(value.get("count"), (*path, "count"), 1)
                for bound in ("minval", "maxval"):
                    given = value.get(bound)
                    if given is None:
                        continue
                    if kind == "int" and _int(given) is None:
                        problems.append(((*path, bound), f"expected an integer, found {_kind(given)}"))
                    elif kind != "int" and _number(given) is None:
                        problems.append(((*path, bound), f"expected a finite number, found {_shown_number(given)}"))
            elif kind == "categorical" and "vals" in value and not isinstance(value.get("vals"), list):
                problems.append(((*path, "vals"), f"expected a list, found {_kind(value.get('vals'))}"))
    return problems


def _count(number: int) -> str:
    """A count for a message: a grid's product of counts may have more digits than Python prints."""
    return str(number) if number < 10**15 else f"more than 10^{int(number.bit_length() * math.log10(2)) - 1}"


def _kind(value: Any) -> str:
    return type_name(value)


def _shown_number(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) and len(str(value)) <= 30 \
        else _kind(value)


def _default_concurrency(app_version: str) -> tuple[int, str]:
    version = parse_version(app_version) or DEFAULT
    if has("searcher.max_concurrent_trials.default_16", version):
        return 16, f"max_concurrent_trials not set: Determined {version}'s default is 16"
    return 0, f"max_concurrent_trials not set: Determined {version}'s default is no limit"


def _concurrency(searcher: Mapping[str, Any], app_version: str) -> tuple[int, str]:
    given = _int(searcher.get("max_concurrent_trials"))
    if given is not None and given >= 0:
        return given, f"max_concurrent_trials {_count(given)}"
    return _default_concurrency(app_version)


def _length_units(searcher: Mapping[str, Any]) -> int | None:
    """The training length of `max_length` (`{batches: N}`, `{epochs: N}`, or a bare N) or `max_time`."""
    length = searcher.get("max_length")
    if isinstance(length, Mapping):
        length = next((length[k] for k in ("batches", "records", "epochs") if _int(length.get(k))), None)
    units = _int(length) if length is not None else _int(searcher.get("max_time"))
    return units if units and units > 0 else None


def _bracket_rungs(searcher: Mapping[str, Any], max_trials: int, divisor: float) -> list[int]:
    given = searcher.get("bracket_rungs")
    if isinstance(given, list) and given and all(_int(r) and r > 0 for r in given):
        return sorted((min(r, MAX_RUNGS_MODELLED) for r in given), reverse=True)[:MAX_RUNGS_MODELLED]
    max_rungs = min(_int(searcher.get("max_rungs")) or MAX_RUNGS, MAX_RUNGS_MODELLED)
    units = _length_units(searcher)
    if units:
        max_rungs = min(max_rungs, int(math.log(units) / math.log(divisor)) + 1)
    max_rungs = max(1, min(max_rungs, int(math.log(max_trials) / math.log(divisor)) + 1))
    mode = searcher.get("mode") if searcher.get("mode") in MODES else "standard"
    if mode == "aggressive":
        return [max_rungs]
    first = 1 if mode == "conservative" else (max_rungs - 1) // 2 + 1
    return sorted(range(first, max_rungs + 1), reverse=True)


def bracket_max_trials(max_trials: int, divisor: float, brackets: Sequence[int]) -> list[int]:
    """`getBracketMaxTrials`: trials per bracket for roughly equal training budget per bracket."""
    try:
        weights = [divisor ** (rungs - 1) / rungs for rungs in brackets]
    except OverflowError:  # a huge divisor: the same shares, computed relative to the largest weight
        logs = [(rungs - 1) * math.log(divisor) - math.log(rungs) for rungs in brackets]
        weights = [math.exp(w - max(logs)) for w in logs]
    total = sum(weights)
    trials = [max(int(w / total * max_trials), 1) for w in weights]
    trials[0] += max(max_trials - sum(trials), 0)
    return trials


def bracket_max_concurrent_trials(concurrency: int, divisor: float, max_trials: Sequence[int]) -> list[int]:
    """`getBracketMaxConcurrentTrials`: an even split (remainder to the most aggressive brackets), or at 0 each
    bracket as many as the least aggressive one's trials, at least `divisor`."""
    count = len(max_trials)
    if concurrency == 0:
        return [max(max_trials[-1], int(divisor))] * count
    concurrency = max(concurrency, count)
    out = [concurrency // count] * count
    for i in range(concurrency % count):
        out[i] += 1
    return out


def _async_halving(max_trials: int, concurrency: int, num_rungs: int, divisor: float) -> int:
    if concurrency > 0:
        return min(concurrency, max_trials)
    return max(1, min(int(_power(divisor, num_rungs - 1, float(max_trials))), max_trials))


def grid_points(hyperparameters: Any) -> int | None:
    """How many points a grid search has: the product of each hyperparameter's values (None: not a full grid)."""
    if not isinstance(hyperparameters, Mapping):
        return 1
    points = 1
    for value in hyperparameters.values():
        count: int | None
        if not isinstance(value, Mapping):
            count = 1  # a constant written as its value
        elif "type" not in value:
            count = grid_points(value)  # nested hyperparameters
        elif value.get("type") == "const":
            count = 1
        elif value.get("type") == "categorical":
            count = len(value["vals"]) if isinstance(value.get("vals"), list) and value["vals"] else None
        elif value.get("type") in ("int", "double", "log"):
            count = _int(value.get("count"))
            low, high = _number(value.get("minval")), _number(value.get("maxval"))
            if count and value.get("type") == "int" and low is not None and high is not None:
                count = min(count, int(high) - int(low) + 1)  # no more points than integers in the range
        else:
            count = None
        if not count or count < 1:
            return None
        points *= count
    return points


def trials_at_once(config: Mapping[str, Any], app_version: str) -> Search:
    """How many trials the experiment `config` starts at once under Determined `app_version` (at most
    `MAX_TRIALS_AT_ONCE`), and why."""
    search = _max_slots(config, _trials_at_once(config, app_version))
    if search.trials > MAX_TRIALS_AT_ONCE:
        return Search(search.searcher, MAX_TRIALS_AT_ONCE,
                      f"{search.why}: {_count(search.trials)} at once, of which det-k8s plans the first "
                      f"{MAX_TRIALS_AT_ONCE}")
    return search


def _max_slots(config: Mapping[str, Any], search: Search) -> Search:
    """At most `resources.max_slots // slots_per_trial` trials at once: the master's Kubernetes resource manager
    skips a trial while the experiment's running trials and it would exceed max_slots (`schedulePendingTasks`).
    A max_slots below slots_per_trial starts none (`experiments.py` refuses it)."""
    resources = config.get("resources")
    resources = resources if isinstance(resources, Mapping) else {}
    max_slots = _int(resources.get("max_slots"))
    slots = _int(resources.get("slots_per_trial"))
    slots = 1 if slots is None else slots
    if max_slots is None or slots < 1 or not 1 <= max_slots // slots < search.trials:
        return search
    cap = max_slots // slots
    return Search(search.searcher, cap, f"{search.why}; resources.max_slots {max_slots} lets {_count(cap)} trial(s) "
                  f"of {slots} slots run at once")


def _trials_at_once(config: Mapping[str, Any], app_version: str) -> Search:
    searcher = config.get("searcher")
    if not isinstance(searcher, Mapping) or not isinstance(searcher.get("name"), str):
        return Search("single", 1, "no searcher")
    name = str(searcher["name"])
    max_trials = _int(searcher.get("max_trials"))
    divisor = _divisor(searcher)
    if name == "single":
        return Search(name, 1, "a single trial")
    if name == "pbt":
        population = _int(searcher.get("population_size"))
        if population and population > 0:
            return Search(name, population, f"population_size {_count(population)}")
        return Search(name, 1, "population_size not set: planned as one trial")
    if name in NOT_MODELLED or name not in ("random", "grid", "async_halving", "adaptive_asha"):
        return Search(name, 1, f"det-k8s does not model the {name} searcher: planned as one trial")
    concurrency, why = _concurrency(searcher, app_version)
    if name == "grid":
        points = grid_points(config.get("hyperparameters"))
        if points is None:
            return Search(name, max(concurrency, 1), f"grid size unknown (a hyperparameter without count or vals); "
                          f"{why}")
        trials = min(points, concurrency) if concurrency > 0 else points
        return Search(name, trials, f"{_count(points)} grid points, {why}")
    if not max_trials or max_trials < 1:
        return Search(name, 1, "max_trials not set: planned as one trial")
    if name == "random":
        trials = min(max_trials, concurrency) if concurrency > 0 else max_trials
        return Search(name, trials, f"max_trials {_count(max_trials)}, {why}")
    shown, max_trials = _count(max_trials), min(max_trials, 2**53)  # beyond, the arithmetic needs floats it overflows
    if name == "async_halving":
        rungs = _int(searcher.get("num_rungs")) or 1
        return Search(name, _async_halving(max_trials, concurrency, rungs, divisor), f"max_trials {shown}, {why}")
    brackets = _bracket_rungs(searcher, max_trials, divisor)
    per_bracket = bracket_max_trials(max_trials, divisor, brackets)
    shares = bracket_max_concurrent_trials(concurrency, divisor, per_bracket)
    trials = sum(_async_halving(t, c, r, divisor) for t, c, r in zip(per_bracket, shares, brackets, strict=True))
    return Search(name, trials, f"max_trials {shown} in {len(brackets)} bracket(s), {why}")


def total_trials(config: Mapping[str, Any]) -> tuple[int | None, str]:
    """How many trials the search of experiment `config` runs in all (None: not known here), and why: `single` 1,
    `random`, `async_halving` and `adaptive_asha` `max_trials`, `grid` its points, `pbt` `population_size` per
    round for `num_rounds` rounds; the searchers not modelled are unknown."""
    searcher = config.get("searcher")
    if not isinstance(searcher, Mapping) or not isinstance(searcher.get("name"), str):
        return 1, "no searcher"
    name = str(searcher["name"])
    if name == "single":
        return 1, "a single trial"
    if name in ("random", "async_halving", "adaptive_asha"):
        max_trials = _int(searcher.get("max_trials"))
        return (max_trials, f"max_trials {max_trials}") if max_trials and max_trials > 0 else (None, "max_trials unset")
    if name == "grid":
        points = grid_points(config.get("hyperparameters"))
        return (points, f"{points} grid points") if points else (None, "grid size unknown")
    if name == "pbt":
        population, rounds = _int(searcher.get("population_size")), _int(searcher.get("num_rounds"))
        if population and rounds and population > 0 and rounds > 0:
            return population * rounds, f"population_size {population} x num_rounds {rounds}"
        return None, "population_size or num_rounds unset"
    return None, f"det-k8s does not model the {name} searcher"
