"""Benchmark 8: det-k8s as the scheduler of the master's pods, at 5,000 nodes / 30,000 pods.

Three processes on this machine, as in a cluster: the Kubernetes API emulator of the tests (schema
validation, watch, bindings and events included) holding a generated cluster (`generate.snapshot`:
5,000 nodes, 30,000 pods, half of the GPUs taken), the real `det-k8s scheduler run` console script
(its own process, its own credentials, listing once and then watching), and this process playing the
Determined master: it creates trials exactly as the v0.38.1 master does (`tests/support/master_pods.py`: a
batch/v1 Job and its pods, `schedulerName: coscheduler`, gang labels, a PriorityClass), with the GPU
taint toleration a GPU pool's `gpuPodSpec` gives them.

- **Latency**: trials of 1-4 pods x 4 GPUs (mixed with 1-GPU single pods) arrive one every
  `interval` seconds; for each, the time from its last pod's creation (when the create call returned)
  to its last binding (the emulator's clock at the binding: the same machine's wall clock). p50, p99.
- **Requests per bound group** in that steady state: every request the scheduler's credentials made
  during the phase (lease, policy, queue, bindings, events, status patches, watches opened), divided by
  the groups it bound; and how many of them were full lists of pods or nodes (the goal: none).
- **Sustained throughput**: a backlog of `backlog_groups` trials of 4 pods is created while the scheduler
  is stopped; then it starts, lists once, and binds them: bound pods per second from its first binding to
  its last (and from its start, listing included).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "bench"
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SCHEDULER_TOKEN = "det-k8s-scheduler"
MASTER_TOKEN = "determined-master"


def _trial(experiment: int, slots: int, per_pod: int, priority: int) -> Any:
    sys.path.insert(0, str(ROOT))
    from tests.support.master_pods import master_task

    task = master_task("0.38.1", experiment=experiment, trial=1, slots_per_trial=slots, max_slots_per_pod=per_pod,
                       priority=priority, namespace=NAMESPACE, user=f"user-{experiment % 6}")
    for pod in task.pods + ([task.job["spec"]["template"]] if task.job else []):
        pod["spec"].setdefault("tolerations", []).append(dict(TOLERATE_GPU))
    return task


def serve(nodes: int, pods: int, backlog: int, seed: int) -> None:
    """The emulator with the generated cluster (and a backlog of pending trials) until stdin closes."""
    sys.path.insert(0, str(ROOT))
    import aiohttp.web

    from tests.support.k8s_emulator import ApiEmulator, RunningEmulator

    from .generate import snapshot

    stats: dict[str, int] = {}
    original = ApiEmulator._handle

    async def counted(self: ApiEmulator, request: Any) -> Any:
        path = request.url.path
        if path == "/debug/stats":
            return aiohttp.web.json_response(stats)
        if path == "/debug/bindings":
            with self._lock:
                return aiohttp.web.json_response(self.bindings)
        token = str(request.headers.get("Authorization", "")).removeprefix("Bearer ").strip()
        watch = str(request.params.get("watch", "")) in ("true", "1")
        parts = [p for p in path.split("/") if p]
        kind = "?"
        for plural in ("pods", "nodes", "configmaps", "leases", "events", "jobs", "priorityclasses"):
            if plural in parts:
                index = parts.index(plural)
                kind = plural + ("/" + parts[index + 2] if len(parts) > index + 2 else "")
                named = len(parts) > index + 1
                break
        else:
            named = False
        method = str(getattr(request.method, "value", request.method)).upper()
        by_node = str(request.params.get("fieldSelector", "")).startswith("spec.nodeName=")
        verb = {"GET": "watch" if watch else ("get" if named else "list one node's" if by_node else "list"),
                "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())
        key = f"{token} {verb} {kind}"
        stats[key] = stats.get(key, 0) + 1
        return await original(self, request)

    ApiEmulator._handle = counted  # type: ignore[method-assign]  # this process exists only to serve
    emulator = ApiEmulator(watch_window=400_000)
    cluster = snapshot(nodes, pods, seed, style="lean", gpu_use=0.5)
    for item in cluster["items"]:
        emulator.put(item)
    rng = random.Random(seed)
    for i in range(backlog):
        task = _trial(100_000 + i, 8, 2, rng.choice([40, 50, 60]))
        for priority_class in task.priority_classes:
            emulator.put(priority_class)
        for pod in task.pods:
            pod["spec"]["priority"] = task.priority_classes[0]["value"]
            emulator.put(pod)
    running = RunningEmulator(emulator).start()
    print(running.url, flush=True)
    sys.stdin.read()
    running.stop()


def _kubeconfig(path: Path, url: str, token: str) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "bench",
        "clusters": [{"name": "bench", "cluster": {"server": url}}],
        "users": [{"name": "bench", "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench", "namespace": NAMESPACE}}]}))
    return path


def _get(url: str, path: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url + path, timeout=60) as response:  # noqa: S310 (127.0.0.1)
        return json.loads(response.read())


def _start_scheduler(data: Path, url: str) -> tuple[subprocess.Popen[str], float]:
    kubeconfig = _kubeconfig(data / "scheduler-kubeconfig", url, SCHEDULER_TOKEN)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "USER": "bench", "NO_COLOR": "1"}
    log = (data / "scheduler.log").open("w")
    det_k8s = Path(sys.executable).parent / "det-k8s"
    started = time.time()
    process = subprocess.Popen([str(det_k8s), "scheduler", "run", "-n", NAMESPACE, "--interval", "60"], env=env,
                               stdout=log, stderr=log, text=True)
    return process, started


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


def _wait_bound(url: str, expected: int, limit: float, scheduler: subprocess.Popen[str]) -> list[list[Any]]:
    deadline = time.monotonic() + limit
    while True:
        bindings = _get(url, "/debug/bindings")
        if len(bindings) >= expected or time.monotonic() > deadline:
            return list(bindings)
        if scheduler.poll() is not None:
            raise RuntimeError(f"the scheduler exited ({scheduler.returncode}); see benchmarks/data/scheduler.log")
        time.sleep(0.2)


def _wait_quiet(url: str, key: str, at_least: int, limit: float = 120.0) -> None:
    """Wait until the scheduler has made `at_least` requests of `key` and then none for a second."""
    deadline = time.monotonic() + limit
    last = -1
    while time.monotonic() < deadline:
        count = _get(url, "/debug/stats").get(f"{SCHEDULER_TOKEN} {key}", 0)
        if count >= at_least and count == last:
            return
        last = count
        time.sleep(1.0)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _scheduler_requests(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key.split(" ", 1)[1]: after[key] - before.get(key, 0) for key in after
            if key.startswith(SCHEDULER_TOKEN + " ") and after[key] - before.get(key, 0)}


def measure(url: str, data: Path, config: dict[str, Any]) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from det_k8s.kube.api import KubeApi
    from tests.support.master_pods import create_task

    backlog_pods = config["backlog_groups"] * 4
    scheduler, started = _start_scheduler(data, url)
    try:
        # -- sustained throughput: the backlog, bound from the scheduler's start
        bindings = _wait_bound(url, backlog_pods, config["limit"], scheduler)
        times = sorted(b[3] for b in bindings)
        throughput = {
            "pods": len(bindings), "groups": config["backlog_groups"],
            "first_binding_after_start_s": round(times[0] - started, 2) if times else None,
            "binding_window_s": round(times[-1] - times[0], 3) if len(times) > 1 else None,
            "pods_per_second": round((len(times) - 1) / (times[-1] - times[0]), 1) if len(times) > 1 else None,
            "pods_per_second_from_start": round(len(times) / (times[-1] - started), 1) if times else None,
        }
        _wait_quiet(url, "create events", len(bindings))  # the backlog's Scheduled events, written in the background
        # -- latency and requests per group: trials arriving one by one
        master = KubeApi.connect(kubeconfig=str(_kubeconfig(data / "master-kubeconfig", url, MASTER_TOKEN)))
        rng = random.Random(config["seed"])
        stats_before = _get(url, "/debug/stats")
        bound_before = len(_get(url, "/debug/bindings"))
        created: dict[str, tuple[float, int]] = {}  # pod name prefix (the Job) -> (last create returned, pods)
        names: dict[str, str] = {}
        for i in range(config["arrivals"]):
            if rng.random() < 0.25:
                task = _trial(i + 1, 1, 1, rng.choice([40, 50, 60]))
            else:
                size = rng.choice([1, 2, 2, 4])
                task = _trial(i + 1, 4 * size, 4, rng.choice([40, 50, 60]))
            create_task(master, task)
            created[task.job["metadata"]["name"]] = (time.time(), len(task.pods))
            for pod in task.pods:
                names[pod["metadata"]["name"]] = task.job["metadata"]["name"]
            time.sleep(config["interval"])
        expected = bound_before + sum(count for _, count in created.values())
        after = _wait_bound(url, expected, config["limit"], scheduler)
        events_before = stats_before.get(f"{SCHEDULER_TOKEN} create events", 0)
        _wait_quiet(url, "create events", events_before + expected - bound_before)
        stats_after = _get(url, "/debug/stats")
    finally:
        _stop(scheduler)
    last: dict[str, float] = {}
    for _, pod, _, when in after[bound_before:]:
        job = names.get(pod)
        if job is not None:
            last[job] = max(last.get(job, 0.0), when)
    latencies = [last[job] - made for job, (made, _) in created.items() if job in last]
    requests = _scheduler_requests(stats_before, stats_after)
    groups = len(latencies)
    full_lists = sum(count for key, count in requests.items() if key in ("list pods", "list nodes"))
    return {
        "throughput": throughput,
        "latency": {"groups": len(created), "bound": groups,
                    "p50_s": round(statistics.median(latencies), 3) if latencies else None,
                    "p99_s": round(_percentile(latencies, 0.99), 3) if latencies else None,
                    "max_s": round(max(latencies), 3) if latencies else None,
                    "interval_s": config["interval"]},
        "requests": {"by_kind": dict(sorted(requests.items())), "total": sum(requests.values()),
                     "per_bound_group": round(sum(requests.values()) / groups, 1) if groups else None,
                     "bindings_per_group": round(requests.get("create pods/binding", 0) / groups, 2) if groups else None,
                     "full_lists_of_pods_or_nodes": full_lists},
    }


def run(config: dict[str, Any]) -> dict[str, Any]:
    data = Path(config["data"])
    data.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen([sys.executable, "-m", "benchmarks.binding", "--serve", "--nodes", str(config["nodes"]),
                               "--pods", str(config["pods"]), "--backlog", str(config["backlog_groups"]),
                               "--seed", str(config["seed"])], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdin is not None
        url = server.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError("the API emulator did not start")
        result = measure(url, data, config)
    finally:
        with contextlib.suppress(OSError):
            if server.stdin is not None:
                server.stdin.close()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
    return {**result, "nodes": config["nodes"], "pods": config["pods"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", action="store_true", help="run the API emulator (used by `run`)")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--backlog", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--measure", action="store_true", help="run the whole benchmark and print JSON")
    parser.add_argument("--arrivals", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    if args.serve:
        serve(args.nodes, args.pods, args.backlog, args.seed)
    elif args.measure:
        config = {"nodes": args.nodes, "pods": args.pods, "backlog_groups": args.backlog or 500, "seed": args.seed,
                  "arrivals": args.arrivals, "interval": args.interval, "limit": 600,
                  "data": str(ROOT / "benchmarks" / "data")}
        print(json.dumps(run(config), indent=1))


if __name__ == "__main__":
    main()
