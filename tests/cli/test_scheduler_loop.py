"""Long-running paths through the real console script: `create --wait` and `scheduler run` until Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.cli.test_completion import det_k8s
from tests.conftest import example
from tests.support.k8s_emulator import node

EXP = example("experiments")


def start(args: list[str], kubeconfig: Path) -> subprocess.Popen[str]:
    # PYTHONFAULTHANDLER: a process that hangs says where each thread was (`ended`, and det-k8s's own last word)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "USER": "tester", "PYTHONFAULTHANDLER": "1"}
    return subprocess.Popen([det_k8s(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ended(process: subprocess.Popen[str], limit: float = 60.0) -> tuple[int, str]:
    """The exit code and stderr of a process told to stop; one still running after `limit` seconds (a guard against
    a hang, not a speed assertion) is made to dump every thread's stack (SIGABRT) and fails the test with it."""
    try:
        code = process.wait(limit)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            process.wait(10)
        finally:
            process.kill()
        raise AssertionError(f"still running {limit:.0f} s after being told to stop; its stderr and stacks:\n"
                             + (process.stderr.read() if process.stderr else "")) from None
    return code, process.stderr.read() if process.stderr else ""


def wait_until(condition, what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit  # a guard against hanging, not a speed assertion
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def queue_state(cluster, experiment: str) -> str | None:
    for cm in cluster.api.items("configmaps"):
        data = cm.get("data") or {}
        if "entry.json" in data and json.loads(data["entry.json"])["experiment"] == experiment:
            return json.loads(data["status.json"])["state"]
    return None


def test_create_wait_returns_once_the_group_is_placed(cluster, tmp_path):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    first = start(["experiment", "create", str(EXP / "distributed-12gpu-a.yaml"), "-f", str(settings)],
                  cluster.kubeconfig)
    assert first.wait(60) == 0
    waiting = start(["experiment", "create", str(EXP / "distributed-12gpu-b.yaml"), "-f", str(settings), "--wait",
                     "--timeout", "2m"], cluster.kubeconfig)
    wait_until(lambda: queue_state(cluster, "distributed-12gpu-b") == "queued", "b to be queued")
    assert waiting.poll() is None  # still waiting: a's pods hold every GPU
    for pod in cluster.api.items("pods"):  # a finishes
        cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Succeeded"}})
    assert waiting.wait(60) == 0, waiting.stderr.read() if waiting.stderr else ""
    assert queue_state(cluster, "distributed-12gpu-a") == "completed"
    assert queue_state(cluster, "distributed-12gpu-b") == "running"


def test_create_wait_times_out_with_the_reason_and_leaves_the_group_queued(cluster, tmp_path):
    cluster.api.put(node("gpu-0", gpus=4))
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    assert start(["experiment", "create", str(EXP / "small-4gpu.yaml"), "-f", str(settings)],
                 cluster.kubeconfig).wait(60) == 0
    late = start(["experiment", "create", str(EXP / "small-4gpu.yaml"), "-f", str(settings), "--wait", "--timeout",
                  "1s"], cluster.kubeconfig)
    assert late.wait(60) == 1
    err = late.stderr.read() if late.stderr else ""
    assert "is still queued after 1s: needs 1 pod x 4 nvidia.com/gpu" in err
    assert "it stays in the queue" in err
    states = [json.loads(cm["data"]["status.json"])["state"] for cm in cluster.api.items("configmaps")
              if "status.json" in (cm.get("data") or {})]
    assert sorted(states) == ["queued", "running"]


def test_scheduler_run_stops_on_ctrl_c_and_gives_the_lease_back(cluster):
    loop = start(["scheduler", "run", "--interval", "1"], cluster.kubeconfig)
    wait_until(lambda: cluster.api.get("leases", "det-k8s-scheduler") is not None, "a first pass")
    loop.send_signal(signal.SIGINT)
    code, err = ended(loop)
    assert code == 130, err  # like helm and kubectl: Ctrl-C ends it with 130 and no traceback
    assert "Traceback" not in err and "still running" not in err, err  # (not left by det-k8s's last word)
    assert not cluster.api.get("leases", "det-k8s-scheduler")["spec"].get("holderIdentity")


def test_ctrl_c_while_creating_a_group_leaves_no_pod_behind(cluster, tmp_path):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    # the third pod's creation happens on the server but its answer takes long: Ctrl-C lands meanwhile
    cluster.api.fail("POST", "pods", 500, "slow", after_write=True, delay=3.0, times=1,
                     name=None)
    create = start(["experiment", "create", str(EXP / "distributed-12gpu-a.yaml"), "-f", str(settings)],
                   cluster.kubeconfig)
    wait_until(lambda: len(cluster.api.items("pods")) >= 1, "a pod to be created")
    create.send_signal(signal.SIGINT)
    assert create.wait(60) == 130
    assert cluster.api.items("pods") == []


def _probe(port: int, path: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()
    except OSError:
        return 0, "not listening"


def test_the_loop_answers_readiness_and_liveness_probes_and_is_not_ready_once_stopping(cluster):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    held = cluster.api.pause("GET", "pods")  # the first listing of the cluster's pods takes a while
    loop = start(["scheduler", "run", "--interval", "1", "--health-port", str(port)], cluster.kubeconfig)
    try:
        assert held.reached.wait(60)
        wait_until(lambda: _probe(port, "/healthz")[0] == 200, "the probes to be answered while listing")
        assert _probe(port, "/readyz") == (503, "not ready: the first pass has not finished\n")
        held.release()
        wait_until(lambda: _probe(port, "/readyz")[0] == 200, "ready after the first pass")
        assert cluster.api.get("leases", "det-k8s-scheduler") is not None  # (a pass took the Lease)
        assert _probe(port, "/nope")[0] == 404
    finally:
        loop.send_signal(signal.SIGTERM)
    code, err = ended(loop)
    assert code == 143, err
    said = (loop.stdout.read() if loop.stdout else "") + err
    assert f"answering probes on port {port} (/readyz, /healthz)" in said and "Traceback" not in said


def test_the_probe_answers_follow_the_loop():
    from det_k8s.health import Health

    health = Health(stale_after=600)
    assert health.answer("/readyz")[0] == 503 and health.answer("/healthz")[0] == 200
    health.beat(ready=True)
    assert health.answer("/readyz") == (200, "ok\n")
    health.last_beat -= 601  # a loop stuck in a pass for longer than stale_after
    code, text = health.answer("/healthz")
    assert code == 503 and "has not moved for 601s" in text
    health.beat()
    assert health.answer("/healthz")[0] == 200 and health.answer("/readyz")[0] == 200  # ready stays ready
    stopping = Health(stale_after=600, stopping=lambda: True)
    stopping.beat(ready=True)
    assert stopping.answer("/readyz") == (503, "stopping\n")


def test_a_problem_that_lasts_is_said_once_not_every_pass(cluster):
    """No RBAC to patch nodes: the binding fence cannot be raised. The loop binds on and says so when it first
    finds it, not at every binding pass after."""
    from det_k8s.kube.api import KubeApi
    from tests.support.master_pods import create_task, master_task

    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    cluster.api.fail("PATCH", "nodes", 403, 'nodes "gpu-0" is forbidden: User "bob" cannot patch resource "nodes"',
                     times=1000)
    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig))
    loop = start(["scheduler", "run", "--interval", "1"], cluster.kubeconfig)
    try:
        for experiment in (1, 2):  # two trials, bound by two passes, each unable to fence
            task = create_task(api, master_task("0.38.1", experiment=experiment, slots_per_trial=4))
            wait_until(lambda t=task: all((cluster.api.get("pods", p["metadata"]["name"]) or {}).get("spec", {}).get(
                "nodeName") for p in t.pods), f"trial {experiment} bound")
    finally:
        loop.send_signal(signal.SIGINT)
    code, err = ended(loop)
    assert code == 130, err
    said = (loop.stdout.read() if loop.stdout else "") + err
    assert said.count("cannot taint nodes while binding") == 1, said


