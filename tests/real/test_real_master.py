"""The real Determined master (built from its source in ../shared), outside the cluster on the real control plane,
its experiments submitted with the real `det` CLI, gang-scheduled by `det-k8s scheduler run`.

- The master runs as the ServiceAccount and ClusterRole the bundled chart ships, on the bundled chart's own master
  configuration, changed only where running outside the cluster needs it (`OUT_OF_CLUSTER` in
  tests/support/realkube/determined.py).
- det-k8s runs as the ServiceAccount and RBAC `scheduler manifest` ships.
- kwok serves `pods/log` on 127.0.0.1, so the master sees its pods run (else its trials stay STARTING).

The documents' two deadlocks are checked on the API server's pods, with det-k8s and with kube-scheduler alone (the
master's default). `DET_K8S_MASTER_ROUNDS` sets the rounds (2 here; `python -m benchmarks.real_master` runs 20 and
writes the counts).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.realkube.deadlocks import a_16_gpu_experiment_beside_8, partial_for, two_12_gpu_experiments
from tests.support.realkube.determined import MASTER_SA, MASTER_VERSION, DeterminedOnKube
from tests.support.realkube.scheduler_run import scheduler_run

# (the fixtures `det`, one master per module, and `clean` are in tests/real/conftest.py)

pytestmark = pytest.mark.real

ROUNDS = int(os.environ.get("DET_K8S_MASTER_ROUNDS", "2"))
JOBS = tuple(int(p) for p in MASTER_VERSION.split(".")) >= (0, 34)  # the master's task pods are a Job's (0.34+)


@pytest.fixture
def gang_scheduler(det: DeterminedOnKube, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    with scheduler_run(det, tmp_path) as proc:
        yield proc


@pytest.fixture
def kube_scheduler_alone(det: DeterminedOnKube) -> Iterator[DeterminedOnKube]:
    """The master as Determined installs it by default: no defaultScheduler, its pods placed by kube-scheduler."""
    det.reconfigure(default_scheduler="")
    try:
        yield det
    finally:
        det.kill_all()
        det.reconfigure(default_scheduler="coscheduler")


def test_the_master_starts_on_the_bundled_charts_configuration(det: DeterminedOnKube) -> None:
    info = det.m.api("GET", "/info")
    assert info["version"] == MASTER_VERSION
    assert det.chart_config["resource_manager"]["default_scheduler"] == "coscheduler"
    changed = {k for k in det.m.config if det.m.config[k] != det.chart_config.get(k)}
    assert changed <= {"port", "root", "db", "cache", "checkpoint_storage", "log", "resource_manager"}, changed
    rm_changed = {k for k, v in det.m.config["resource_manager"].items()
                  if v != det.chart_config["resource_manager"].get(k)}
    assert rm_changed <= {"kubeconfig_path", "determined_master_scheme", "determined_master_host",
                          "determined_master_ip", "determined_master_port"}, rm_changed


def test_two_12_gpu_experiments_on_12_gpus_start_whole_or_not_at_all(clean: DeterminedOnKube,
                                                                     gang_scheduler: object) -> None:
    """The documents' first deadlock: one experiment is bound whole, the other waits whole and is placed whole once
    the first is killed."""
    for _ in range(ROUNDS):
        played = two_12_gpu_experiments(clean, gang=True)
        assert not played.partial and played.placed_after, played.detail


def test_a_16_gpu_experiment_beside_8_gpus_in_use_waits_whole_and_says_why_in_det_trial_logs(
        clean: DeterminedOnKube, gang_scheduler: object) -> None:
    det = clean
    det.nodes(4)
    (small,) = det.submit(8)
    det.plane.wait_for("the 8-GPU experiment bound", lambda: det.bound(small) == (2, 2), timeout=120)
    (big,) = det.submit(16)
    det.plane.wait_for("the 16-GPU experiment's pods", lambda: len(det.trial_pods(big)) == 4, timeout=120)
    det.plane.wait_for("det-k8s's reason on its pods", lambda: any(
        e.get("reason") == "GangWaiting" for e in det.events()), timeout=60)
    assert partial_for(det, [big]) == [] and det.bound(big)[0] == 0
    trial = det.trial_id(big)

    def reason_in_trial_logs() -> str:
        out = det.det("trial", "logs", str(trial), timeout=60)
        return out if "det-k8s: gang" in out else ""

    logs = det.plane.wait_for("det-k8s's reason in det trial logs", reason_in_trial_logs, timeout=90, interval=3)
    assert "waiting for resources" in logs
    det.kill(small)
    det.plane.wait_for("the 16-GPU experiment bound whole", lambda: det.bound(big) == (4, 4), timeout=120)
    det.plane.wait_for("the master reports it running", lambda: det.state(big) == "STATE_RUNNING", timeout=120)


def test_kube_scheduler_alone_starts_experiments_in_part(kube_scheduler_alone: DeterminedOnKube) -> None:
    """What det-k8s prevents, shown on the same master: kube-scheduler binds pod by pod, so the 16-GPU experiment
    beside 8 GPUs in use starts in part (2 of 4 pods) in every round."""
    played = a_16_gpu_experiment_beside_8(kube_scheduler_alone, gang=False)
    assert played.partial, played.detail


def test_the_16_gpu_experiment_beside_8_never_starts_in_part_with_det_k8s(clean: DeterminedOnKube,
                                                                           gang_scheduler: object) -> None:
    for _ in range(ROUNDS):
        played = a_16_gpu_experiment_beside_8(clean, gang=True)
        assert not played.partial and played.placed_after, played.detail


def test_the_master_is_never_refused_by_the_bundled_charts_clusterrole(det: DeterminedOnKube) -> None:
    assert len(det.plane.audit(MASTER_SA)) > 10
    assert det.plane.forbidden(MASTER_SA) == []


def test_a_priority_90_experiment_preempts_a_priority_10_one_whole_and_it_comes_back(clean: DeterminedOnKube,
                                                                                    tmp_path: Path) -> None:
    """On a master of Jobs (0.34+) the label on the victim's pods is not heard: det-k8s's notice is (before 0.34 the
    label is). The victim
    leaves whole without spending a restart (max_restarts 0), the preemptor is bound whole, the victim waits whole,
    QUEUED in `det`, and is placed again whole once the preemptor is killed. Nothing is partial at any moment."""
    det = clean
    det.nodes(4)
    with scheduler_run(det, tmp_path, "--preemption"):
        (low,) = det.submit(16, priority=10)
        det.plane.wait_for("the priority-10 experiment bound", lambda: det.bound(low) == (4, 4), timeout=120)
        (high,) = det.submit(8, priority=90)
        seen: list[tuple[tuple[int, int], tuple[int, int]]] = []

        def preemptor_bound() -> bool:
            seen.append((det.bound(low), det.bound(high)))
            return det.bound(high) == (2, 2)

        det.plane.wait_for("the priority-90 experiment bound whole", preemptor_bound, timeout=180, interval=0.5)
        partial = [s for s in seen if any(0 < bound < total for bound, total in s)]
        assert partial == [], partial
        events = [e for e in det.events() if e.get("reason") == "GangPreempting"]
        told = "told by notice pod" if JOBS else "told by the label determined-preemption"
        assert events and told in events[0]["message"], [e.get("message") for e in events]
        assert "received preemption command" in det.m.log.read_text(errors="replace")
        det.plane.wait_for("the victim waiting whole for room", lambda: det.bound(low) == (0, 4), timeout=120)
        assert det.state(low) == "STATE_QUEUED"
        det.kill(high)
        det.plane.wait_for("the victim placed again whole", lambda: det.bound(low) == (4, 4), timeout=180)
    trial = det.m.api("GET", f"/api/v1/trials/{det.trial_id(low)}")["trial"]
    assert trial["restarts"] == 0, trial
    assert not [p for p in det.pods() if p["spec"].get("schedulerName") == "det-k8s-preemption-notice"]
