"""det-k8s's image (scripts/image: deploy/Dockerfile on a Debian base made with debootstrap), run with podman as the
chart runs it, against the real control plane: the chart's Deployment's arguments, environment and security
context, the ServiceAccount's token and CA mounted where a pod has them, the API server named by
KUBERNETES_SERVICE_HOST/PORT. It serves its probes, takes the Lease, binds a master-shaped gang, and stops cleanly
on SIGTERM within the pod's grace period. And the image is small, runs as a non-root user and holds no build tools.

The image comes from the OCI archive scripts/image writes (dist/det-k8s-VERSION.oci.tar), loaded with podman.
Without podman, or without the archive, the tests skip with the reason; in CI (scripts/test builds the archive)
they must run."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from det_k8s import __version__
from det_k8s.chart.deploy import NAME, TERMINATION_GRACE_SECONDS, scheduler_manifests
from det_k8s.labels import SERVED_BY
from det_k8s.live.lease import LEASE_NAME, LeaseState
from tests.support.master_pods import create_task, master_task
from tests.support.needs import need

pytestmark = pytest.mark.real
ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "dist" / f"det-k8s-{__version__}.oci.tar"
TAG = f"localhost/det-k8s:{__version__}"
LIMIT_MB = 250  # the bound on the image's size
ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SA = f"system:serviceaccount:determined:{NAME}"


def podman_env() -> dict[str, str]:
    """podman with scripts/containers.conf (runc, cgroupfs, ulimits these machines allow), as scripts/image runs it."""
    return {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF") or str(ROOT / "scripts" /
                                                                                          "containers.conf")}


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=podman_env(),
                          start_new_session=True)


def _stale(archive: Path) -> list[str]:
    """What the image is built from, changed since the archive was written."""
    built = archive.stat().st_mtime
    sources = [ROOT / "deploy" / "Dockerfile", ROOT / "pyproject.toml", ROOT / "constraints.txt",
               *(ROOT / "det_k8s").rglob("*.py"), *(p for p in (ROOT / "templates").rglob("*") if p.is_file())]
    return [str(p.relative_to(ROOT)) for p in sources if p.stat().st_mtime > built]


@pytest.fixture(scope="module")
def image() -> str:
    """The image of the archive scripts/image wrote, loaded into podman."""
    need(shutil.which("podman") is not None, "podman is not installed: ./scripts/image installs it (apt-get, as "
         "root) and builds the image these tests run")
    info = podman("info", "--format", "{{.Host.OCIRuntime.Name}}")
    need(info.returncode == 0, "podman cannot run here: " + (info.stderr.strip().splitlines() or ["?"])[-1])
    need(ARCHIVE.is_file(), f"no image archive {ARCHIVE.relative_to(ROOT)}: ./scripts/image builds it")
    changed = _stale(ARCHIVE)
    need(not changed, f"{ARCHIVE.relative_to(ROOT)} is older than {changed[0] if changed else ''}: ./scripts/image "
         "builds it again")
    loaded = podman("load", "--input", str(ARCHIVE), timeout=600)
    assert loaded.returncode == 0, loaded.stderr
    assert TAG in loaded.stdout, loaded.stdout  # "Loaded image: localhost/det-k8s:VERSION"
    return TAG


def test_the_image_is_small_runs_as_a_non_root_user_and_holds_no_build_tools(image):
    size = int(podman("image", "inspect", "--format", "{{.Size}}", image).stdout)
    assert size < LIMIT_MB * 1000 * 1000, f"{size / 1e6:.0f} MB"
    assert podman("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip() == "10001:10001"
    who = podman("run", "--rm", "--network", "none", image, "--version")
    assert who.returncode == 0 and who.stdout.strip() == f"det-k8s {__version__}", who.stderr
    look = ("id -u; for t in pip pip3 gcc cc make apt-get; do command -v $t; done; "
            "ls /opt/det-k8s/bin; python3 -c 'import importlib.util as u; print(u.find_spec(\"pip\"))'")
    found = podman("run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", image, "-c", look)
    assert found.returncode == 0, found.stderr
    lines = found.stdout.split()
    assert lines[0] == "10001"
    assert not [t for t in lines if t.rsplit("/", 1)[-1] in ("pip", "pip3", "gcc", "cc", "make")], found.stdout
    assert lines[-1] == "None", found.stdout  # no pip module for the image's python either


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture
def shipped(real_cluster, tmp_path) -> dict:
    """The manifests of the chart's scheduler applied (but for its Deployment, whose pod podman stands in for), and
    the ServiceAccount's files as the kubelet mounts them: token, ca.crt, namespace (readable by the image's user)."""
    plane = real_cluster.plane
    real_cluster.api.namespaces.add("determined")
    plane.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "determined"}})
    deployment = None
    for doc in scheduler_manifests(TAG, "determined"):
        if doc["kind"] == "Deployment":
            deployment = doc
        else:
            plane.apply(doc)
    assert deployment is not None
    status, body = plane.request("POST", f"/api/v1/namespaces/determined/serviceaccounts/{NAME}/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 3600}})
    assert status < 300, body
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(body["status"]["token"])
    (account / "ca.crt").write_bytes(plane.pki.ca_cert.read_bytes())
    (account / "namespace").write_text("determined")
    for path in [account, *account.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return {"deployment": deployment, "account": account}


def _podman_run(image: str, deployment: dict, account: Path, port: int, health: int, name: str, host: str) -> list[str]:
    """`podman run` as the kubelet would run the Deployment's pod: its container's arguments and environment, its
    security context, /tmp its emptyDir, the ServiceAccount's files; the host's network to reach the API server on
    127.0.0.1, so the probes answer on 127.0.0.1 and on a free port instead of 8081."""
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    security = pod["securityContext"]
    args = list(container["args"])
    args[args.index("--health-port") + 1] = str(health)
    env = {**{e["name"]: e["value"] for e in container["env"]}, "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(port), "DET_K8S_HEALTH_ADDRESS": "127.0.0.1"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    return ["podman", "run", "--rm", "--name", name, "--hostname", host, "--network", "host", "--pull", "never",
            "--user", f"{security['runAsUser']}:{security['runAsGroup']}", "--read-only", "--tmpfs", "/tmp",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--volume", f"{account}:{ACCOUNT}:ro",
            *(item for key, value in env.items() for item in ("--env", f"{key}={value}")),
            image, *args]


def _lease(real_cluster) -> dict:
    return real_cluster.api.get("leases", LEASE_NAME, "default") or {}


@contextlib.contextmanager
def running(argv: list[str], name: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=podman_env(), start_new_session=True)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                podman("rm", "--force", "--time", "0", name, timeout=60)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=30)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def test_the_image_runs_as_the_charts_pod_serves_binds_a_gang_and_stops_on_sigterm(image, real_cluster, shipped,
                                                                                    tmp_path):
    from tests.support.k8s_emulator import node

    for i in range(2):
        real_cluster.api.put(node(f"gpu-{i}", gpus=4))
    health, name = _free_port(), f"det-k8s-image-test-{uuid.uuid4().hex[:8]}"
    host = f"{NAME}-5d8f7c6b9-{uuid.uuid4().hex[:5]}"  # the pod's name, as the Deployment's ReplicaSet names it
    argv = _podman_run(image, shipped["deployment"], shipped["account"], real_cluster.plane.port, health, name, host)
    log = tmp_path / "scheduler.log"
    with running(argv, name, log) as loop:
        def said() -> str:
            return log.read_text(errors="replace")[-4000:]

        real_cluster.wait_for("the scheduler's /readyz (its first pass done)", lambda: _ready(health) or (
            loop.poll() is not None and pytest.fail(f"it exited {loop.returncode}:\n{said()}")), timeout=120)
        assert f"answering probes on port {health}" in said()
        real_cluster.wait_for("the scheduler in the Lease", lambda: f"{NAME}@{host}-" in (
            LeaseState.of(_lease(real_cluster)).holder + " " + str(
                (_lease(real_cluster).get("metadata") or {}).get("annotations", {}).get(SERVED_BY))), timeout=60)
        task = create_task(real_cluster.connect("determined"),
                           master_task("0.38.1", slots_per_trial=8, namespace="determined"), job_controller=True)
        real_cluster.wait_for("the master's gang bound whole by the image's scheduler", lambda: all(
            p["spec"].get("nodeName") for p in real_cluster.api.items("pods", "determined")
            if p["metadata"]["labels"].get("determined") == task.allocation), timeout=60)
        bound = {p["spec"]["nodeName"] for p in real_cluster.api.items("pods", "determined")
                 if p["metadata"]["labels"].get("determined") == task.allocation}
        assert bound == {"gpu-0", "gpu-1"}, said()
        started = time.monotonic()
        stop = podman("kill", "--signal", "TERM", name, timeout=30)  # what the kubelet sends first
        assert stop.returncode == 0, stop.stderr
        try:
            code = loop.wait(timeout=TERMINATION_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {TERMINATION_GRACE_SECONDS} s after SIGTERM (the pod's grace):\n{said()}")
        took = time.monotonic() - started
    assert code in (0, 143), said()
    assert took < TERMINATION_GRACE_SECONDS
    holder = LeaseState.of(_lease(real_cluster)).holder
    assert f"{NAME}@{host}-" not in holder, holder  # released at once, for the other replica
    assert real_cluster.plane.forbidden(SA) == [], said()
    assert len(real_cluster.plane.audit(SA)) > 5  # it really ran as the ServiceAccount, from the mounted token
    assert "Traceback" not in said()