def test_a_loop_that_finds_the_lease_held_waits_instead_of_spinning(cluster):
    """Issue 24's review: after a fast pass, a loop skips its wait when a gang is ready already (a hold of the Lease
    consumed the wake-up); finding the Lease held by another client (a standby, `experiment create`) with a gang ready
    must not make it retry at once, over and over."""
    from det_k8s.kube.api import KubeApi
    from det_k8s.live.lease import SchedulingLease, lease_namespace
    from tests.support.master_pods import create_task, master_task

    cluster.api.put(node("gpu-0", gpus=4))
    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig))
    loop = start(["scheduler", "run", "--interval", "2"], cluster.kubeconfig)
    other = SchedulingLease(api, lease_namespace(), "experiment-create")
    try:
        first = create_task(api, master_task("0.38.1", experiment=1, slots_per_trial=4))
        wait_until(lambda: all((cluster.api.get("pods", p["metadata"]["name"]) or {}).get("spec", {}).get("nodeName")
                               for p in first.pods), "the first trial bound (a fast pass or a full one)")
        wait_until(other.try_acquire, "the Lease free for another client")
        before = len(cluster.api.calls)
        second = create_task(api, master_task("0.38.1", experiment=2, slots_per_trial=4))  # ready; no room: it waits
        time.sleep(2.0)  # the loop finds the Lease held meanwhile
        lease_reads = sum(1 for method, path, _ in cluster.api.calls[before:]
                          if method == "GET" and "/leases/" in path)
        assert lease_reads < 40, f"{lease_reads} reads of the Lease in 2 s: the loop spins"
        assert not any((cluster.api.get("pods", p["metadata"]["name"]) or {}).get("spec", {}).get("nodeName")
                       for p in second.pods)
    finally:
        other.release()
        loop.send_signal(signal.SIGINT)
    code, err = ended(loop)
    assert code == 130, err


