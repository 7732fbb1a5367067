"""`./scripts/test --lane NAME` runs one lane of the suite; the lanes together must select every test exactly once.

The lanes' selections are read from scripts/test itself (its `case` on the lane), so a new test directory or marker
that no lane selects fails here rather than going unrun in the GitHub workflow's lanes.
"""

from __future__ import annotations

import glob
import re
import shlex
import subprocess
import sys
from collections import Counter

from tests.conftest import ROOT

LANES = ("lint", "unit", "live", "real")


def lane_selections() -> dict[str, list[str]]:
    text = (ROOT / "scripts" / "test").read_text()
    found = {name: shlex.split(body) for name, body in re.findall(r"^\s+(\w+)\) selection=\((.*)\) ;;$", text, re.M)}
    return {name: [m for a in args for m in (sorted(glob.glob(a, root_dir=ROOT)) if "*" in a else [a])]
            for name, args in found.items()}


def collected(args: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode in (0, 5), out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_every_lane_is_declared_and_all_selects_everything():
    selections = lane_selections()
    assert set(selections) == {"all", *LANES}, sorted(selections)
    assert selections["all"] == []


def test_the_lanes_together_select_every_test_exactly_once():
    selections = lane_selections()
    everything = Counter(collected(["tests"]))
    by_lanes = Counter(test for lane in LANES for test in collected(selections[lane]))
    missing = sorted(everything - by_lanes)
    twice = sorted(test for test, count in by_lanes.items() if count > 1)
    assert not missing, f"{len(missing)} tests are in no lane of scripts/test, e.g. {missing[:5]}"
    assert not twice, f"{len(twice)} tests are in two lanes of scripts/test, e.g. {twice[:5]}"
