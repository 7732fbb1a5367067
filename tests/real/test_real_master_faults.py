"""Faults and team queues with the real Determined master (built from its source in ../shared), outside the cluster on
the real control plane, its experiments submitted with the real `det` CLI, gang-scheduled by `det-k8s scheduler run`
as the ServiceAccount it ships (tests/support/realkube/scheduler_run.py; the fixtures are in tests/real/conftest.py).

- det-k8s SIGKILLed mid-binding: it talks to the API server through a proxy that holds one binding of a gang
  (tests/support/realkube/holdproxy.py), so the kill lands while the gang is bound in part, every time. The held binding is
  then dropped (never lands) or released (lands after the kill). A new `scheduler run` follows.
- The master restarted while det-k8s holds a gang waiting whole.
- Team queues on the labels the master puts on its pods: `determined.ai/workspace`, `determined.ai/user`,
  `determined.ai/resource_pool`.

After each fault: no gang with some, not all, of its pods bound; no node holding more GPUs than it has; the master
reports RUNNING every experiment whose pods are all bound.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from det_k8s.labels import LAST_PASS, SERVED_BY
from tests.support.realkube.determined import PASSWORD, SYSTEM_NS, DeterminedOnKube, _experiment_id
from tests.support.realkube.holdproxy import HoldProxy
from tests.support.realkube.scheduler_run import scheduler_run

pytestmark = pytest.mark.real

GPUS_PER_NODE = 4
GPU = "nvidia.com/gpu"
REPO = Path(__file__).resolve().parents[2]


# -- what the cluster holds ------------------------------------------------------------------------------------------


def gangs(det: DeterminedOnKube) -> dict[str, tuple[int, int]]:
    """Per allocation (the master's gang: its `determined` label), (live pods bound, live pods)."""
    found: dict[str, list[int]] = {}
    for pod in det.pods():
        meta = pod["metadata"]
        allocation = (meta.get("labels") or {}).get("determined")
        if not allocation or meta.get("deletionTimestamp"):
            continue
        counts = found.setdefault(allocation, [0, 0])
        counts[0] += bool(pod["spec"].get("nodeName"))
        counts[1] += 1
    return {a: (b, n) for a, (b, n) in found.items()}


def partial(det: DeterminedOnKube) -> dict[str, tuple[int, int]]:
    return {a: c for a, c in gangs(det).items() if 0 < c[0] < c[1]}


def overcommitted(det: DeterminedOnKube) -> dict[str, int]:
    """Nodes whose bound pods (deleting ones too: they hold their GPUs until gone) ask for more GPUs than it has."""
    used: dict[str, int] = {}
    for pod in det.pods():
        node = pod["spec"].get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, 0) + sum(
                int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0)) for c in pod["spec"]["containers"])
    return {node: gpus for node, gpus in used.items() if gpus > GPUS_PER_NODE}


def fenced(det: DeterminedOnKube) -> list[str]:
    """Nodes still carrying det-k8s's binding fence (the det-k8s.io/binding taint)."""
    return [n["metadata"]["name"] for n in det.plane.request("GET", "/api/v1/nodes")[1]["items"]
            if any(t.get("key") == "det-k8s.io/binding" for t in n["spec"].get("taints") or ())]


def served_by(det: DeterminedOnKube) -> tuple[str, str]:
    """(who served the last pass, when it ended) from the scheduling Lease."""
    status, lease = det.plane.request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/det-k8s-scheduler")
    notes = (lease.get("metadata") or {}).get("annotations") or {} if status == 200 else {}
    return str(notes.get(SERVED_BY, "")), str(notes.get(LAST_PASS, ""))


