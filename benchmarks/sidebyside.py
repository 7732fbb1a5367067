"""Three schedulers side by side on one real control plane: det-k8s binding the master's gangs, kube-scheduler placing
ordinary pods, and the coscheduling plugin of sigs.k8s.io/scheduler-plugins gang-scheduling the same groups.

    python -m benchmarks.sidebyside [--nodes 5000] [--groups 7500] [--peer-groups N] [--pods-per-group 4]
                                    [--paced-groups 300] [--rate 4]
                                    [--schedulers det-k8s,kube-scheduler-tuned,coscheduling-tuned,...]
                                    [--workers 16] [--node-lease 1200] [--output FILE] [--markdown FILE]
                                    [--latencies FILE]

One control plane (tests/support/realkube: etcd, kube-apiserver, kube-controller-manager and kwok, the versions
tests/support/realkube/components.py pins), N kwok nodes of 8 GPUs. Each scheduler gets its turn alone, in its own
namespace, with the same pods in number and shape (G groups of P pods, each pod 1 GPU) in two stages. The peers run
twice: tuned (their client rate limit lifted, as large clusters and the Kubernetes project's scheduler_perf run them)
and with their defaults (as a fresh install runs them); every ratio is against the tuned peer first.

- paced: the scheduler runs; groups arrive at --rate groups a second, each group's pods created back to back. The
  time from a group's last pod appearing to its last binding (p50, p99), both seen by this script's own watch of the
  namespace (the same watch for every scheduler, so its delay cancels out), and partial groups (some pods bound,
  some not, once it has settled).
- backlog: the scheduler is stopped; all G groups are created; the scheduler starts; pods bound per second sustained
  (bound pods / the time from the first binding to the last).

Over both stages: the API requests the scheduler made (from the API server's audit log: each scheduler authenticates
as a user of its own) per bound group, the API server's CPU seconds (from /proc of its PID), and the scheduler
process's peak memory (VmHWM). Between stages and schedulers the pods are deleted.

At scale (5,000 nodes) kwok's default node heartbeats (a status patch per node every 20-45 s, watched by every
scheduler) would keep a small API server busy on their own: the nodes here renew a node Lease instead, as kubelets do
(--node-lease seconds, renewed every quarter of it), with kwok's lease-era status heartbeat (every 10-20 min), and
kube-controller-manager's node grace period follows; its client may send 300 requests/s (20 by default, which lifts
the new nodes' not-ready taints at ~5 nodes/s). Progress is printed to stderr at least every --progress seconds.

The pods: det-k8s binds pods as Determined 0.38 makes them (tests/support/master_pods.py: the Job's pod template with
schedulerName coscheduler and the gang labels, as the Job controller creates it; without the PriorityClass and the
Job itself, so the Job controller's pace is not in the figures); kube-scheduler places ordinary pods of 1 GPU (no
gang: its figure per "group" is for P pods created back to back); coscheduling places pods labelled
scheduling.x-k8s.io/pod-group with a PodGroup (minMember P) each, as the plugin's documentation shows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.realkube.cluster import Child, ControlPlane, Options, fake_node, free_port, write_kubeconfig
from tests.support.realkube.components import (
    SCHEDULER_PLUGINS_VERSION,
    STAGES_FILE,
    BuildError,
    build_all,
    build_coscheduling,
)

ROOT = Path(__file__).resolve().parent.parent
# Each peer runs twice: as a fresh install runs it, and tuned as operators of large clusters run it. The "-tuned"
# runs lift the peer's client rate limit (a scheduler's default is 50 requests/s, burst 100, and every binding is one
# request) to what the Kubernetes project's own scheduler benchmark gives its scheduler (scheduler_perf's util.go
# mustSetupCluster: QPS 5000, burst 5000, at v1.37.2): far above what a scheduler sends here, so its client no longer
# paces it. The results show each run's client-side throttling lines, 429s and the scheduler's own CPU.
SCHEDULERS = ("det-k8s", "kube-scheduler-tuned", "coscheduling-tuned", "kube-scheduler", "coscheduling")
TUNED_QPS, TUNED_BURST = 5000, 5000
COSCHED_NAME = "scheduler-plugins-scheduler"  # the profile name the plugin's documentation uses
GPUS_PER_NODE = 8
USERS = {"det-k8s": "bench-det-k8s", "kube-scheduler": "system:kube-scheduler", "coscheduling": "bench-coscheduling"}


def peer(which: str) -> tuple[str, bool]:
    """("kube-scheduler", True) for "kube-scheduler-tuned": the scheduler and whether its client limit is lifted."""
    return which.removesuffix("-tuned"), which.endswith("-tuned")
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups"


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Progress:
    """What the run is doing, printed every `every` seconds by a thread of its own (a long stage says how far it is)."""

    def __init__(self, say_: Callable[[str], None], every: float) -> None:
        self.say, self.every = say_, every
        self.started = time.monotonic()
        self.stage = "starting"
        self.counter: Callable[[], str] | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="bench-progress")

    def set(self, stage: str, counter: Callable[[], str] | None = None) -> None:
        self.stage, self.counter = stage, counter

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            extra = ""
            if self.counter is not None:
                with contextlib.suppress(Exception):  # a progress line never stops the run
                    extra = f": {self.counter()}"
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            self.say(f"  [{(time.monotonic() - self.started) / 60:5.1f} min] {self.stage}{extra} (load {load})")


PROGRESS: Progress | None = None


def progress(stage: str, counter: Callable[[], str] | None = None) -> None:
    if PROGRESS is not None:
        PROGRESS.set(stage, counter)


# -- the pods ---------------------------------------------------------------------------------------------------


def det_k8s_group(ns: str, index: int, size: int) -> list[dict[str, Any]]:
    """One trial's pods as Determined 0.38 makes them (the Job controller's pods from the master's Job template)."""
    from tests.support.master_pods import master_task

    task = master_task("0.38.1", experiment=index + 1, slots_per_trial=size, max_slots_per_pod=1, priority=None,
                       namespace=ns)
    pods = []
    for pod in task.pods:
        pod["metadata"].pop("finalizers", None)  # the Job-tracking finalizer: no Job controller owns these pods
        pods.append(pod)
    return pods


