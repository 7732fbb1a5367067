"""One install, gang scheduling included (issue 37, item 4), as an admin does it from the documentation: the "One
install" commands of docs/determined-master.md run as printed (`det-k8s install demo -f site.yaml --set
detK8sScheduler.image=... -n det --create-namespace`, then `det-k8s status demo -n det`), with real helm on PATH,
det-k8s's image built by scripts/image, a site.yaml of the test's own, and the bundled chart's defaults otherwise.

kwok stands in for the kubelets, so no pod in the cluster runs anything: the test plays the kubelet for the chart's
scheduler. It takes a pod the real Deployment controller made of the chart's Deployment `det-k8s-scheduler-demo`
(kube-scheduler placed it), and runs that pod's container with podman, as a kubelet would run it: the pod's
image, arguments, environment and security context, the pod's name as the host name, and a token of the pod's
ServiceAccount bound to that pod (the TokenRequest a kubelet makes) mounted with the CA and the namespace. The
host's network stands in for the pod's (the API server on 127.0.0.1 as KUBERNETES_SERVICE_HOST; the probes on
127.0.0.1 and a free port instead of 8081). Nothing else starts a scheduler: the master-shaped gang, shaped as the
release's master configuration says (default_scheduler, max_slots_per_pod), is bound whole by that container, which
then stops cleanly on SIGTERM within the pod's grace period and gives the Lease back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from det_k8s.chart.deploy import chart_name
from det_k8s.labels import SERVED_BY
from det_k8s.live.lease import LEASE_NAME, LeaseState
from tests.cli.test_documented_commands import Documented, page_commands
from tests.conftest import ROOT, TOOLS
from tests.real.test_release_lifecycle import MANUAL, volume
from tests.real.test_scheduler_image import ACCOUNT, _free_port, _ready, image, podman, running  # noqa: F401
from tests.support.master_pods import create_task, master_task

pytestmark = [pytest.mark.helm, pytest.mark.real]

IMAGE_SET = "detK8sScheduler.image="


def one_install() -> tuple[Documented, Documented, str]:
    """The documented install of the chart with the scheduler's image (docs/determined-master.md, "One install"), the
    `status` after it, and what the page shows `status` saying (its trailing comment)."""
    commands = page_commands(ROOT / "docs" / "determined-master.md")
    at = next(i for i, c in enumerate(commands) if c.argv[1:2] == ["install"] and any(
        a.startswith(IMAGE_SET) for a in c.argv))
    status = commands[at + 1]
    assert status.argv[1:2] == ["status"], status
    page, _, number = status.where.rpartition(":")
    line = (ROOT / page).read_text().splitlines()[int(number) - 1]
    shown = line.split("#", 1)[1].strip().removeprefix("...").removesuffix("...").strip()
    return commands[at], status, shown


def site_yaml(checkpoints: Path) -> str:
    """A site's settings: the database on a class with a volume made by hand (the cluster has no provisioner),
    checkpoints on a directory install's storage check can probe here."""
    return ("maxSlotsPerPod: 4\n"
            "initialUserPassword: Ch4nge-me-now-1\n"
            f"checkpointStorage: {{type: shared_fs, hostPath: {checkpoints}}}\n"
            "db: {password: Pw-db-123456, storageClassName: manual}\n")


