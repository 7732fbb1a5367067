"""The kill harness (issue 19): det-k8s stopped by SIGTERM, SIGINT, SIGHUP and SIGKILL at many points.

Each run starts the real entry point (`python -m det_k8s ...`) in its own process against the API emulator in
this process, holds one chosen request (`ApiEmulator.pause`: the entry's write, the Lease, the intent record,
each pod creation or binding, the final write), stops det-k8s while the request is held, then lets the request
through (a write landing after its client gave up) or drops it. Then at most one det-k8s pass (a successor
taking the Lease, in this process), and the invariants:

- no det-k8s group partly started, no master gang partly bound;
- no Lease held beyond its duration (a released one, or one the successor took at once);
- no unfinished intent record left;
- no file under the run's TMPDIR holding the planted secret marker;
- no process left that det-k8s started (found by an environment marker helm passes to its children).

For SIGTERM, SIGINT and SIGHUP also no binding fence (the nodes' det-k8s.io/binding taint) left; after SIGKILL a
fence is removed by the first pass once it is 30 s old (kube/fence.py), which this harness does not wait for.

For SIGTERM, SIGINT and SIGHUP also: the exit code (143, 130, 129), one last line, no traceback, and the Lease
released by the stopped process itself. The default run is modest (every pause point with two signals, 40
runs); DET_K8S_KILL_ROUNDS=N runs every point with every signal N times (60 runs a round), the held request
let through or dropped at random.
`DET_K8S_KILL_REPORT=path` writes the numbers as JSON.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, example
from tests.k8s_emulator import RunningEmulator, node
from tests.master_pods import create_task, master_task

FULL = bool(os.environ.get("DET_K8S_KILL_ROUNDS"))
ROUNDS = int(os.environ.get("DET_K8S_KILL_ROUNDS") or "1")
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL)
CODES = {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGHUP: 129, signal.SIGKILL: -9}
MARKER = "Kill-Harness-Secret-4c1e"
EXP = example("experiments")

# (method, plural, matching requests let through first): where `experiment create` is held and stopped
CREATE_POINTS = [("POST", "configmaps", 0), ("POST", "leases", 0), ("PUT", "configmaps", 0), ("POST", "services", 0),
                 ("POST", "pods", 0), ("POST", "pods", 1), ("POST", "pods", 2), ("PUT", "configmaps", 1),
                 ("PUT", "leases", 1)]
# ... and `scheduler run` binding a 2-pod gang of a Determined 0.38.1 master
BIND_POINTS = [("POST", "leases", 0), ("PATCH", "nodes", 0), ("POST", "pods", 0), ("POST", "pods", 1),
               ("PATCH", "nodes", 2), ("POST", "events", 0)]  # PATCH nodes: the binding fence raised, then lowered


@dataclass
class Tally:
    runs: Counter[str] = field(default_factory=Counter)
    exit_ok: Counter[str] = field(default_factory=Counter)
    partial_after_exit: Counter[str] = field(default_factory=Counter)  # before any successor pass
    lease_held_after_exit: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)  # after the successor: must stay empty
    worst_stop: float = 0.0  # seconds from the signal to det-k8s's exit
    worst_partial: float = 0.0  # seconds from the signal until no partial state remained

    def as_dict(self) -> dict[str, Any]:
        return {"runs": dict(self.runs), "exitCodesAsExpected": dict(self.exit_ok),
                "partialRightAfterExit": dict(self.partial_after_exit),
                "leaseHeldRightAfterExit": dict(self.lease_held_after_exit), "violations": self.violations,
                "worstStopSeconds": round(self.worst_stop, 2), "worstPartialSeconds": round(self.worst_partial, 2)}


TALLY = Tally()


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    path = os.environ.get("DET_K8S_KILL_REPORT")
    if path:
        Path(path).write_text(json.dumps(TALLY.as_dict(), indent=2))


def _env(tmp: Path, kubeconfig: Path, token: str) -> dict[str, str]:
    tmpdir = tmp / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp), "TMPDIR": str(tmpdir), "USER": "tester",
            "HELM_KILL_HARNESS": token, "PYTHONPATH": str(ROOT)}


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "det_k8s", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if f"HELM_KILL_HARNESS={token}".encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def _which(pid: int) -> str:
    """What a process left running is (its command line, parent and state), to tell why from one failed run."""
    try:
        argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        fields = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except OSError:
        return "gone meanwhile"
    return f"{argv[:200]}; state {fields[0]}, parent {fields[1]}"


def _secret_files(where: Path) -> list[str]:
    found = []
    for path in where.rglob("*"):
        try:
            if path.is_file() and MARKER.encode() in path.read_bytes():
                found.append(str(path))
        except OSError:
            continue
    return found


def _lease_held_too_long(emulator: Any, now: datetime.datetime) -> bool:
    lease = emulator.get("leases", "det-k8s-scheduler")
    spec = (lease or {}).get("spec") or {}
    if not spec.get("holderIdentity"):
        return False
    renewed = datetime.datetime.fromisoformat(str(spec["renewTime"]).replace("Z", "+00:00"))
    return now > renewed + datetime.timedelta(seconds=int(spec.get("leaseDurationSeconds") or 30))


def _lease_held(emulator: Any) -> bool:
    lease = emulator.get("leases", "det-k8s-scheduler")
    return bool(((lease or {}).get("spec") or {}).get("holderIdentity"))


def _partial_groups(emulator: Any) -> list[str]:
    """det-k8s groups with some but not all pods, master gangs with some but not all pods bound."""
    sizes: dict[str, int] = {}
    for cm in emulator.items("configmaps"):
        if "entry.json" in (cm.get("data") or {}):
            sizes[json.loads(cm["data"]["entry.json"])["id"]] = len(json.loads(cm["data"]["pods.json"]))
    ours: Counter[str] = Counter()
    gangs: dict[str, list[bool]] = {}
    for pod in emulator.items("pods"):
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        labels = meta.get("labels") or {}
        if labels.get("det-k8s.io/group"):
            ours[labels["det-k8s.io/group"]] += 1
        elif labels.get("determined"):
            gangs.setdefault(labels["determined"], []).append(bool(pod["spec"].get("nodeName")))
    partial = [f"group {g}: {n} of {sizes.get(g, '?')} pods" for g, n in ours.items() if n != sizes.get(g)]
    partial += [f"gang {g}: {sum(b)} of {len(b)} bound" for g, b in gangs.items() if 0 < sum(b) < len(b)]
    return partial


def _fenced(emulator: Any) -> list[str]:
    """Nodes still carrying the binding fence's taint (det-k8s.io/binding)."""
    return [n["metadata"]["name"] for n in emulator.items("nodes")
            if any(t.get("key") == "det-k8s.io/binding" for t in (n.get("spec") or {}).get("taints") or ())]