def plain_pod(ns: str, name: str, scheduler: str | None = None, labels: dict[str, str] | None = None
              ) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {
        "requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}], "restartPolicy": "Never"}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": spec}


def group_objects(which: str, ns: str, index: int, size: int) -> tuple[str, list[dict[str, Any]], dict[str, Any] | None]:
    """(group name, its pods, its PodGroup or None)."""
    name = f"g{index:05d}"
    which = peer(which)[0]
    if which == "det-k8s":
        pods = det_k8s_group(ns, index, size)
        for pod in pods:
            pod["metadata"]["labels"]["bench-group"] = name
        return name, pods, None
    if which == "kube-scheduler":
        return name, [plain_pod(ns, f"{name}-{i}", labels={"bench-group": name}) for i in range(size)], None
    labels = {"bench-group": name, "scheduling.x-k8s.io/pod-group": name}
    podgroup = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": size}}
    return name, [plain_pod(ns, f"{name}-{i}", COSCHED_NAME, labels) for i in range(size)], podgroup


# -- watching the namespace -------------------------------------------------------------------------------------


@dataclass
class Watched:
    added: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    group_of: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Watcher:
    """This script's own watch of one namespace's pods: when each appeared and when it was first seen bound."""

    def __init__(self, api: Any, ns: str) -> None:
        from det_k8s.kube.kinds import PODS

        self.api, self.ns, self.kind = api, ns, PODS
        self.seen = Watched()
        self.stop = threading.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"bench-watch-{ns}")

    def start(self) -> Watcher:
        self.thread.start()
        self.ready.wait(60)
        return self

    def _note(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        with self.seen.lock:
            self.seen.added.setdefault(name, now)
            self.seen.group_of.setdefault(name, str((meta.get("labels") or {}).get("bench-group", "")))
            if (obj.get("spec") or {}).get("nodeName"):
                self.seen.bound.setdefault(name, now)

    def _run(self) -> None:
        from det_k8s.errors import DetK8sError

        version = ""
        while not self.stop.is_set():
            try:
                if not version:
                    items, version = self.api.list_page(self.kind, self.ns)
                    for obj in items:
                        self._note(obj)
                    self.ready.set()
                for event in self.api.watch(self.kind, self.ns, resource_version=version, timeout_seconds=60):
                    if self.stop.is_set():
                        return
                    obj = event.get("object") or {}
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._note(obj)
            except DetK8sError:
                version = ""
                time.sleep(0.2)


# -- the schedulers ----------------------------------------------------------------------------------------------


class Bench:
    def __init__(self, plane: ControlPlane, work: Path, cosched: tuple[Path, Path] | None) -> None:
        self.plane, self.work, self.cosched = plane, work, cosched
        self.kubeconfigs: dict[str, Path] = {}
        for which, user in USERS.items():
            if which == "kube-scheduler":
                continue
            crt, key = plane.pki.issue(user, user, organizations=["system:masters"])
            self.kubeconfigs[which] = write_kubeconfig(work / f"{user}.kubeconfig", plane.server, plane.pki.ca_cert,
                                                       cert=crt, key=key)
        self.apiserver_pid = next(c.proc.pid for c in plane.children if c.name == "kube-apiserver")

    def start(self, which: str) -> Child:
        which, tuned = peer(which)
        if which == "kube-scheduler":
            return self.plane.start_scheduler(
                [f"--kube-api-qps={TUNED_QPS}", f"--kube-api-burst={TUNED_BURST}"] if tuned else [])
        if which == "det-k8s":
            return self.plane.spawn("bench-det-k8s", [
                str(ROOT / ".venv" / "bin" / "det-k8s"), "--kubeconfig", str(self.kubeconfigs["det-k8s"]),
                "-n", "default", "scheduler", "run", "--scheduler-name", "coscheduler"])
        assert self.cosched is not None
        config = self.work / "coscheduling-config.yaml"
        config.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": str(self.kubeconfigs["coscheduling"]),
                                 **({"qps": TUNED_QPS, "burst": TUNED_BURST} if tuned else {})},
            "profiles": [{"schedulerName": COSCHED_NAME, "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}},
                # the arguments of the module's manifests/coscheduling/scheduler-config.yaml
                "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}]}]}))
        return self.plane.spawn("bench-coscheduling", [
            str(self.cosched[0]), f"--config={config}", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            f"--authentication-kubeconfig={self.kubeconfigs['coscheduling']}",
            f"--authorization-kubeconfig={self.kubeconfigs['coscheduling']}", "--v=1"])

    def stop(self, child: Child) -> tuple[int, float, int]:
        """Stop it; its peak resident memory in KiB, its CPU seconds (both read just before) and how many times its
        client said it waited on its own rate limit (client-go's "client-side throttling" lines in its log)."""
        peak, cpu = peak_kib(child.proc.pid), process_cpu(child.proc.pid)
        child.stop()
        throttled = 0
        with contextlib.suppress(OSError), child.log.open("rb") as log:
            throttled = sum(1 for line in log if b"client-side throttling" in line)
        with contextlib.suppress(ValueError):
            self.plane.children.remove(child)
        return peak, cpu, throttled

    def lift_fence(self) -> int:
        """Remove det-k8s's binding taint from the nodes a stopped det-k8s left it on (the next scheduler would find
        them full); how many there were. At 30,000 pods det-k8s stopped 3 s after its last binding left it on 3,656."""
        from det_k8s.live.fence import KEY

        _, body = self.plane.request("GET", "/api/v1/nodes", timeout=300)
        left = [n for n in body["items"] if any(t.get("key") == KEY for t in n["spec"].get("taints") or ())]

        def one(node: dict[str, Any]) -> None:
            taints = [t for t in node["spec"].get("taints") or () if t.get("key") != KEY]
            self.plane.request("PATCH", f"/api/v1/nodes/{node['metadata']['name']}", {"spec": {"taints": taints or None}},
                               content_type="application/merge-patch+json", timeout=60)
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(one, left))
        return len(left)

    def apiserver_cpu(self) -> float:
        fields = Path(f"/proc/{self.apiserver_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def audit_offset(self) -> tuple[int, frozenset[str]]:
        """Where the audit log ends now, and the rotated logs there are (kube-apiserver renames it at 100 MB and goes
        on in a new one: a 30,000-pod stage writes more than that)."""
        log = self.plane.audit_log
        return (log.stat().st_size if log.exists() else 0), frozenset(p.name for p in self._rotated())

    def _rotated(self) -> list[Path]:
        log = self.plane.audit_log
        return sorted(log.parent.glob(f"{log.stem}-*{log.suffix}"))  # (named by the time of the rotation)

    def requests_since(self, mark: tuple[int, frozenset[str]], user: str) -> dict[str, int]:
        """The user's requests (by verb) in the audit log since `mark` (`audit_offset`), across rotations; "429": how
        many were answered 429."""
        offset, before = mark
        rotated = [p for p in self._rotated() if p.name not in before]  # the first was the log at `mark`
        parts = [(path, offset if n == 0 else 0) for n, path in enumerate(rotated)]
        parts.append((self.plane.audit_log, 0 if rotated else offset))
        counts: dict[str, int] = {}
        for path, start in parts:
            with path.open("rb") as log:
                log.seek(start)
                for line in log:
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if (event.get("user") or {}).get("username") != user or event.get("stage") != "ResponseComplete":
                            continue
                        verb = f"{event.get('verb')} {(event.get('objectRef') or {}).get('resource', '')}" + (
                            f"/{event['objectRef']['subresource']}" if (event.get("objectRef") or {}).get("subresource")
                            else "")
                        counts[verb] = counts.get(verb, 0) + 1
                        if (event.get("responseStatus") or {}).get("code") == 429:
                            counts["429"] = counts.get("429", 0) + 1
        return counts

    def clear(self, ns: str) -> None:
        """Delete every pod (and PodGroup) of the namespace at once, and wait until they are gone."""
        def gone() -> bool:
            with contextlib.suppress(OSError):  # (a deletecollection of thousands may outlast the server's timeout)
                self.plane.request("DELETE", f"/api/v1/namespaces/{ns}/pods?gracePeriodSeconds=0", timeout=120)
            if self.cosched is not None:
                with contextlib.suppress(OSError):
                    self.plane.request("DELETE", PODGROUPS.format(ns=ns), timeout=120)
            status, body = self.plane.request("GET", f"/api/v1/namespaces/{ns}/pods?limit=1", timeout=60)
            return status == 200 and not body["items"]
        progress(f"deleting the pods of {ns}")
        self.plane.wait_for(f"the pods of {ns} gone", gone, timeout=1800, interval=2)


def process_cpu(pid: int) -> float:
    """User and system CPU seconds of the process so far (0 if it is gone)."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def peak_kib(pid: int) -> int:
    """VmHWM of the process and its children's (det-k8s runs as one Python process; the others are one Go binary)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


# -- one stage ---------------------------------------------------------------------------------------------------


def create_groups(api: Any, groups: Sequence[tuple[str, list[dict[str, Any]], dict[str, Any] | None]], rate: float,
                  plane: ControlPlane, workers: int = 16) -> float:
    """Create the groups (at `rate` groups/s, 0: as fast as they go), each group's pods back to back; seconds taken."""
    from det_k8s.kube.kinds import PODS

    clones = threading.local()
    started = time.monotonic()
    done = [0]
    progress(f"creating {len(groups)} groups",
             lambda: f"{done[0]} created, {done[0] / max(time.monotonic() - started, 1e-9):.1f} groups/s")

    def one(item: tuple[int, tuple[str, list[dict[str, Any]], dict[str, Any] | None]]) -> None:
        index, (_, pods, podgroup) = item
        if rate > 0:
            delay = started + index / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        if not hasattr(clones, "api"):
            clones.api = api.clone()
        if podgroup is not None:
            ns = podgroup["metadata"]["namespace"]
            status, body = plane.request("POST", PODGROUPS.format(ns=ns), podgroup)
            if status >= 300:
                raise RuntimeError(f"PodGroup {podgroup['metadata']['name']}: {status} {body}")
        for pod in pods:
            clones.api.create(PODS, pod, pod["metadata"]["namespace"])
        done[0] += 1

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for f in [pool.submit(one, item) for item in enumerate(groups)]:
            f.result()
    return time.monotonic() - started


def wait_bound(watcher: Watcher, total: int, stall: float, say_: Callable[[str], None], first: float = 1800.0,
               child: Child | None = None) -> None:
    """Until every pod is bound, or nothing more was bound for `stall` seconds (before the first binding: `first`
    seconds, for a first pass over a large backlog plans all of it before it binds), or the scheduler exited."""
    last, last_at = -1, time.monotonic()

    def count() -> str:
        with watcher.seen.lock:
            return f"{len(watcher.seen.bound)} of {total} pods bound"
    progress("waiting for the bindings", count)
    while True:
        with watcher.seen.lock:
            bound = len(watcher.seen.bound)
        if bound >= total:
            return
        now = time.monotonic()
        limit = stall if bound else first
        if child is not None and child.proc.poll() is not None:
            say_(f"    {bound} of {total} pods bound; the scheduler exited {child.proc.returncode}: stopping the stage")
            return
        if bound != last:
            last, last_at = bound, now
        elif now - last_at > limit:
            say_(f"    {bound} of {total} pods bound; nothing more for {limit:.0f} s: stopping the stage")
            return
        time.sleep(0.5)


def group_latencies(seen: Watched, size: int) -> tuple[list[float], int, int]:
    """(last pod appearing -> last binding, per complete bound group; partial groups; groups with nothing bound)."""
    members: dict[str, list[str]] = {}
    for pod, group in seen.group_of.items():
        members.setdefault(group, []).append(pod)
    latencies, partial, unbound = [], 0, 0
    for pods in members.values():
        bound = [seen.bound[p] for p in pods if p in seen.bound]
        if len(bound) == len(pods) == size:
            latencies.append(max(bound) - max(seen.added[p] for p in pods))
        elif bound:
            partial += 1
        else:
            unbound += 1
    return latencies, partial, unbound


QUIET_BUSY = 0.25  # a paced stage starts once the machine's CPU is at most this busy (a share of all its cores) ...
QUIET_WINDOW = 3.0  # ... over this many seconds


def cpu_busy(window: float) -> float:
    """The machine's CPU use over the next `window` seconds, as a share of all its cores (/proc/stat)."""
    def sample() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(values), values[3] + (values[4] if len(values) > 4 else 0)  # (all, idle + iowait)

    total, idle = sample()
    time.sleep(window)
    total2, idle2 = sample()
    return 1.0 - (idle2 - idle) / max(total2 - total, 1)


def wait_quiet(limit: float, say_: Callable[[str], None]) -> tuple[float, float]:
    """Wait until the machine is quiet (QUIET_BUSY over QUIET_WINDOW), at most `limit` seconds: every scheduler's
    paced stage starts on a machine as quiet as the others' (the first one's came right after 5,000 nodes turned
    Ready, a later one's after the deletion of the previous backlog). Returns the seconds waited and the last share."""
    started = time.monotonic()
    busy = cpu_busy(QUIET_WINDOW)
    while busy > QUIET_BUSY and time.monotonic() - started < limit:
        busy = cpu_busy(QUIET_WINDOW)
    waited = time.monotonic() - started
    say_(f"    machine {busy:.0%} busy after {waited:.0f} s of waiting for quiet")
    return waited, busy


def run_scheduler(bench: Bench, which: str, args: argparse.Namespace, say_: Callable[[str], None]) -> dict[str, Any]:
    from det_k8s.kube.api import KubeApi

    ns = f"bench-{which}"
    bench.plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    api = KubeApi.connect(kubeconfig=str(bench.plane.admin_kubeconfig), namespace=ns)
    size = args.pods_per_group
    backlog = args.groups if which == "det-k8s" or not args.peer_groups else args.peer_groups
    user = USERS[peer(which)[0]]
    result: dict[str, Any] = {"scheduler": which, "load_before": [round(x, 2) for x in os.getloadavg()]}
    cpu0, offset = bench.apiserver_cpu(), bench.audit_offset()
    peaks = []

    # paced: the scheduler runs, groups arrive at --rate
    say_(f"  {which}: paced stage, {args.paced_groups} groups at {args.rate:g} groups/s")
    child = bench.start(which)
    time.sleep(args.warmup)
    if args.quiet > 0:
        result["quiet_wait_s"], result["busy_paced_start"] = (round(x, 2) for x in wait_quiet(args.quiet, say_))
    watcher = Watcher(api.clone(), ns).start()
    groups = [group_objects(which, ns, i, size) for i in range(args.paced_groups)]
    took = create_groups(api, groups, args.rate, bench.plane, args.workers)
    wait_bound(watcher, len(groups) * size, args.stall, say_, args.first_binding, child)
    time.sleep(args.settle)
    watcher.stop.set()
    latencies, partial, unbound = group_latencies(watcher.seen, size)
    if args.latencies:
        write_latencies(Path(f"{args.latencies}.{which}"), watcher.seen, size)
    result.update(paced_groups=len(groups), paced_arrival_groups_s=round(len(groups) / took, 2),
                  p50_s=round(percentile(latencies, 0.5), 3), p99_s=round(percentile(latencies, 0.99), 3),
                  max_s=round(max(latencies, default=math.nan), 3), paced_partial=partial, paced_unbound=unbound,
                  load_paced=[round(x, 2) for x in os.getloadavg()])
    say_(f"    p50 {result['p50_s']} s, p99 {result['p99_s']} s, partial {partial}, none bound {unbound}")
    paced_bound = len(watcher.seen.bound)
    peaks.append(bench.stop(child))
    fence_left = bench.lift_fence()
    bench.clear(ns)

    # backlog: everything created with the scheduler stopped, then it starts
    say_(f"  {which}: backlog stage, {backlog} groups ({backlog * size} pods)")
    watcher = Watcher(api.clone(), ns).start()
    groups = [group_objects(which, ns, i, size) for i in range(backlog)]
    created = create_groups(api, groups, 0, bench.plane, args.workers)
    say_(f"    created in {created:.0f} s; starting {which}")
    child = bench.start(which)
    wait_bound(watcher, len(groups) * size, args.stall, say_, args.first_binding, child)
    time.sleep(args.settle)
    watcher.stop.set()
    peaks.append(bench.stop(child))
    fence_left += bench.lift_fence()
    if fence_left:
        say_(f"    the binding taint was left on {fence_left} nodes when {which} stopped: removed")
    bound_at = sorted(watcher.seen.bound.values())
    span = bound_at[-1] - bound_at[0] if len(bound_at) > 1 else math.nan
    _, partial, unbound = group_latencies(watcher.seen, size)
    cpu = bench.apiserver_cpu() - cpu0
    requests = bench.requests_since(offset, user)
    throttled = requests.pop("429", 0)
    bound_groups = result["paced_groups"] - result["paced_partial"] - result["paced_unbound"] + (
        backlog - partial - unbound)
    result.update(backlog_groups=backlog, throttled_429=throttled, fence_left_nodes=fence_left,
                  backlog_bound_pods=len(bound_at),
                  pods_per_s=round(len(bound_at) / span, 1) if span == span and span > 0 else math.nan,
                  backlog_partial=partial, backlog_unbound=unbound,
                  requests=sum(requests.values()), requests_by_verb=dict(sorted(requests.items(), key=lambda kv: -kv[1])),
                  requests_per_group=round(sum(requests.values()) / max(bound_groups, 1), 2),
                  apiserver_cpu_s=round(cpu, 1), peak_mib=round(max(p[0] for p in peaks) / 1024, 1),
                  apiserver_cpu_ms_per_pod=round(1000 * cpu / max(paced_bound + len(bound_at), 1), 2),
                  scheduler_cpu_s=round(sum(p[1] for p in peaks), 1),
                  client_throttled_lines=sum(p[2] for p in peaks),
                  load_backlog=[round(x, 2) for x in os.getloadavg()])
    say_(f"    {result['pods_per_s']} pods/s, partial {partial}, none bound {unbound}, {result['requests_per_group']} "
         f"requests per group ({throttled} answered 429, {result['client_throttled_lines']} client-side throttling "
         f"lines), API server {result['apiserver_cpu_s']} CPU s, {which} {result['scheduler_cpu_s']} CPU s, "
         f"peak {result['peak_mib']} MiB")
    bench.clear(ns)
    return result


def write_latencies(path: Path, seen: Watched, size: int) -> None:
    """Per group of the paced stage: when its last pod appeared and when its last binding was seen (time.monotonic,
    the clock a scheduler's own trace would use), and the time between, slowest first (what the p99 is made of); a
    group not bound whole (as `group_latencies` counts it) last, with nan for its binding."""
    members: dict[str, list[str]] = {}
    for pod, group in seen.group_of.items():
        members.setdefault(group, []).append(pod)
    rows = []
    for group, pods in members.items():
        added = max(seen.added[p] for p in pods)
        whole = len(pods) == size and all(p in seen.bound for p in pods)
        bound = max(seen.bound[p] for p in pods) if whole else math.nan
        rows.append((bound - added, group, added, bound))
    rows.sort(key=lambda row: -row[0] if row[0] == row[0] else math.inf)
    path.write_text("".join(f"{group} {added:.4f} {bound:.4f} {took:.4f}\n" for took, group, added, bound in rows))


# -- the run -----------------------------------------------------------------------------------------------------


def audit_policy(path: Path) -> Path:
    """Metadata-level audit of the schedulers' own users only (what `requests per group` counts)."""
    path.write_text(json.dumps({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
                                "rules": [{"level": "Metadata", "users": list(USERS.values())}, {"level": "None"}]}))
    return path


def add_nodes(plane: ControlPlane, count: int, say_: Callable[[str], None], workers: int = 16) -> None:
    """Create the nodes (one kept-alive connection per worker) and wait until each is Ready and untainted."""
    from det_k8s.errors import DetK8sError
    from det_k8s.kube.api import KubeApi
    from det_k8s.kube.kinds import NODES

    say_(f"  {count} kwok nodes of {GPUS_PER_NODE} GPUs")
    api = KubeApi.connect(kubeconfig=str(plane.admin_kubeconfig), namespace="default")
    clones = threading.local()
    done = [0]
    progress("creating the nodes", lambda: f"{done[0]} of {count} created")

    def one(i: int) -> None:
        if not hasattr(clones, "api"):
            clones.api = api.clone()
        node = fake_node(f"bench-{i:05d}", gpus=GPUS_PER_NODE, cpu="64", memory="512Gi")
        try:
            clones.api.create(NODES, node)
        except DetK8sError:  # (already there: a retried create whose first answer was lost)
            plane.apply(node)
        done[0] += 1
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, range(count)))

    state = {"ready": 0}

    def ready() -> bool:
        items, cont = [], ""
        while True:  # in pages: one list of 5,000 nodes can outlast the request's timeout on a busy server
            _, body = plane.request("GET", f"/api/v1/nodes?limit=1000&continue={cont}", timeout=120)
            items += body["items"]
            cont = (body.get("metadata") or {}).get("continue") or ""
            if not cont:
                break
        state["ready"] = sum(1 for n in items if not (n["spec"].get("taints")))
        return state["ready"] >= count
    progress("waiting for the nodes Ready", lambda: f"{state['ready']} of {count} Ready and untainted")
    plane.wait_for("the kwok nodes Ready", ready, timeout=3600, interval=5)