def test_a_lingering_binding_taint_is_lowered_while_the_masters_gangs_keep_coming(cluster):
    """The loop puts off lowering a lingering binding taint while a gang of the master's is ready or on its way (the
    gang's binding goes first), but only by LOWER_LATE: a stream of pods that never pauses must not keep a node fenced
    against kube-scheduler for its whole length (`live/loop.py`)."""
    from det_k8s.kube.api import KubeApi
    from tests.support.master_pods import create_pods, create_task, master_task

    for i in range(5):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig))
    loop = start(["scheduler", "run", "--interval", "30"], cluster.kubeconfig)  # (no full pass meanwhile)
    try:
        wait_until(lambda: cluster.api.get("leases", "det-k8s-scheduler") is not None, "a first pass")
        first = create_task(api, master_task("0.38.1", experiment=1, slots_per_trial=4))
        wait_until(lambda: all((cluster.api.get("pods", p["metadata"]["name"]) or {}).get("spec", {}).get("nodeName")
                               for p in first.pods), "the first trial bound")
        (where,) = {cluster.api.get("pods", p["metadata"]["name"])["spec"]["nodeName"] for p in first.pods}
        assert any(method == "PATCH" and path.endswith(f"/nodes/{where}") for method, path, _ in cluster.api.calls)
        # a 16-pod gang whose pods come one by one, each within ARRIVING of the last: on its way throughout
        stream = master_task("0.38.1", experiment=2, slots_per_trial=16, max_slots_per_pod=1)
        create_task(api, stream, pods=1)
        lowered_at = None
        for n, pod in enumerate(stream.pods[1:], start=2):
            time.sleep(0.4)
            if lowered_at is None and not any(t.get("key") == "det-k8s.io/binding" for t in
                                              cluster.api.get("nodes", where)["spec"].get("taints") or ()):
                lowered_at = n
            create_pods(api, stream, [pod])
        # lingering 2 s, put off 1 s at most: down within 8 of the 16 pods' 0.4 s steps, long before the last one
        assert lowered_at is not None, f"{where}'s binding taint stayed up while the gang's 16 pods kept coming"
        wait_until(lambda: all((cluster.api.get("pods", p["metadata"]["name"]) or {}).get("spec", {}).get("nodeName")
                               for p in stream.pods), "the gang bound once complete")
    finally:
        loop.send_signal(signal.SIGINT)
    code, err = ended(loop)
    assert code == 130, err
