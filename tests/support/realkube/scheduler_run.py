"""`det-k8s scheduler run` beside the real Determined master (tests/support/realkube/determined.py), as the ServiceAccount
and RBAC `scheduler manifest -n determined` ships; optionally through a HoldProxy (tests/support/realkube/holdproxy.py) that
can hold one of its requests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from det_k8s.chart.deploy import scheduler_manifests
from tests.support.realkube.determined import SCHEDULER_SA, SYSTEM_NS, DeterminedOnKube


@contextlib.contextmanager
def scheduler_run(det: DeterminedOnKube, work: Path, *args: str, proxy: Any = None
                  ) -> Iterator[subprocess.Popen[str]]:
    """`det-k8s scheduler run ARGS` (in its own process group, its output in work/scheduler.log); after it, no
    request of its refused. With `proxy` (a HoldProxy), it talks to the API server through it."""
    for doc in scheduler_manifests("example.com/det-k8s:test", SYSTEM_NS, preemption=True):
        if doc["kind"] != "Deployment":
            det.plane.apply(doc)
    work.mkdir(parents=True, exist_ok=True)
    kubeconfig = det.plane.service_account_kubeconfig(SYSTEM_NS, "det-k8s-scheduler", work / "sa.kubeconfig")
    if proxy is not None:
        token = json.loads(kubeconfig.read_text())["users"][0]["user"]["token"]
        kubeconfig = proxy.kubeconfig(work / "proxied.kubeconfig", token, SYSTEM_NS)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NO_COLOR": "1", "DET_K8S_LEASE_NAMESPACE": "default"}
    with (work / "scheduler.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "det_k8s", "scheduler", "run", "-n", SYSTEM_NS, "--interval",
                                 "2s", *args], env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
    assert det.plane.forbidden(SCHEDULER_SA) == [], (work / "scheduler.log").read_text()[-3000:]