def kwok_stages(binaries: Any, work: Path, lease_seconds: int, parallelism: int) -> Path:
    """The cached Stages, with kwok's lease-era node heartbeat (kustomize/stage/node/heartbeat-with-lease: a status
    heartbeat every 10-20 min) in place of the every-20-45-s one when the nodes renew a Lease, and kwok's
    configuration: `parallelism` node and pod stages at once (kwok's default 4 makes 5,000 nodes Ready slowly)."""
    text = (binaries.kwok.parent / STAGES_FILE).read_text()
    old = "durationMilliseconds: 20000\n    jitterDurationMilliseconds: 25000"
    if lease_seconds > 0:
        if old not in text:
            raise RuntimeError(f"the node-heartbeat Stage in {STAGES_FILE} is not the one expected (delay 20-45 s)")
        text = text.replace(old, "durationMilliseconds: 600000\n    jitterDurationMilliseconds: 610000")
    path = work / "kwok-stages-bench.yaml"
    path.write_text(text.rstrip() + "\n---\n" + json.dumps({
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration", "metadata": {"name": "bench"},
        "options": {"nodePlayStageParallelism": parallelism, "podPlayStageParallelism": parallelism,
                    "nodeLeaseParallelism": parallelism}}) + "\n")
    return path


def install_podgroup_crd(plane: ControlPlane, crd_file: Path) -> None:
    import yaml

    crd = yaml.safe_load(crd_file.read_text())
    status, body = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    if status >= 300 and status != 409:
        raise RuntimeError(f"PodGroup CRD: {status} {body}")

    def established() -> bool:
        _, got = plane.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}")
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (got.get("status") or {}).get("conditions") or ())
    plane.wait_for("the PodGroup CRD established", established, timeout=60)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--groups", type=int, default=7500, help="groups in the backlog stage (x pods-per-group pods)")
    parser.add_argument("--peer-groups", type=int, default=0,
                        help="groups in kube-scheduler's and coscheduling's backlog stage (0: --groups); a smaller "
                             "backlog for the peers when a slow machine cannot give them det-k8s's")
    parser.add_argument("--pods-per-group", type=int, default=4)
    parser.add_argument("--paced-groups", type=int, default=300, help="groups in the paced stage")
    parser.add_argument("--rate", type=float, default=4.0, help="groups a second in the paced stage")
    parser.add_argument("--schedulers", default=",".join(SCHEDULERS))
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds a scheduler gets to list the cluster")
    parser.add_argument("--stall", type=float, default=60.0, help="a stage ends after this long without a binding")
    parser.add_argument("--first-binding", type=float, default=1800.0,
                        help="... or without its first binding (det-k8s's first pass over 30,000 pods fences and "
                             "plans them all before it binds)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after the last binding before counting")
    parser.add_argument("--quiet", type=float, default=120.0,
                        help="seconds a paced stage waits at most for the machine to be quiet (0: it does not wait)")
    parser.add_argument("--workers", type=int, default=16, help="threads creating nodes and pods")
    parser.add_argument("--node-lease", type=int, default=1200,
                        help="the kwok nodes' Lease duration in seconds (renewed every quarter of it; 0: kwok's "
                             "default status heartbeat every 20-45 s and no Lease)")
    parser.add_argument("--kwok-parallelism", type=int, default=16, help="node and pod Stages kwok plays at once")
    parser.add_argument("--progress", type=float, default=30.0, help="seconds between progress lines")
    parser.add_argument("--output", default="", help="also write the figures as JSON here")
    parser.add_argument("--latencies", default="",
                        help="write each paced group's times to FILE.<scheduler> (last pod, last binding, latency)")
    parser.add_argument("--markdown", default="", help="and as Markdown here (benchmarks/SIDEBYSIDE.md)")
    args = parser.parse_args(argv)
    which = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    unknown = [s for s in which if s not in SCHEDULERS]
    if unknown:
        parser.error(f"--schedulers: unknown {', '.join(unknown)} (known: {', '.join(SCHEDULERS)})")
    if args.nodes * GPUS_PER_NODE < max(args.groups, args.peer_groups) * args.pods_per_group:
        parser.error(f"--groups {args.groups} x --pods-per-group {args.pods_per_group} pods of 1 GPU do not fit "
                     f"--nodes {args.nodes} x {GPUS_PER_NODE} GPUs")

    def say_(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    global PROGRESS
    PROGRESS = Progress(say_, args.progress)
    PROGRESS.thread.start()

    from benchmarks.machine import describe

    machine = describe()
    cosched = None
    try:
        binaries = build_all()
        if any(peer(s)[0] == "coscheduling" for s in which):
            cosched = build_coscheduling()
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"det-k8s-sidebyside-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    # kube-controller-manager's client is held to 20 requests/s by default: its node lifecycle controller then lifts
    # the new nodes' not-ready taints at ~5 nodes/s (kwok makes them Ready within seconds)
    manager = ["--kube-api-qps=300", "--kube-api-burst=600"]
    if args.node_lease > 0:
        # kube-controller-manager calls a node unhealthy after its grace period without a renewal: more than the
        # renewal interval (a quarter of the Lease), with room for a loaded machine
        manager.append(f"--node-monitor-grace-period={args.node_lease}s")
    # the API server deletes a collection one object at a time by default (~25 pods/s here): clearing 30,000 pods
    # between stages took 20 minutes
    options = Options(scheduler=False, apiserver_args=(f"--audit-policy-file={audit_policy(work / 'audit.json')}",
                                                       "--delete-collection-workers=8"),
                      controller_manager_args=manager,
                      kwok_stages=kwok_stages(binaries, work, args.node_lease, args.kwok_parallelism),
                      kwok_args=[f"--node-lease-duration-seconds={args.node_lease}"] if args.node_lease > 0 else [])
    progress("starting the control plane")
    results = []
    try:
        with ControlPlane(binaries, options) as plane:
            add_nodes(plane, args.nodes, say_, args.workers)
            if cosched is not None:
                install_podgroup_crd(plane, cosched[1])
            bench = Bench(plane, work, cosched)
            for name in which:
                results.append(run_scheduler(bench, name, args, say_))
                say_(f"  {name} done: {json.dumps(results[-1])}")
    finally:
        if os.environ.get("DET_K8S_KEEP_CLUSTER_DIR") is None:
            shutil.rmtree(work, ignore_errors=True)  # the schedulers' kubeconfigs hold client keys
    PROGRESS.stop.set()
    report = {"machine": machine, "kubernetes": binaries.kube_version, "etcd": binaries.etcd_version,
              "kwok": binaries.kwok_version, "scheduler_plugins": SCHEDULER_PLUGINS_VERSION if cosched else None,
              "args": vars(args), "results": results, "ratios": ratios(results)}
    print(json.dumps(report, indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown(report))
    return 0


def markdown(report: dict[str, Any]) -> str:
    """The figures as Markdown (benchmarks/SIDEBYSIDE.md; RESULTS.md section 8 includes it)."""
    m, a, rs, q = report["machine"], report["args"], report["results"], report["ratios"]
    size = a["pods_per_group"]
    lines = ["# Side by side on one real control plane (`python -m benchmarks.sidebyside`)", "",
             f"Run {m['date']} at {m['commit']} on {m['cpu']} ({m['cores']} cores, {m['memory_gib']} GiB), "
             f"{m['python']}; load average at start {m['load_at_start']} (the machine is shared: the load of each "
             "stage is in the table).",
             f"Kubernetes {report['kubernetes']} (kube-apiserver, kube-controller-manager, kube-scheduler from "
             f"k8s.io/kubernetes), etcd {report['etcd']}, kwok {report['kwok']}"
             + (f", sigs.k8s.io/scheduler-plugins v{report['scheduler_plugins']} (the coscheduling plugin, built "
                "against Kubernetes 1.34 as its go.mod pins it)" if report.get("scheduler_plugins") else "") + ".",
             f"{a['nodes']:,} kwok nodes of {GPUS_PER_NODE} GPUs; groups of {size} pods x 1 GPU. Paced stage: "
             f"{a['paced_groups']} groups arriving at {a['rate']:g} groups/s with the scheduler running. Backlog "
             "stage: " + ", ".join(f"{r['scheduler']} {r['backlog_groups']:,} groups ({r['backlog_groups'] * size:,} "
                                   "pods)" for r in rs) + " created first, then the scheduler started. Each scheduler "
             "alone on the control plane, one after the other"
             + (f"; each paced stage began once the machine's CPU was at most {QUIET_BUSY:.0%} busy for "
                f"{QUIET_WINDOW:g} s (waited " + ", ".join(f"{r['scheduler']} {r['quiet_wait_s']:g} s" for r in rs)
                + ")" if all("quiet_wait_s" in r for r in rs) else "") + ". "
             + (f"The kwok nodes renew a {a['node_lease']} s node Lease (every quarter of it) and their status every "
                "10-20 min." if a.get("node_lease") else "The kwok nodes send their status every 20-45 s.")
             + " Requests answered 429: " + ", ".join(f"{r['scheduler']} {r.get('throttled_429', 0)}" for r in rs)
             + ".", "",
             f"Peers marked tuned run with their client rate limit lifted to QPS {TUNED_QPS}, burst {TUNED_BURST} "
             "(kube-scheduler's `--kube-api-qps`/`--kube-api-burst`, the plugin's `clientConnection.qps`/`burst`), as "
             "the Kubernetes project's scheduler_perf runs its scheduler; the others with their defaults (50 requests/s, "
             "burst 100), as a fresh install runs them. Every ratio is against the tuned peer first.", "",
             "| scheduler | last pod -> last binding p50 | p99 | max | pods bound/s (backlog) | partial groups | "
             "API requests per bound group | API server CPU s | API server CPU ms per bound pod | scheduler CPU s | "
             "client-side throttling lines / 429s | scheduler peak RSS | load (paced / backlog) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {label(r['scheduler'])} | {r['p50_s']:.2f} s | {r['p99_s']:.2f} s | {r['max_s']:.2f} s | "
                     f"{r['pods_per_s']} | {r['paced_partial'] + r['backlog_partial']} | {r['requests_per_group']} | "
                     f"{r['apiserver_cpu_s']} | {r.get('apiserver_cpu_ms_per_pod', '-')} | "
                     f"{r.get('scheduler_cpu_s', '-')} | {r.get('client_throttled_lines', '-')} / "
                     f"{r.get('throttled_429', 0)} | {r['peak_mib']} MiB | "
                     f"{r['load_paced'][0]} / {r['load_backlog'][0]} |")
    lines += ["", "From this run (goals in brackets): " + "; ".join(f"{k} **{v}**" for k, v in q.items()), "",
              "kube-scheduler places ordinary pods (no gangs): its latency is for the same number of pods created "
              "back to back, for reference. Requests are every request the scheduler's own user made (audit log), "
              "watches and lists included, over both stages.", "", "Requests by verb:", "",
              "| scheduler | requests |", "|---|---|"]
    for r in rs:
        verbs = list(r["requests_by_verb"].items())[:8]
        lines.append(f"| {label(r['scheduler'])} | " + ", ".join(f"{k} {v}" for k, v in verbs) + " |")
    return "\n".join(lines) + "\n"


def label(which: str) -> str:
    name, tuned = peer(which)
    if name == "det-k8s":
        return name
    return f"{name} (tuned)" if tuned else f"{name} (defaults)"


def ratios(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """det-k8s against each peer, the tuned peers first; the goals in brackets."""
    by = {r["scheduler"]: r for r in results}
    out: dict[str, Any] = {}
    det = by.get("det-k8s")

    def ratio(key: str, other: dict[str, Any]) -> float:
        return round(det[key] / other[key], 2) if det and other.get(key) else math.nan

    for suffix, goal in (("-tuned", True), ("", False)):
        kube, cosched = by.get("kube-scheduler" + suffix), by.get("coscheduling" + suffix)
        what = "tuned" if goal else "defaults"
        if det and kube:
            out[f"pods/s det-k8s / kube-scheduler {what}" + (" (>= 1.0)" if goal else "")] = ratio("pods_per_s", kube)
            out[f"API server CPU per bound pod det-k8s / kube-scheduler {what}" + (" (<= 1.0)" if goal else "")] = ratio(
                "apiserver_cpu_ms_per_pod", kube)
        if det and cosched:
            out[f"pods/s det-k8s / coscheduling {what}"] = ratio("pods_per_s", cosched)
            out[f"p99 det-k8s / coscheduling {what}" + (" (<= 1.0)" if goal else "")] = ratio("p99_s", cosched)
    for r in results:
        out[f"partial groups {label(r['scheduler'])}" + (" (0)" if r["scheduler"] == "det-k8s" else "")] = (
            r["paced_partial"] + r["backlog_partial"])
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
