"""Benchmark 4: creating a 64-pod group through the real client, one pod at a time or on a bounded pool.

The Kubernetes API emulator of the tests (tests/support/k8s_emulator.py: kmock plus real API semantics)
runs in its own process on 127.0.0.1, so client and server do not share an interpreter, but on a
small machine they do share the CPU cores. det-k8s's `create_group()` creates the group's headless
Service and its 64 pods (real manifests: `build_group` + `pod_manifests` for a 256-slot
experiment, 4 GPUs per pod) with `workers` threads, through `KubeApi` and the official client.

Measured per worker count, the median of several rounds (the pods are deleted between rounds,
untimed): pods created per second, and the window during which the group exists only in part,
from the first pod's create call returning to the last one's (as the client sees it; the server
stores each pod just before its reply, so the true window is the same within one round trip).
A second series adds a fixed delay to every API request in the emulator (`latency_ms`), the
round trip to an API server that is not on this machine: that is where concurrency pays.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "bench"
POOL_WARNING = "Connection pool is full"


def serve(latency: float) -> None:
    """Run the emulator until stdin closes; print its URL first. Every request waits `latency` seconds."""
    sys.path.insert(0, str(ROOT))
    from tests.support.k8s_emulator import ApiEmulator, RunningEmulator

    if latency:
        original = ApiEmulator._handle

        async def delayed(self: ApiEmulator, request: Any) -> Any:
            await asyncio.sleep(latency)
            return await original(self, request)

        ApiEmulator._handle = delayed  # type: ignore[method-assign]  # this process exists only to serve
    running = RunningEmulator().start()
    print(running.url, flush=True)
    sys.stdin.read()
    running.stop()


class _Recorder:
    """The KubeApi, with the time each pod's create call returned."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self.created: list[float] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)

    def create(self, kind: Any, body: Any, namespace: str | None = None) -> Any:
        result = self._api.create(kind, body, namespace)
        if getattr(kind, "plural", "") == "pods":
            moment = time.perf_counter()
            with self._lock:
                self.created.append(moment)
        return result


class _PoolWarnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if POOL_WARNING in record.getMessage():
            self.count += 1


def group_manifests(pods: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from det_k8s.scheduling.experiments import parse_experiment
    from det_k8s.scheduling.groups import build_group, headless_service_manifest, pod_manifests
    from det_k8s.settings import Document, load_settings

    from .generate import SETTINGS

    settings = load_settings([Document("site.yaml", SETTINGS)]).settings()
    text = (f"name: bench-submit\nresources: {{slots_per_trial: {pods * 4}}}\n"
            "environment: {image: determinedai/environments:cuda-11.3-pytorch-1.10-gpu}\n"
            "entrypoint: python3 -m determined.launch.torch_distributed python3 train.py\n")
    experiment = parse_experiment(text, "bench-submit.yaml").get()
    group = build_group(experiment, settings, group_id="0123456789ab", user="bench",
                        submitted_at="2026-11-21T12:00:00Z", sequence=0)
    placement = {pod.name: f"node-{i:05d}" for i, pod in enumerate(group.pods)}
    return pod_manifests(group, experiment, settings, placement, NAMESPACE), headless_service_manifest(group, NAMESPACE)


def measure(url: str, data: Path, workers_list: list[int], pods: int, rounds: int) -> list[dict[str, Any]]:
    import yaml

    from det_k8s.kube.api import KubeApi
    from det_k8s.live.submit import create_group, delete_group

    config = {"apiVersion": "v1", "kind": "Config", "current-context": "bench",
              "clusters": [{"name": "bench", "cluster": {"server": url}}],
              "users": [{"name": "bench", "user": {"token": "bench"}}],
              "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench", "namespace": NAMESPACE}}]}
    kubeconfig = data / "bench-kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    api = KubeApi.connect(kubeconfig=str(kubeconfig), namespace=NAMESPACE)
    manifests, service = group_manifests(pods)
    names = [m["metadata"]["name"] for m in manifests]
    service_name = service["metadata"]["name"]
    counter = _PoolWarnings()
    pool_logger = logging.getLogger("urllib3.connectionpool")
    pool_logger.addHandler(counter)
    pool_logger.propagate = False
    rows = []
    try:
        create_group(api, NAMESPACE, manifests[:2], service)  # warm the connection up, untimed
        delete_group(api, NAMESPACE, names[:2], service_name, grace_seconds=0)
        for workers in workers_list:
            walls, windows = [], []
            before = counter.count
            for _ in range(rounds):
                recorder = _Recorder(api)
                start = time.perf_counter()
                created = create_group(recorder, NAMESPACE, manifests, service, workers=workers)  # type: ignore[arg-type]
                walls.append(time.perf_counter() - start)
                windows.append(max(recorder.created) - min(recorder.created))
                assert len(created.pods) == pods
                delete_group(api, NAMESPACE, names, service_name, grace_seconds=0)
            wall = statistics.median(walls)
            rows.append({"workers": workers, "pods": pods, "seconds": round(wall, 4),
                         "pods_per_second": round(pods / wall, 1),
                         "partial_window_ms": round(statistics.median(windows) * 1000, 1),
                         "pool_full_warnings": counter.count - before})
    finally:
        pool_logger.removeHandler(counter)
        pool_logger.propagate = True
        api.close()
    return rows


def run(config: dict[str, Any]) -> dict[str, Any]:
    data = Path(config["data"])
    data.mkdir(parents=True, exist_ok=True)
    series = []
    for latency_ms in config["latencies_ms"]:
        server = subprocess.Popen([sys.executable, "-m", "benchmarks.submission", "--serve", "--latency",
                                   str(latency_ms / 1000)], cwd=ROOT, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None and server.stdin is not None
            url = server.stdout.readline().strip()
            if not url.startswith("http"):
                raise RuntimeError("the API emulator did not start")
            rows = measure(url, data, config["workers"], config["pods"], config["rounds"])
            series.append({"latency_ms": latency_ms, "rows": rows})
        finally:
            with contextlib.suppress(OSError):
                if server.stdin is not None:
                    server.stdin.close()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=30)
    return {"series": series, "pool_size": _pool_size()}


def _pool_size() -> int:
    from kubernetes.client import Configuration

    return int(Configuration().connection_pool_maxsize)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", action="store_true", help="run the API emulator (used by `run`)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds each request waits")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency)


if __name__ == "__main__":
    main()