def whole_and_running(det: DeterminedOnKube, experiments: Iterable[int], slots: dict[int, int]) -> bool:
    return all(det.bound(e) == (slots[e] // GPUS_PER_NODE,) * 2 and det.state(e) == "STATE_RUNNING"
               for e in experiments)


def agrees(det: DeterminedOnKube, experiments: Iterable[int]) -> list[str]:
    """The master's view against the cluster's: an experiment all of whose pods are bound is RUNNING; one with none
    bound is not."""
    wrong = []
    for e in experiments:
        bound, total = det.bound(e)
        state = det.state(e)
        if total and bound == total and state != "STATE_RUNNING":
            wrong.append(f"experiment {e}: all {total} pods bound, the master says {state}")
        if total and bound == 0 and state == "STATE_RUNNING":
            wrong.append(f"experiment {e}: no pod bound, the master says RUNNING")
    return wrong


class Watcher:
    """Samples the cluster every 0.3 s in a thread: the partial gangs and over-committed nodes it ever saw."""

    def __init__(self, det: DeterminedOnKube) -> None:
        self.det, self.samples = det, 0
        self.partial: list[tuple[float, dict[str, tuple[int, int]]]] = []  # (time.monotonic(), the partial gangs)
        self.overcommitted: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                at = time.monotonic()
                if found := partial(self.det):
                    self.partial.append((at, found))
                if found := overcommitted(self.det):
                    self.overcommitted.append(found)
                self.samples += 1
            except (AssertionError, OSError, KeyError):
                pass
            self._stop.wait(0.3)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


# -- 1. det-k8s SIGKILLed mid-binding ----------------------------------------------------------------------------------

# (experiments' GPUs, bindings let through before the held one, what happens to the held one after the kill)
# The dropped round goes last: it waits long enough for the trial's restart that the killed schedulers' binding fences
# are STALE by then, and checks that they are swept.
KILL_ROUNDS = [((8, 8), 0, "released"), ((16,), 1, "dropped")]


def test_det_k8s_sigkilled_mid_binding_leaves_nothing_partial_after_the_next_pass(clean: DeterminedOnKube,
                                                                                  tmp_path: Path) -> None:
    """Each round: `scheduler run` binds through a proxy holding one binding of a gang; the scheduler's process group
    is SIGKILLed while it is held (the gang bound in part: the bindings let through landed, the held one not yet).
    The held binding is dropped (never lands) or released (lands after the kill). A new `scheduler run`: once its
    first pass has ended no gang is partial (a partly bound gang's pods are deleted, and the master, max_restarts 2,
    starts the trial again whole), no node ever holds more than its 4 GPUs, and every experiment ends bound whole
    and RUNNING in the master."""
    det = clean
    det.nodes(4)
    proxy = HoldProxy(det.plane.server, det.plane.pki.ca_cert)
    report: list[str] = []
    kills: list[dict[str, tuple[int, int]]] = []
    try:
        for r, (slots, after, fate) in enumerate(KILL_ROUNDS):
            line, at_kill = _kill_round(det, proxy, tmp_path / f"round-{r}", slots, after, fate)
            report.append(f"round {r}: {line}")
            print(report[-1])
            kills.append(at_kill)
            det.kill_all()
    finally:
        proxy.close()
    # the kill did land mid-binding: with the held binding never landing, a gang was bound in part
    assert any(0 < b < n for b, n in kills[-1].values()), report


def _kill_round(det: DeterminedOnKube, proxy: HoldProxy, work: Path, slots: tuple[int, ...], after: int, fate: str
                ) -> tuple[str, dict[str, tuple[int, int]]]:
    held = proxy.hold("POST", "pods", after=after)  # POST .../pods/NAME/binding (nothing else POSTs pods here)
    with Watcher(det) as watch:
        with scheduler_run(det, work / "killed", proxy=proxy) as proc:
            experiments = det.submit(*slots, extra={"max_restarts": 2})
            assert held.reached.wait(120), (work / "killed" / "scheduler.log").read_text()[-3000:]
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        size = dict(zip(experiments, slots, strict=True))
        time.sleep(1)  # what the proxy let through before the kill lands
        at_kill = gangs(det)
        (held.drop if fate == "dropped" else held.release)()
        assert held.finished.wait(30)
        time.sleep(1)
        after_held = gangs(det)
        before = served_by(det)[0]
        t0 = time.monotonic()
        with scheduler_run(det, work / "next"):
            det.plane.wait_for("the new scheduler's first pass", lambda: served_by(det)[0] not in ("", before),
                               timeout=120, interval=0.2)
            passed_at = time.monotonic()
            after_pass = partial(det)
            assert after_pass == {}, (at_kill, after_held, after_pass)
            det.plane.wait_for("every experiment bound whole and RUNNING",
                               lambda: whole_and_running(det, experiments, size), timeout=180, interval=1)
            settled = time.monotonic() - t0
            assert partial(det) == {} and overcommitted(det) == {}
            assert agrees(det, experiments) == []
            if fate == "dropped":  # the killed schedulers' binding fences (their taints) are swept once STALE
                det.plane.wait_for("no binding fence left on a node", lambda: not fenced(det), timeout=60,
                                   interval=0.5)
            unfenced = time.monotonic() - t0
            restarts = [det.m.api("GET", f"/api/v1/trials/{det.trial_id(e)}")["trial"]["restarts"]
                        for e in experiments]
    done = "no binding fence after" if fate == "dropped" else "done after"
    late = [found for at, found in watch.partial if at > passed_at]  # sampled after the first pass: none
    assert watch.overcommitted == [], watch.overcommitted
    assert late == [], late
    return (f"{slots} GPUs, binding #{after + 1} held then {fate}; gangs at the kill {sorted(at_kill.values())}, "
            f"after the held binding {sorted(after_held.values())}; first pass {passed_at - t0:.1f} s after the "
            f"restart, whole and RUNNING after {settled:.1f} s, {done} {unfenced:.1f} s, trial restarts "
            f"{restarts}; {len(watch.partial)} of "
            f"{watch.samples} samples partial, all before the first pass"), at_kill


# -- 2. the master restarted while det-k8s holds a gang waiting whole --------------------------------------------------


def test_the_master_restarted_while_a_gang_waits_whole_keeps_it_whole(clean: DeterminedOnKube,
                                                                      tmp_path: Path) -> None:
    """A 16-GPU experiment waits whole beside an 8-GPU one in use (16 GPUs); the master is stopped and started
    again. Through the restart and after it no gang is partial and no node over-committed; the 8-GPU one is still
    bound and RUNNING, the 16-GPU one still waits whole (none of its pods bound, not RUNNING), and is bound whole and
    RUNNING once the 8-GPU one is killed. det-k8s keeps running through it."""
    det = clean
    det.nodes(4)
    with scheduler_run(det, tmp_path) as proc:
        (small,) = det.submit(8)
        det.plane.wait_for("the 8-GPU experiment bound and RUNNING", lambda: det.bound(small) == (2, 2)
                           and det.state(small) == "STATE_RUNNING", timeout=120, interval=0.5)
        (big,) = det.submit(16)

        def waiting_whole() -> bool:
            names = {p["metadata"]["name"] for p in det.trial_pods(big)}
            return det.bound(big) == (0, 4) and any(
                e.get("reason") == "GangWaiting" and e["involvedObject"]["name"] in names for e in det.events())

        det.plane.wait_for("the 16-GPU experiment waiting whole", waiting_whole, timeout=120, interval=0.5)
        before = det.state(big)
        with Watcher(det) as watch:
            t0 = time.monotonic()
            det.m.restart()
            restarted = time.monotonic() - t0
            det.plane.wait_for("the master's view back", lambda: det.state(small) == "STATE_RUNNING", timeout=60,
                               interval=0.5)
            # a few passes after the restart: the big one still waits whole, the small one still holds its GPUs
            det.plane.wait_for("the 16-GPU experiment's pods", lambda: len(det.trial_pods(big)) == 4, timeout=120,
                               interval=0.5)
            time.sleep(6)
            after = (det.bound(small), det.bound(big), det.state(small), det.state(big))
            assert after[:3] == ((2, 2), (0, 4), "STATE_RUNNING") and after[3] != "STATE_RUNNING", after
            assert proc.poll() is None, "det-k8s stopped when the master restarted"
            det.kill(small)
            t1 = time.monotonic()
            det.plane.wait_for("the 16-GPU experiment bound whole and RUNNING", lambda: det.bound(big) == (4, 4)
                               and det.state(big) == "STATE_RUNNING", timeout=180, interval=0.5)
            placed = time.monotonic() - t1
        assert watch.partial == [] and watch.overcommitted == [], (watch.partial, watch.overcommitted)
        assert agrees(det, [big]) == []
    print(f"master restarted in {restarted:.1f} s; the 16-GPU experiment {before} before, {after[3]} after, waiting "
          f"whole; bound whole and RUNNING {placed:.1f} s after the 8-GPU one was killed; {watch.samples} samples, "
          "none partial")


# -- 3. team queues on the master's real labels ------------------------------------------------------------------------

VERA = "vera"
QUEUES = {"version": 1, "defaultQueue": "others", "queues": [
    {"name": "nlp", "guarantee": {GPU: 8}, "members": {"workspaces": ["nlp"]}},  # determined.ai/workspace
    {"name": "vision", "guarantee": {GPU: 8}, "members": {"users": [VERA]}},  # determined.ai/user
    {"name": "pool", "limit": {GPU: 4}, "members": {"resourcePools": ["default"]}},  # determined.ai/resource_pool
    {"name": "others"}]}


def det_k8s(det: DeterminedOnKube, *args: str) -> str:
    """det-k8s as the cluster's admin, in the master's namespace."""
    env = {**os.environ, "KUBECONFIG": str(det.plane.admin_kubeconfig), "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "det_k8s", *args, "-n", SYSTEM_NS], env=env, capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def queue_rows(det: DeterminedOnKube) -> dict[str, dict[str, Any]]:
    import re

    rows = {}
    for row in json.loads(det_k8s(det, "queues", "-o", "json"))["queues"]:
        row["running_exps"] = sorted(int(m.group(1)) for g in row["running"]
                                     if (m := re.search(r"exp-(\d+)-trial", g)))
        rows[row["name"]] = row
    return rows


def submit_as(det: DeterminedOnKube, monkeypatch: pytest.MonkeyPatch, users: Iterable[tuple[str, int]]) -> list[int]:
    """One experiment per (Determined user, GPUs), submitted at once by `det experiment create` as that user."""
    env = det.det_env
    procs = []
    for user, slots in users:
        with monkeypatch.context() as m:
            m.setattr(det, "det_env", lambda user=user: {**env(), "DET_USER": user, "DET_PASS": PASSWORD})
            procs.append(det.create(f"{user}-{slots}gpu-{len(procs)}", slots))
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-2000:] + err[-2000:]
        ids.append(_experiment_id(out))
    return ids


def waits_for(det: DeterminedOnKube, experiment: int, text: str, reason: str = "GangWaiting") -> str:
    """det-k8s's event on the experiment's pods saying why it waits (`reason`), holding `text`."""
    names = {p["metadata"]["name"] for p in det.trial_pods(experiment)}
    return next((e["message"] for e in det.events() if e.get("reason") == reason
                 and e["involvedObject"]["name"] in names and text in e["message"]), "")


def test_team_queues_on_the_masters_workspace_user_and_pool_labels(clean: DeterminedOnKube, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Queues whose members are a Determined workspace (nlp), a user (vera) and a resource pool (default), read from
    the labels the master puts on its pods. Membership: `det-k8s queues` puts each experiment in its queue. Limit:
    admin's 8-GPU experiment in the pool queue (limit 4) waits whole, its reason naming the queue. Reclaim: vera's
    two 8-GPU experiments take all 16 GPUs (8 borrowed from nlp's guarantee); an 8-GPU experiment in workspace nlp
    takes its guarantee back: one of vera's is preempted whole (through det-k8s's notice), nlp's is bound whole."""
    det = clean
    det.nodes(4)
    if not any(u["username"] == VERA for u in det.m.api("GET", "/api/v1/users")["users"]):
        det.m.api("POST", "/api/v1/users", {"user": {"username": VERA, "active": True, "admin": False},
                                            "password": PASSWORD})
    workspace = det.m.api("POST", "/api/v1/workspaces", {"name": "nlp"})["workspace"]
    det.m.api("POST", f"/api/v1/workspaces/{workspace['id']}/projects",
              {"name": "research", "workspaceId": workspace["id"]})
    queues = tmp_path / "queues.json"
    queues.write_text(json.dumps(QUEUES))
    det_k8s(det, "scheduler", "policy", "--queues", str(queues))
    try:
        with scheduler_run(det, tmp_path, "--preemption"):
            # admin's in workspace Uncategorized, pool default: queue pool; vera's in Uncategorized: queue vision
            capped, *vera = submit_as(det, monkeypatch, [("admin", 8), (VERA, 8), (VERA, 8)])
            det.plane.wait_for("vera's experiments bound whole", lambda: all(det.bound(e) == (2, 2) for e in vera),
                               timeout=120, interval=0.5)
            limit = det.plane.wait_for("the capped experiment's reason", lambda: waits_for(
                det, capped, "queue pool: 0 of 4 GPUs (its limit), the group needs 8"), timeout=60, interval=1)
            assert det.bound(capped) == (0, 2)
            rows = queue_rows(det)
            assert rows["vision"]["running_exps"] == sorted(vera), rows
            assert rows["vision"]["used"] == {GPU: "16"} and rows["vision"]["borrowed"] == {GPU: "8"}, rows
            assert rows["pool"]["waiting"] and rows["pool"]["running"] == [], rows
            (nlp,) = det.submit(8, extra={"workspace": "nlp", "project": "research"})  # admin, workspace nlp
            reclaim = det.plane.wait_for("nlp's experiment reclaiming", lambda: waits_for(
                det, nlp, "waiting to reclaim 8 GPUs lent to vision", "GangPreempting"), timeout=120, interval=0.5)
            seen: list[tuple[tuple[int, int], ...]] = []

            def reclaimed() -> bool:
                seen.append(tuple(det.bound(e) for e in (nlp, *vera)))
                return seen[-1][0] == (2, 2)

            det.plane.wait_for("nlp's experiment bound whole", reclaimed, timeout=180, interval=0.5)
            assert not [s for s in seen if any(0 < b < n for b, n in s)], seen
            det.plane.wait_for("one of vera's preempted whole, the other still bound", lambda: sorted(
                det.bound(e) for e in vera) == [(0, 2), (2, 2)], timeout=120, interval=0.5)
            victim = next(e for e in vera if det.bound(e) == (0, 2))
            det.plane.wait_for("the master's view", lambda: det.state(nlp) == "STATE_RUNNING" and det.state(
                victim) == "STATE_QUEUED", timeout=120, interval=0.5)
            assert det.bound(capped) == (0, 2) and overcommitted(det) == {}
            rows = queue_rows(det)
            assert rows["nlp"]["running_exps"] == [nlp] and rows["nlp"]["used"] == {GPU: "8"}, rows
            assert rows["vision"]["running_exps"] == [e for e in vera if e != victim], rows
            assert rows["vision"]["borrowed"] == {}, rows
            labels = {e: tuple(det.trial_pods(e)[0]["metadata"]["labels"].get(f"determined.ai/{k}") for k in (
                "workspace", "user", "resource_pool")) for e in (capped, nlp, *vera)}
            assert labels[nlp][0] == "nlp" and {labels[e][1] for e in vera} == {VERA}, labels
    finally:
        det_k8s(det, "scheduler", "policy", "--no-queues")
    print(f"membership (experiment: workspace, user, resource pool labels): {labels}; "
          f"limit: {limit!r}; reclaim: {reclaim!r};\n"
          f"reclaim: {len(seen)} samples of (nlp, vera, vera) bound, none partial; victim {victim}")


# -- 4. det-k8s SIGKILLed in the middle of a preemption ------------------------------------------------------------------

def marked(det: DeterminedOnKube) -> bool:
    """det-k8s has begun a preemption: its notice is out (created first) and a victim pod's Preempted event says so
    (the notice itself lives only until the master deletes the victim's Job)."""
    return any(e.get("reason") == "Preempted" for e in det.events())


def test_det_k8s_sigkilled_mid_preemption_leaves_nothing_partial_after_the_next_pass(clean: DeterminedOnKube,
                                                                                     tmp_path: Path) -> None:
    """A priority-10 experiment holds all 16 GPUs; a priority-90 one of 8 arrives; `scheduler run --preemption` is
    SIGKILLed the moment its first victim pod is marked (the notice out, the other labels on their way). A new
    `scheduler run --preemption` ends it: the preemptor bound whole and RUNNING, the victim whole (waiting, QUEUED,
    no restart spent), no gang partial at any sample after its first pass, no node over-committed."""
    det = clean
    det.nodes(4)
    work = tmp_path
    with Watcher(det) as watch:
        with scheduler_run(det, work / "first", "--preemption") as proc:
            (low,) = det.submit(16, priority=10)
            det.plane.wait_for("the priority-10 experiment bound", lambda: det.bound(low) == (4, 4), timeout=120,
                               interval=0.3)
            (high,) = det.submit(8, priority=90)
            det.plane.wait_for("the first victim pod marked", lambda: marked(det), timeout=120, interval=0.05)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        labelled = sum(1 for p in det.trial_pods(low) if "determined-preemption" in p["metadata"]["labels"])
        before = served_by(det)[0]
        t0 = time.monotonic()
        with scheduler_run(det, work / "next", "--preemption"):
            det.plane.wait_for("the new scheduler's first pass", lambda: served_by(det)[0] not in ("", before),
                               timeout=120, interval=0.2)
            passed_at = time.monotonic()
            det.plane.wait_for("the preemptor bound whole and RUNNING", lambda: det.bound(high) == (2, 2)
                               and det.state(high) == "STATE_RUNNING", timeout=180, interval=0.5)
            det.plane.wait_for("the victim waiting whole", lambda: det.bound(low) == (0, 4), timeout=120,
                               interval=0.5)
            took = time.monotonic() - t0
            assert det.state(low) == "STATE_QUEUED", det.state(low)
            assert agrees(det, [low, high]) == []
            restarts = det.m.api("GET", f"/api/v1/trials/{det.trial_id(low)}")["trial"]["restarts"]
    late = [found for at, found in watch.partial if at > passed_at]
    assert late == [] and watch.overcommitted == [], (late, watch.overcommitted)
    assert restarts == 0
    print(f"killed with {labelled} of 4 victim pods labelled: preemptor whole and RUNNING, victim "
          f"whole and QUEUED {took:.1f} s after the restart; {len(watch.partial)} of {watch.samples} samples "
          "partial, none after the first pass")