def _unfinished_intents(emulator: Any) -> list[str]:
    found = []
    for cm in emulator.items("configmaps"):
        status = json.loads((cm.get("data") or {}).get("status.json") or "{}")
        found += [f"{cm['metadata']['name']}: attempt {r['attempt']}" for r in status.get("doomed") or () if r.get("intent")]
    return found


def _successor(kubeconfig: Path, serve: str | None) -> None:
    """One det-k8s pass by another client, as `scheduler run --once` makes it (in this process)."""
    from det_k8s.kube.api import KubeApi
    from det_k8s.kube.scheduler import LiveScheduler
    from det_k8s.scheduling.model import Policy

    api = KubeApi.connect(kubeconfig=str(kubeconfig))
    LiveScheduler(api, api.namespace, Policy(), "successor@harness", lease_wait=0, serve=serve).run_pass()


def _stop_and_check(kind: str, proc: subprocess.Popen[str], sig: int, held: Any, emulator: Any,
                    kubeconfig: Path, env: dict[str, str], serve: str | None, rng: random.Random) -> list[str]:
    """`emulator`: what the cluster holds (the API emulator, or the real API server's facade: get and items)."""
    before = len(TALLY.violations)
    label = f"{kind} {signal.Signals(sig).name}"
    TALLY.runs[label] += 1
    stopped_at = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        TALLY.violations.append(f"{label}: did not exit within 60 s of the signal")
    TALLY.worst_stop = max(TALLY.worst_stop, time.monotonic() - stopped_at)
    where = f"{label} held at {held.method} {held.plural}"
    if proc.returncode == CODES[sig]:
        TALLY.exit_ok[label] += 1
    else:
        TALLY.violations.append(f"{where}: exit {proc.returncode}, expected {CODES[sig]}: {err[-300:]}")
    if sig != signal.SIGKILL:
        last = err.strip().splitlines()[-1] if err.strip() else ""
        if "Traceback" in err or not last.startswith(("stopped by", "interrupted")):
            TALLY.violations.append(f"{where}: last line {last!r}" + (" and a traceback" if "Traceback" in err else ""))
        fenced = _fenced(emulator)
        if fenced and held.plural != "nodes":  # a fence write landing late is the next pass's (kube/fence.py)
            TALLY.violations.append(f"{where}: the stopped process left the binding fence on {', '.join(fenced)}")
        if _lease_held(emulator) and held.plural != "leases":  # a Lease write landing late is the successor's
            TALLY.lease_held_after_exit[label] += 1
            TALLY.violations.append(f"{where}: the stopped process did not release the Lease")
    (held.release if rng.random() < 0.5 else held.drop)()  # the held request lands late, or never
    held.finished.wait(5)
    if _partial_groups(emulator):
        TALLY.partial_after_exit[label] += 1
    _successor(kubeconfig, serve)
    TALLY.worst_partial = max(TALLY.worst_partial, time.monotonic() - stopped_at)
    problems = _partial_groups(emulator) + [f"unfinished intent {i}" for i in _unfinished_intents(emulator)]
    if _lease_held_too_long(emulator, datetime.datetime.now(datetime.UTC)) or _lease_held(emulator):
        problems.append("the Lease is still held after the successor's pass")
    problems += [f"secret in {f}" for f in _secret_files(Path(env["TMPDIR"]))]
    problems += [f"process {pid} left running ({_which(pid)})" for pid in _processes_with(env["HELM_KILL_HARNESS"])]
    TALLY.violations += [f"{where}: {p}" for p in problems]
    return [v for v in TALLY.violations[before:]]


