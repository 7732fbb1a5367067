"""Timing subprocesses and calls the same way everywhere: warm-up runs, then the median of several.

The machine may be shared, so every figure is a median (the minimum is kept too), and
comparisons between two commands interleave their runs so that a burst of load elsewhere hits
both alike. Child processes run without PYTHONDONTWRITEBYTECODE, so Python's bytecode caches are
used as after a normal `pip install`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT = 600.0  # seconds any one child process may take


@dataclass(frozen=True)
class Timing:
    median: float
    minimum: float
    runs: int

    def data(self) -> dict[str, float | int]:
        return {"median": round(self.median, 6), "min": round(self.minimum, 6), "runs": self.runs}


def child_env(extra: Mapping[str, str] | None = None, pythonpath: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["COLUMNS"] = "80"
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    env.update(extra or {})
    return env


def run_once(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> float:
    """Seconds one run took; raises CalledProcessError when it fails (a benchmark must not time errors)."""
    start = time.perf_counter()
    subprocess.run(list(argv), env=dict(env), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   check=True, timeout=TIMEOUT)
    return time.perf_counter() - start


def time_commands(commands: Mapping[str, Sequence[str]], *, runs: int, warmup: int = 1, cwd: Path,
                  envs: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Timing]:
    """Median and minimum wall time of each command, their runs interleaved round by round."""
    envs = envs or {}
    default = child_env()
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(warmup + runs):
        for name, argv in commands.items():
            elapsed = run_once(argv, envs.get(name, default), cwd)
            if round_ >= warmup:
                samples[name].append(elapsed)
    return {name: Timing(statistics.median(s), min(s), len(s)) for name, s in samples.items()}


def time_call(function: Callable[[], Any], *, runs: int, warmup: int = 0) -> tuple[Timing, Any]:
    """Median and minimum of calling `function` (the last result is returned too)."""
    result: Any = None
    samples = []
    for round_ in range(warmup + runs):
        start = time.perf_counter()
        result = function()
        elapsed = time.perf_counter() - start
        if round_ >= warmup:
            samples.append(elapsed)
    return Timing(statistics.median(samples), min(samples), len(samples)), result