def as_typed(argv: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """A documented command as an admin types it, in `cwd` (where site.yaml is): det-k8s and helm found on PATH, the
    kubeconfig the admin's (KUBECONFIG, the real control plane's)."""
    helm = TOOLS / "bin" / "helm"
    if not helm.exists():
        pytest.fail(f"{helm} missing: run scripts/fetch_tools.py (./scripts/test does it)")
    env = {k: v for k, v in os.environ.items() if k not in ("DET_K8S_HELM", "HELM_NAMESPACE", "HELM_KUBECONTEXT")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), str(helm.parent), env.get("PATH", "")])
    command = shutil.which(argv[0], path=env["PATH"])
    assert command, f"{argv[0]} is not on PATH beside {sys.executable}"
    return subprocess.run([command, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          start_new_session=True)


def pod_env(container: dict, pod: dict) -> dict[str, str]:
    """The container's environment as the kubelet gives it (values and the pod's own fields)."""
    fields = {"metadata.name": pod["metadata"]["name"], "metadata.namespace": pod["metadata"]["namespace"],
              "spec.nodeName": pod["spec"].get("nodeName", ""),
              "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "")}
    env = {}
    for item in container.get("env") or ():
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]  # the only source a scheduler pod may use here
            env[item["name"]] = fields[path]
    return env


def mount_account(plane, pod: dict, where: Path) -> Path:
    """The pod's ServiceAccount's files as the kubelet mounts them: a token bound to the pod, the CA, the
    namespace (readable by the image's user)."""
    ns, account = pod["metadata"]["namespace"], pod["spec"]["serviceAccountName"]
    status, body = plane.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3607, "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                               "name": pod["metadata"]["name"],
                                                               "uid": pod["metadata"]["uid"]}}})
    assert status < 300, body
    where.mkdir()
    (where / "token").write_text(body["status"]["token"])
    (where / "ca.crt").write_bytes(plane.pki.ca_cert.read_bytes())
    (where / "namespace").write_text(ns)
    for path in [where, *where.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return where


def as_the_kubelet(pod: dict, account: Path, api_port: int, health: int) -> list[str]:
    """`podman run` of the pod's one container, as its kubelet would run it (the host's network for the pod's)."""
    spec = pod["spec"]
    (container,) = spec["containers"]
    security, own = spec.get("securityContext") or {}, container.get("securityContext") or {}
    args = list(container.get("args") or ())
    args[args.index("--health-port") + 1] = str(health)  # host network: 8081 may be taken on this machine
    env = {**pod_env(container, pod), "KUBERNETES_SERVICE_HOST": "127.0.0.1",
           "KUBERNETES_SERVICE_PORT": str(api_port), "DET_K8S_HEALTH_ADDRESS": "127.0.0.1"}
    assert own.get("readOnlyRootFilesystem") is True and own["capabilities"]["drop"] == ["ALL"], own
    assert [v for v in spec["volumes"] if v["name"] == "tmp"] == [{"name": "tmp", "emptyDir": {}}]
    return ["podman", "run", "--rm", "--name", f"det-k8s-install-test-{uuid.uuid4().hex[:8]}",
            "--hostname", pod["metadata"]["name"], "--network", "host", "--pull", "never",
            "--user", f"{security['runAsUser']}:{security['runAsGroup']}", "--read-only", "--tmpfs", "/tmp",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--volume", f"{account}:{ACCOUNT}:ro",
            *(item for key, value in env.items() for item in ("--env", f"{key}={value}")),
            container["image"], *args]


def test_the_documented_install_with_the_built_image_gang_schedules_with_nothing_started_by_hand(
        image, real_cluster, tmp_path):  # noqa: F811 (the image test's fixture)
    from tests.support.k8s_emulator import node

    install, status_cmd, shown = one_install()
    argv = [f"{IMAGE_SET}{image}" if a.startswith(IMAGE_SET) else a for a in install.argv]
    release, ns = argv[2], argv[argv.index("-n") + 1]
    assert "-f" in argv and argv[argv.index("-f") + 1] == "site.yaml", install
    assert release == status_cmd.argv[2] and ns == status_cmd.argv[status_cmd.argv.index("-n") + 1], status_cmd
    real_cluster.api.namespaces.add(ns)  # removed after the test
    for i in range(2):
        real_cluster.api.put(node(f"gpu-{i}", gpus=4))
    real_cluster.api.let_controllers_see_new_nodes()  # before the chart's Deployments land on them
    real_cluster.api.put(MANUAL)
    pv = real_cluster.api.put(volume())["metadata"]["name"]
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (tmp_path / "site.yaml").write_text(site_yaml(checkpoints))
    timings = {}
    plane = real_cluster.plane
    try:
        started = time.monotonic()
        installed = as_typed(argv, tmp_path)
        timings["install"] = time.monotonic() - started
        assert installed.returncode == 0, installed.stderr + real_cluster.describe(ns)
        assert "detK8sScheduler.image" not in installed.stderr, installed.stderr  # not the placeholder: no warning

        # the chart's defaults: its scheduler serves the name the master gives its task pods
        name = chart_name(release)
        deployment = real_cluster.api.get("deployments", name, ns)
        assert deployment is not None, real_cluster.describe(ns)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == image
        config = yaml.safe_load(_secret(real_cluster, ns, f"determined-master-config-{release}", "master.yaml"))
        manager = config["resource_manager"]
        assert manager["default_scheduler"] == "coscheduler"
        args = container["args"]
        assert args[:2] == ["scheduler", "run"] and args[args.index("--scheduler-name") + 1] == "coscheduler", args

        replicas = deployment["spec"]["replicas"]
        real_cluster.wait_for("the scheduler's pods made by the Deployment controller and run by kwok", lambda: (
            real_cluster.api.get("deployments", name, ns) or {}).get("status", {}).get("readyReplicas") == replicas,
            timeout=90)
        pods = sorted((p for p in real_cluster.api.items("pods", ns) if p["metadata"]["name"].startswith(name + "-")
                       and p["metadata"].get("deletionTimestamp") is None), key=lambda p: p["metadata"]["name"])
        assert len(pods) == replicas, [p["metadata"]["name"] for p in pods]
        pod = pods[0]
        assert pod["spec"]["containers"][0]["image"] == image and pod["spec"].get("nodeName"), pod["spec"]
        account = mount_account(plane, pod, tmp_path / "serviceaccount")
        health = _free_port()
        run = as_the_kubelet(pod, account, plane.port, health)
        container_name = run[run.index("--name") + 1]
        user = f"system:serviceaccount:{ns}:{pod['spec']['serviceAccountName']}"
        log = tmp_path / "scheduler.log"
        with running(run, container_name, log) as loop:
            def said() -> str:
                return log.read_text(errors="replace")[-4000:]

            started = time.monotonic()
            real_cluster.wait_for("the chart's scheduler's /readyz (its first pass done)", lambda: _ready(health) or (
                loop.poll() is not None and pytest.fail(f"it exited {loop.returncode}:\n{said()}")), timeout=120)
            timings["ready"] = time.monotonic() - started

            def lease() -> dict:
                return real_cluster.api.get("leases", LEASE_NAME, "default") or {}

            me = f"{pod_env(container, pod)['USER']}@{pod['metadata']['name']}-"  # USER@<pod name>-<random>
            real_cluster.wait_for("the chart's scheduler in the Lease", lambda: me in LeaseState.of(lease()).holder + " "
                                  + str(((lease().get("metadata") or {}).get("annotations") or {}).get(SERVED_BY)),
                                  timeout=60)

            started = time.monotonic()
            task = create_task(real_cluster.connect(ns), master_task(
                "0.38.1", slots_per_trial=8, max_slots_per_pod=manager["max_slots_per_pod"],
                scheduler=manager["default_scheduler"], namespace=ns), job_controller=True)

            def gang() -> list[dict]:
                return [p for p in real_cluster.api.items("pods", ns)
                        if p["metadata"]["labels"].get("determined") == task.allocation]

            assert len(task.pods) == 2  # 8 slots, 4 a pod: both nodes
            real_cluster.wait_for("the master's gang bound whole by the chart's scheduler", lambda: len(gang()) == 2 and all(
                p["spec"].get("nodeName") for p in gang()), timeout=60)
            timings["bind"] = time.monotonic() - started
            assert {p["spec"]["nodeName"] for p in gang()} == {"gpu-0", "gpu-1"}, said()
            assert {p["spec"]["schedulerName"] for p in gang()} == {"coscheduler"}
            bindings = {e["objectRef"]["name"] for e in plane.audit(user) if e["verb"] == "create"
                        and (e.get("objectRef") or {}).get("subresource") == "binding"}
            assert bindings >= {p["metadata"]["name"] for p in gang()}, bindings  # bound by that container

            # `det-k8s status demo -n det`, as the page shows it
            deadline = time.monotonic() + 30
            while True:
                status = as_typed(status_cmd.argv, tmp_path, timeout=120)
                line = next((ln for ln in status.stdout.splitlines() if ln.startswith("Gang scheduler:")), "")
                if (status.returncode == 0 and me in line) or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert status.returncode == 0 and me in line, status.stdout + status.stderr
            fixed, _, lease_part = shown.partition(", ")
            assert line.startswith(fixed + ", "), (shown, line)
            # during a pass it holds the Lease (as the page shows), between passes it serves, the Lease free
            assert lease_part in line or (f"serving coscheduler ({me}" in line and "takes the Lease" in line), line

            stop = podman("kill", "--signal", "TERM", container_name, timeout=30)  # what the kubelet sends first
            assert stop.returncode == 0, stop.stderr
            grace = pod["spec"]["terminationGracePeriodSeconds"]
            started = time.monotonic()
            try:
                code = loop.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pytest.fail(f"still running {grace} s after SIGTERM (the pod's grace):\n{said()}")
            timings["stop"] = time.monotonic() - started
        assert code in (0, 143), said()
        assert me not in LeaseState.of(lease()).holder  # given back at once, for the other replica
        assert "Traceback" not in said(), said()
        assert plane.forbidden(user) == [], said()  # the chart's RBAC refused it nothing
        pod_names = {tuple((e["user"].get("extra") or {}).get("authentication.kubernetes.io/pod-name") or ())
                     for e in plane.audit(user)}
        assert pod_names == {(pod["metadata"]["name"],)}, pod_names  # as that pod, from the token mounted for it
        print(line)
        print("timings (s):", {k: round(v, 1) for k, v in timings.items()})
    finally:
        gone = as_typed(["det-k8s", "uninstall", release, "-n", ns, "--yes"], tmp_path)
        real_cluster.api.remove("persistentvolumes", pv, None)
    assert gone.returncode == 0, gone.stderr


def _secret(real_cluster, ns: str, name: str, key: str) -> str:
    import base64

    secret = real_cluster.api.get("secrets", name, ns)
    assert secret is not None, real_cluster.describe(ns)
    return base64.b64decode(secret["data"][key]).decode()
