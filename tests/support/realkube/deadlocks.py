"""The product documents' two deadlocks, played on the real Determined master (tests/support/realkube/determined.py), one
round at a time: the tests assert on a round, `benchmarks/real_master.py` counts many.

1. Two 12-GPU experiments submitted at once on 3 nodes of 4 GPUs.
2. A 16-GPU experiment beside an 8-GPU one on 4 nodes of 4 GPUs.

A round "starts in part" when an experiment has some, not all, of its pods bound for `PARTIAL_SECONDS` on end. With a
gang scheduler the round then frees room (the experiment holding the GPUs is killed) and checks that the waiting one
is placed whole: "placed after".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tests.support.realkube.determined import DeterminedOnKube

PARTIAL_SECONDS = 4.0


@dataclass(frozen=True)
class Round:
    partial: bool  # an experiment stayed started in part
    placed_after: bool  # the waiting experiment was placed whole once room appeared (gang rounds only)
    detail: str


def partial_for(det: DeterminedOnKube, experiments: list[int], seconds: float = PARTIAL_SECONDS) -> list[int]:
    """The experiments that stay started in part (some pods bound, some not) through `seconds`."""
    partial = set(experiments)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and partial:
        for e in list(partial):
            bound, total = det.bound(e)
            if not 0 < bound < total:
                partial.discard(e)
        time.sleep(0.5)
    return sorted(partial)


def _wait(det: DeterminedOnKube, what: str, check: Any, timeout: float = 120) -> bool:
    try:
        det.plane.wait_for(what, check, timeout=timeout, interval=0.2)
        return True
    except AssertionError:
        return False


def two_12_gpu_experiments(det: DeterminedOnKube, *, gang: bool) -> Round:
    det.nodes(3)
    a, b = det.submit(12, 12)
    _wait(det, "both experiments' pods", lambda: len(det.trial_pods(a)) == len(det.trial_pods(b)) == 3)
    # what the scheduler does with them: det-k8s binds one whole, kube-scheduler binds until the GPUs run out
    _wait(det, "the GPUs taken", lambda: det.bound(a)[0] + det.bound(b)[0] >= 3, timeout=60)
    partial = bool(partial_for(det, [a, b]))
    detail = f"bound {det.bound(a)} and {det.bound(b)}"
    placed_after = False
    if gang and not partial:
        first, second = (a, b) if det.bound(a)[0] == 3 else (b, a)
        det.kill(first)
        placed_after = _wait(det, "the second placed whole", lambda: det.bound(second) == (3, 3))
    det.kill_all()
    return Round(partial, placed_after, detail)


def a_16_gpu_experiment_beside_8(det: DeterminedOnKube, *, gang: bool) -> Round:
    det.nodes(4)
    (small,) = det.submit(8)
    _wait(det, "the 8-GPU experiment bound", lambda: det.bound(small) == (2, 2))
    (big,) = det.submit(16)
    _wait(det, "the 16-GPU experiment's pods", lambda: len(det.trial_pods(big)) == 4)
    # kube-scheduler binds what fits within a scheduling cycle, det-k8s reports the gang waiting within a pass
    _wait(det, "a first decision", lambda: det.bound(big)[0] > 0 or any(
        e.get("reason") == "GangWaiting" for e in det.events()), timeout=30)
    partial = bool(partial_for(det, [big]))
    detail = f"bound {det.bound(big)}"
    placed_after = False
    if gang and not partial:
        det.kill(small)
        placed_after = _wait(det, "the 16-GPU experiment placed whole", lambda: det.bound(big) == (4, 4))
    det.kill_all()
    return Round(partial, placed_after, detail)


SCENARIOS = {"two 12-GPU experiments on 12 GPUs": two_12_gpu_experiments,
             "a 16-GPU experiment beside 8 of 16 GPUs in use": a_16_gpu_experiment_beside_8}