def _cluster(tmp: Path, gpus_per_node: int, nodes: int) -> tuple[RunningEmulator, Path]:
    running = RunningEmulator().start()
    for i in range(nodes):
        running.emulator.put(node(f"gpu-{i}", gpus=gpus_per_node, cpu="31910m", memory="240Gi"))
    return running, running.write_kubeconfig(tmp / "kubeconfig")


def _cases(points: list[tuple[str, str, int]]) -> list[tuple[int, tuple[str, str, int], int]]:
    """By default every point with two of the signals, in turn (each signal at every other point); with
    DET_K8S_KILL_ROUNDS=N, every point with every signal, N times."""
    if FULL:
        return [(r, point, sig) for r in range(ROUNDS) for point in points for sig in SIGNALS]
    return [(0, point, SIGNALS[(i + k) % len(SIGNALS)]) for i, point in enumerate(points) for k in (0, 1)]


@pytest.mark.parametrize(("round_", "point", "sig"), _cases(CREATE_POINTS),
                         ids=lambda v: v.name if isinstance(v, signal.Signals) else str(v))
def test_experiment_create_stopped_anywhere_leaves_all_or_nothing(tmp_path, round_, point, sig):
    rng = random.Random(f"{round_}-{point}-{sig}")
    running, kubeconfig = _cluster(tmp_path, 4, 3)
    try:
        settings = tmp_path / "settings.yaml"
        settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
        method, plural, after = point
        held = running.emulator.pause(method, plural, after=after)
        env = _env(tmp_path, kubeconfig, f"create-{round_}-{after}-{sig}")
        proc = _start(["experiment", "create", str(EXP / "distributed-12gpu-a.yaml"), "-f", str(settings)], env)
        if not held.reached.wait(60):
            proc.kill()
            pytest.fail(f"experiment create never sent {method} {plural} #{after + 1}: {proc.communicate()[1]}")
        problems = _stop_and_check("experiment create", proc, sig, held, running.emulator, kubeconfig, env, None,
                                   rng)
    finally:
        running.stop()
    assert not problems


@pytest.mark.parametrize(("round_", "point", "sig"), _cases(BIND_POINTS),
                         ids=lambda v: v.name if isinstance(v, signal.Signals) else str(v))
def test_scheduler_run_stopped_mid_binding_leaves_no_gang_partly_bound(tmp_path, round_, point, sig):
    rng = random.Random(f"{round_}-{point}-{sig}")
    running, kubeconfig = _cluster(tmp_path, 4, 2)
    try:
        from det_k8s.kube.api import KubeApi

        create_task(KubeApi.connect(kubeconfig=str(kubeconfig)), master_task("0.38.1", experiment=1, slots_per_trial=8))
        method, plural, after = point
        held = running.emulator.pause(method, plural, after=after)
        env = _env(tmp_path, kubeconfig, f"bind-{round_}-{after}-{sig}")
        loop = rng.random() < 0.5  # the loop (watch, lease renewals) or one pass
        proc = _start(["scheduler", "run", *(["--interval", "3600"] if loop else ["--once"])], env)
        if not held.reached.wait(60):
            proc.kill()
            pytest.fail(f"scheduler run never sent {method} {plural} #{after + 1}: {proc.communicate()[1]}")
        problems = _stop_and_check("scheduler run", proc, sig, held, running.emulator, kubeconfig, env, "coscheduler",
                                   rng)
    finally:
        running.stop()
    assert not problems


