"""One install gives gang scheduling (issue 25): the bundled chart deploys det-k8s's scheduler with its
ServiceAccount and RBAC, on the real API server through real helm. kwok runs no containers, so the test stands in for
the scheduler pod's container as kwok stands in for its kubelet: it runs `det-k8s` with the container's arguments
and environment, as the chart's ServiceAccount, with the pod's name as its host name (a UTS namespace of its own).
Then it binds a trial of the master, `status` sees the Deployment ready and serving, and the audit log shows the
chart's RBAC refused nothing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.real.test_release_lifecycle import MANUAL, SITE, volume
from tests.support.master_pods import create_task, master_task
from tests.support.needs import need

pytestmark = [pytest.mark.helm, pytest.mark.real]


def test_the_charts_scheduler_holds_the_lease_with_the_charts_rbac(run_cli, real_cluster, helm4, tmp_path):
    from tests.support.k8s_emulator import node

    need(shutil.which("unshare") is not None, "unshare (util-linux) runs the scheduler under the pod's host name")
    ns = f"chart-{uuid.uuid4().hex[:6]}"
    real_cluster.api.namespaces.add(ns)
    for i in range(2):
        real_cluster.api.put(node(f"cpu-{i}", gpus=4))
    real_cluster.api.let_controllers_see_new_nodes()  # before the chart's Deployments land on them
    real_cluster.api.put(MANUAL)
    real_cluster.api.put(volume())
    site = tmp_path / "site.yaml"
    site.write_text(SITE + "defaultScheduler: coscheduler\n")
    installed = run_cli("install", "demo", "-f", site, "-n", ns, "--create-namespace", "--skip-storage-check",
                        "--wait", "--timeout", "5m", "--helm-binary", helm4)
    assert installed.code == 0, installed.err + real_cluster.describe(ns)
    (deployment,) = [d for d in real_cluster.api.items("deployments", ns)
                     if "scheduler" in d["metadata"]["name"] and "master" not in d["metadata"]["name"]]
    real_cluster.wait_for("the scheduler's pod running (kwok)", lambda: (real_cluster.api.get(
        "deployments", deployment["metadata"]["name"], ns) or {}).get("status", {}).get("readyReplicas"), timeout=60)
    template = deployment["spec"]["template"]["spec"]
    account = template["serviceAccountName"]
    (container,) = template["containers"]
    pods = [p for p in real_cluster.api.items("pods", ns) if p["metadata"]["name"].startswith(
        deployment["metadata"]["name"] + "-")]
    pod_name = pods[0]["metadata"]["name"]
    kubeconfig = real_cluster.plane.service_account_kubeconfig(ns, account, tmp_path / "sa.kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           **{e["name"]: e["value"] for e in container.get("env") or () if "value" in e}}
    args = [a for a in container.get("args") or ()]
    assert args[:2] == ["scheduler", "run"]
    as_the_pod = ("import os, socket, sys; socket.sethostname(sys.argv[1]); "
                  "os.execv(sys.executable, [sys.executable, '-m', 'det_k8s', *sys.argv[2:]])")
    loop = subprocess.Popen(["unshare", "--uts", sys.executable, "-c", as_the_pod, pod_name, *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        task = create_task(real_cluster.connect(ns), master_task("0.38.1", slots_per_trial=4, namespace=ns),
                           job_controller=True)
        real_cluster.wait_for("the chart's scheduler to bind the master's trial", lambda: all(
            p["spec"].get("nodeName") for p in real_cluster.api.items("pods", ns)
            if p["metadata"]["labels"].get("determined") == task.allocation), timeout=60)
        deadline = time.monotonic() + 60
        while True:
            status = run_cli("status", "demo", "-n", ns)
            if ("serving coscheduler" in status.out or "holds the Lease" in status.out
                    or time.monotonic() > deadline or loop.poll() is not None):
                break
            time.sleep(1)
        if "serving coscheduler" not in status.out and "holds the Lease" not in status.out:
            loop.terminate()
            raise AssertionError(status.out + loop.communicate(timeout=30)[1][-3000:])
        line = next(ln for ln in status.out.splitlines() if ln.startswith("Gang scheduler:"))
        # between passes it serves (the Lease free, naming it); during a pass it holds the Lease
        assert f"ready (Deployment {deployment['metadata']['name']})" in line, line
        assert (f", serving coscheduler (det-k8s-scheduler@{pod_name}-" in line and "takes the Lease" in line) or (
            f", holds the Lease default/det-k8s-scheduler (det-k8s-scheduler@{pod_name}-" in line), line
    finally:
        if loop.poll() is None:
            os.killpg(loop.pid, signal.SIGTERM)
        _, err = loop.communicate(timeout=60)
    assert loop.returncode in (0, 143), err
    user = f"system:serviceaccount:{ns}:{account}"
    assert real_cluster.plane.forbidden(user) == [], err
    assert len(real_cluster.plane.audit(user)) > 5
    assert "holds the Lease" not in run_cli("status", "demo", "-n", ns).out  # free at once on SIGTERM