FAKE_HELM = """#!/bin/sh
if [ "$1" = version ]; then echo "v3.17.3+ge4da497"; exit 0; fi
touch "{started}"
sleep 120 &
sleep 120
"""


@pytest.mark.parametrize(("round_", "command", "sig"),
                         [(r, c, s) for r in range(ROUNDS) for c in ("install", "upgrade") for s in SIGNALS
                          if FULL or c == "install" or s == signal.SIGTERM],
                         ids=lambda v: v.name if isinstance(v, signal.Signals) else str(v))
@pytest.mark.parametrize("twice", [False, True], ids=["once", "twice"])
def test_install_stopped_while_helm_runs_leaves_no_secret_and_no_helm(tmp_path, round_, command, sig, twice):
    """`install --dry-run` (helm template) with a helm that never finishes: stopped while it runs (by one
    signal, or by two in a row)."""
    fake = tmp_path / "bin" / "helm"
    fake.parent.mkdir()
    started = tmp_path / "helm-started"
    fake.write_text(FAKE_HELM.format(started=started))
    fake.chmod(0o755)
    env = _env(tmp_path, tmp_path / "no-kubeconfig", f"helm-{round_}-{command}-{sig}-{twice}")
    label = f"{command} --dry-run {signal.Signals(sig).name}" + (" twice" if twice else "")
    TALLY.runs[label] += 1
    proc = _start([command, "demo", "-f", str(example("gpu-cluster.yaml")), "--set", f"db.password={MARKER}",
                   "--dry-run", "--helm-binary", str(fake)], env)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[1]
        time.sleep(0.02)
    staged = _secret_files(Path(env["TMPDIR"]))
    assert staged, "the chart with the secret is staged for helm while it runs"
    stopped_at = time.monotonic()
    proc.send_signal(sig)
    if twice and sig != signal.SIGKILL:  # a second signal cuts the grace short: the secrets still go
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT if sig != signal.SIGINT else signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    TALLY.worst_stop = max(TALLY.worst_stop, time.monotonic() - stopped_at)
    problems = []
    if proc.returncode != CODES[sig]:
        problems.append(f"exit {proc.returncode}: {err[-300:]}")
    else:
        TALLY.exit_ok[label] += 1
    if sig != signal.SIGKILL and ("Traceback" in err or not err.strip().splitlines()[-1].startswith(
            ("stopped by", "interrupted"))):
        problems.append(f"last lines {err[-300:]!r}")
    if sig == signal.SIGKILL:  # nothing runs in a process killed outright: the next det-k8s removes its directory
        time.sleep(0.5)  # helm got SIGTERM from the kernel (PR_SET_PDEATHSIG)
        successor = subprocess.run([sys.executable, "-m", "det_k8s", "render", "-f", str(example("gpu-cluster.yaml")),
                                    "-o", str(tmp_path / "rendered")], env=env, capture_output=True, text=True,
                                   timeout=120, cwd=ROOT)
        assert successor.returncode == 0, successor.stderr
    problems += [f"secret in {f}" for f in _secret_files(Path(env["TMPDIR"]))]
    deadline = time.monotonic() + 5  # a helm that got SIGTERM from the kernel is given a moment to end
    while _processes_with(env["HELM_KILL_HARNESS"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _processes_with(env["HELM_KILL_HARNESS"])
    for pid in left:  # the test's own cleanup: never leave them
        os.kill(pid, signal.SIGKILL)
    problems += [f"process {pid} left running" for pid in left]
    TALLY.violations += [f"{label}: {p}" for p in problems]
    assert not problems


# -- the same harness on the real API server ---------------------------------------------------------------------
# The real kube-apiserver cannot hold a request on demand: det-k8s talks to it through tests/realkube/holdproxy.py,
# which forwards every request and holds the chosen one. The real controllers (the Job controller's pods, garbage
# collection), kube-scheduler (it binds det-k8s's own pinned pods) and kwok act meanwhile. Every point with one
# signal (in turn) by default; DET_K8S_KILL_ROUNDS=N: every signal, N times.


def _real_cases(points: list[tuple[str, str, int]]) -> list[tuple[int, tuple[str, str, int], int]]:
    if FULL:
        return [(r, point, sig) for r in range(ROUNDS) for point in points for sig in SIGNALS]
    return [(0, point, SIGNALS[i % len(SIGNALS)]) for i, point in enumerate(points)]


def _on_real(real_cluster: Any, tmp: Path, nodes: int) -> tuple[Any, Path]:
    from tests.realkube.holdproxy import HoldProxy

    for i in range(nodes):
        real_cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    real_cluster.api.remove("leases", "det-k8s-scheduler")  # an earlier test's: the points include its creation
    proxy = HoldProxy(real_cluster.plane.server, real_cluster.plane.pki.ca_cert)
    return proxy, proxy.kubeconfig(tmp / "proxied-kubeconfig", real_cluster.plane.admin_token)


def _settle_real(real_cluster: Any, what: str) -> None:
    """The real cluster finishes what the successor started (deleted pods go, bound pods run) before counting."""
    def settled() -> bool:
        return not any(p["metadata"].get("deletionTimestamp") for p in real_cluster.api.items("pods", "default"))

    real_cluster.wait_for(what, settled, timeout=120)


def _stop_on_real(real_cluster: Any, proxy: Any, proxied: Path, tmp: Path, kind: str, args: list[str],
                  point: tuple[str, str, int], sig: int, serve: str | None, rng: random.Random) -> list[str]:
    """Run `args` through the proxy, stop it while `point` is held, check, and check again once the real cluster
    has finished the successor's deletions."""
    method, plural, after = point
    held = proxy.hold(method, plural, after=after)
    env = _env(tmp, proxied, f"real-{kind}-{after}-{sig}-{rng.random()}")
    proc = _start(args, env)
    if not held.reached.wait(120):
        proc.kill()
        pytest.fail(f"{kind} never sent {method} {plural} #{after + 1}: {proc.communicate()[1]}")
    problems = _stop_and_check(f"{kind} (real)", proc, sig, held, real_cluster.api, real_cluster.kubeconfig, env,
                               serve, rng)
    _settle_real(real_cluster, "the successor's deletions to finish")
    return problems + [f"after the cluster settled: {p}" for p in _partial_groups(real_cluster.api)]


@pytest.mark.real
@pytest.mark.parametrize(("round_", "point", "sig"), _real_cases(CREATE_POINTS),
                         ids=lambda v: v.name if isinstance(v, signal.Signals) else str(v))
def test_experiment_create_stopped_anywhere_on_the_real_api_server(real_cluster, tmp_path, round_, point, sig):
    rng = random.Random(f"real-{round_}-{point}-{sig}")
    proxy, proxied = _on_real(real_cluster, tmp_path, 3)
    try:
        settings = tmp_path / "settings.yaml"
        settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
        problems = _stop_on_real(real_cluster, proxy, proxied, tmp_path, "experiment create",
                                 ["experiment", "create", str(EXP / "distributed-12gpu-a.yaml"), "-f", str(settings)],
                                 point, sig, None, rng)
    finally:
        proxy.close()
    assert not problems, real_cluster.describe("default")


@pytest.mark.real
@pytest.mark.parametrize(("round_", "point", "sig"), _real_cases(BIND_POINTS),
                         ids=lambda v: v.name if isinstance(v, signal.Signals) else str(v))
def test_scheduler_run_stopped_mid_binding_on_the_real_api_server(real_cluster, tmp_path, round_, point, sig):
    rng = random.Random(f"real-{round_}-{point}-{sig}")
    proxy, proxied = _on_real(real_cluster, tmp_path, 2)
    try:
        create_task(real_cluster.connect("default"), master_task("0.38.1", experiment=1, slots_per_trial=8),
                    job_controller=True)  # the real Job controller makes the two pods
        loop = rng.random() < 0.5
        problems = _stop_on_real(real_cluster, proxy, proxied, tmp_path, "scheduler run",
                                 ["scheduler", "run", *(["--interval", "3600"] if loop else ["--once"])],
                                 point, sig, "coscheduler", rng)
    finally:
        proxy.close()
    assert not problems, real_cluster.describe("default")
