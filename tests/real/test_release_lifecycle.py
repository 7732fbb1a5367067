"""The release lifecycle of the bundled chart through real helm 3 and 4 into the real API server (tests/support/realkube):
the Deployment controller makes the master's and database's pods, kube-scheduler places them on kwok's nodes, kwok
runs them, and the PersistentVolume controller binds the database's claim.

Issue 24 found two defects this way, both fixed and proven here: `upgrade`/`rollback` always failed where no load
balancer answers (helm's --wait waited for the master Service's address), and `install` let a database volume that
can never bind through (no default StorageClass, db.storageClassName unset).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = [pytest.mark.helm, pytest.mark.real]

SITE = """maxSlotsPerPod: 4
initialUserPassword: Ch4nge-me-now-1
checkpointStorage: {type: s3, bucket: det-checkpoints}
db: {password: Pw-db-123456, storageClassName: manual}
"""
MANUAL = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "manual"},
          "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"}


def volume() -> dict:
    """A PersistentVolume made by hand (a class without a provisioner), named anew each time: the last test's is
    still being released."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"db-{uuid.uuid4().hex[:8]}"},
            "spec": {"storageClassName": "manual", "capacity": {"storage": "50Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/tmp/det-db"}}}


def _cpu_requests(pod: dict) -> int:
    from det_k8s.quantity import parse_quantity

    return sum(int(parse_quantity(str(((c.get("resources") or {}).get("requests") or {}).get("cpu") or "0")) * 1000)
               for c in pod["spec"].get("containers") or ())


def hog(real_cluster, ns: str, leave: str, *, gone: str | None = None) -> list[str]:
    """A pod bound to each node holding all of its CPU but `leave` (pods whose name starts with `gone` counted as
    gone: the master's, which an upgrade's Recreate removes first); their names, in namespace hog-<ns>."""
    from det_k8s.quantity import parse_quantity
    from tests.support.k8s_emulator import pod

    made = []
    pods = [p for p in real_cluster.api.items("pods") if p["status"].get("phase") not in ("Succeeded", "Failed")]
    for node in real_cluster.api.items("nodes"):
        name = node["metadata"]["name"]
        used = sum(_cpu_requests(p) for p in pods if p["spec"].get("nodeName") == name
                   and not (gone and p["metadata"]["name"].startswith(gone)))
        free = int(parse_quantity(node["status"]["allocatable"]["cpu"]) * 1000) - used - int(
            parse_quantity(leave) * 1000)
        if free > 0:
            real_cluster.api.put(pod(f"hog-{name}", namespace=f"hog-{ns}", node_name=name,
                                     requests={"cpu": f"{free}m"}))
            made.append(f"hog-{name}")
    return made


def unhog(real_cluster, ns: str, names: list[str]) -> None:
    for name in names:
        real_cluster.api.remove("pods", name, f"hog-{ns}")
    real_cluster.wait_for("the hogs gone", lambda: not real_cluster.api.items("pods", f"hog-{ns}"), timeout=60)


def helm_history(helm, ns: str) -> list[dict]:
    """What the real helm itself says of release demo."""
    done = subprocess.run([str(helm), "history", "demo", "-n", ns, "-o", "json"], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)


def helm_status(helm, ns: str) -> dict:
    done = subprocess.run([str(helm), "status", "demo", "-n", ns, "-o", "json"], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)


def seen_ready(real_cluster, ns: str) -> dict[int, str | None]:
    """Each revision's det-k8s.io/seen-ready label, as helm's release Secrets carry it."""
    return {int(s["metadata"]["labels"]["version"]): s["metadata"]["labels"].get("det-k8s.io/seen-ready")
            for s in real_cluster.api.items("secrets", ns) if s["metadata"].get("labels", {}).get("owner") == "helm"}


MASTER = "determined-master-deployment-demo"


@pytest.fixture
def site(tmp_path, real_cluster):
    from tests.support.k8s_emulator import node

    for i in range(2):
        real_cluster.api.put(node(f"cpu-{i}", gpus=4))
    real_cluster.api.let_controllers_see_new_nodes()  # before the chart's Deployments land on them
    path = tmp_path / "site.yaml"
    path.write_text(SITE)
    return path


@pytest.fixture
def ns(real_cluster) -> str:
    """A namespace of the test's own: the last test's is still being deleted."""
    name = f"detrel-{uuid.uuid4().hex[:6]}"
    real_cluster.api.namespaces.add(name)
    return name


def test_a_database_volume_that_can_never_bind_stops_install_before_helm(run_cli, real_cluster, site, helm, ns):
    result = run_cli("install", "demo", "-f", site, "-n", ns, "--create-namespace", "--skip-storage-check",
                     "--helm-binary", helm)
    assert result.code == 1
    assert ("error: db.storageClassName: StorageClass manual does not exist: the database volume would stay Pending "
            "and the database never start") in result.err
    assert real_cluster.api.get("namespaces", ns, None) is None  # nothing was changed
    unset = site.parent / "unset.yaml"
    unset.write_text(SITE.replace(", storageClassName: manual", ""))
    result = run_cli("install", "demo", "-f", unset, "-n", ns, "--create-namespace", "--skip-storage-check",
                     "--helm-binary", helm)
    assert result.code == 1 and "db.storageClassName is unset and the cluster has no default StorageClass" in result.err


def test_install_upgrade_rollback_uninstall_with_no_load_balancer(run_cli, real_cluster, site, helm, ns):
    real_cluster.api.put(MANUAL)
    real_cluster.api.put(volume())
    args = ("-n", ns, "--skip-storage-check", "--helm-binary", helm)
    installed = run_cli("install", "demo", "-f", site, "--create-namespace", "--wait", "--timeout", "5m", *args)
    assert installed.code == 0, installed.err + real_cluster.describe(ns)
    assert "Master: the load balancer has no address yet" in installed.err  # none will come: nothing waits for it
    deployment = real_cluster.api.get("deployments", "determined-master-deployment-demo", ns)
    assert deployment["status"]["availableReplicas"] == 1  # the real Deployment controller, kwok's pod
    claim = real_cluster.api.get("persistentvolumeclaims", "determined-db-pvc-demo", ns)
    assert claim["status"]["phase"] == "Bound"

    status = run_cli("status", "demo", "-n", ns)
    assert status.code == 0 and "Master:   1/1 ready" in status.out and "release demo is healthy" in status.err

    upgraded = run_cli("upgrade", "demo", "-f", site, "--set", "maxSlotsPerPod=2", "--yes", "--timeout", "5m", *args)
    # (helm --wait failed here with `context deadline exceeded`)
    assert upgraded.code == 0, upgraded.err + real_cluster.describe(ns)
    assert "context deadline exceeded" not in upgraded.err
    history = run_cli("history", "demo", "-n", ns, "-o", "json", "--helm-binary", helm)
    assert [r["status"] for r in json.loads(history.out)] == ["superseded", "deployed"]

    rolled = run_cli("rollback", "demo", "--yes", "--timeout", "5m", *args)
    assert rolled.code == 0, rolled.err + real_cluster.describe(ns)
    assert f"Rolled back release demo in namespace {ns} to revision 1" in rolled.err
    values = run_cli("get", "values", "demo", "-n", ns, "-o", "json", "--helm-binary", helm)
    assert json.loads(values.out)["maxSlotsPerPod"] == 4

    gone = run_cli("uninstall", "demo", "-n", ns, "--yes", "--helm-binary", helm)
    assert gone.code == 0, gone.err
    assert real_cluster.api.get("deployments", "determined-master-deployment-demo", ns) is None
    assert real_cluster.api.get("persistentvolumeclaims", "determined-db-pvc-demo", ns) is not None  # kept


def test_a_wait_that_runs_out_names_what_is_not_ready(run_cli, real_cluster, site, helm, ns):
    """No node has room for the master (other pods hold the CPU it asks; a master larger than any node is refused by
    the preflight, test_a_master_or_database_that_fits_no_node_or_quota_is_refused_before_helm): the wait ends
    naming the Deployment and kube-scheduler's own reason, from the pod's events, not helm's bare `context deadline
    exceeded`."""
    real_cluster.api.put(MANUAL)
    real_cluster.api.put(volume())
    hog(real_cluster, ns, leave="1")
    result = run_cli("install", "demo", "-f", site, "-n", ns, "--create-namespace",
                     "--skip-storage-check", "--wait", "--timeout", "15s", "--helm-binary", helm)
    assert result.code == 1, result.err
    line = result.err.strip().splitlines()[-1]
    assert line.startswith("error: release demo is not ready after 15s: Deployment determined-master-deployment-demo:"
                           " 0 of 1 replica(s) available")
    assert "Insufficient cpu" in line



def test_a_failed_upgrade_is_failed_in_helms_record_and_rollback_goes_to_the_last_ready(run_cli, real_cluster, site,
                                                                                          helm, ns):
    """Issue 38, items 1, 4 and 6. det-k8s waits for the master itself, so helm recorded an upgrade whose master never
    became ready as `deployed ... Upgrade complete`, and `rollback` (the previous revision) landed on another one
    that never became ready. Now: the revision is failed in helm's own record (the real helm 3 and 4 say so in
    `history` and `status`), the wait says what it waits for and why at least every 20 s, `rollback` goes to the last
    revision det-k8s saw ready and says which, --atomic rolls back there, and `uninstall --delete-data` names the
    Retain PersistentVolume that keeps the records."""
    real_cluster.api.put(MANUAL)
    pv = real_cluster.api.put(volume())["metadata"]["name"]
    args = ("-n", ns, "--skip-storage-check", "--helm-binary", helm)
    installed = run_cli("install", "demo", "-f", site, "--create-namespace", "--wait", "--timeout", "5m", *args)
    assert installed.code == 0, installed.err + real_cluster.describe(ns)
    assert seen_ready(real_cluster, ns) == {1: "1"}
    hogs = hog(real_cluster, ns, leave="3", gone=MASTER)  # the master (2 CPUs) fits again once it is gone, 4 do not

    failed = run_cli("upgrade", "demo", "-f", site, "--set", "masterCpuRequest=4", "--yes", "--timeout", "25s", *args)
    assert failed.code == 1, failed.err
    talk = [ln for ln in failed.err.splitlines() if ln.startswith(f'Waiting for deployment "{MASTER}" rollout')]
    assert len(talk) >= 2, failed.err  # at its first look, then at least every 20 s
    assert any("is not scheduled: 0/2 nodes are available: 2 Insufficient cpu" in ln for ln in talk), talk  # why
    assert "warning: revision 2 marked failed in helm's record" in failed.err
    assert failed.err.strip().splitlines()[-1].startswith("error: release demo is not ready after 25s")
    history = helm_history(helm, ns)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "failed")]
    assert history[1]["description"].startswith("det-k8s: upgrade not ready: release demo is not ready after 25s")
    assert helm_status(helm, ns)["info"]["status"] == "failed"
    listed = run_cli("history", "demo", "-n", ns, "-o", "json", "--helm-binary", helm)
    assert [r["status"] for r in json.loads(listed.out)] == ["superseded", "failed"]

    again = run_cli("upgrade", "demo", "-f", site, "--set", "masterCpuRequest=5", "--yes", "--timeout", "10s", *args)
    history = helm_history(helm, ns)  # helm itself marks the revision an upgrade leaves superseded, failed or not
    assert again.code == 1 and [h["status"] for h in history] == ["superseded", "superseded", "failed"]
    assert history[1]["description"].startswith("det-k8s: upgrade not ready")  # what det-k8s saw stays said
    rolled = run_cli("rollback", "demo", "--yes", "--timeout", "3m", *args)  # neither 3 nor 2 was ever ready
    assert rolled.code == 0, rolled.err + real_cluster.describe(ns)
    assert "Going back to revision 1: the last revision det-k8s saw ready" in rolled.err
    assert [h["status"] for h in helm_history(helm, ns)] == ["superseded", "superseded", "failed", "deployed"]
    assert seen_ready(real_cluster, ns)[4] == "4"
    assert helm_status(helm, ns)["info"]["status"] == "deployed"

    undone = run_cli("upgrade", "demo", "-f", site, "--set", "masterCpuRequest=4", "--yes", "--atomic", "--timeout",
                     "10s", *args)
    assert undone.code == 1
    assert "warning: demo did not become ready: rolling back to revision 4 (--rollback-on-failure)" in undone.err
    history = helm_history(helm, ns)
    assert [(h["revision"], h["status"]) for h in history][-2:] == [(5, "failed"), (6, "deployed")]
    assert history[-1]["description"] == "Rollback to 4"
    real_cluster.wait_for("the master back", lambda: (real_cluster.api.get("deployments", MASTER, ns) or {}).get(
        "status", {}).get("availableReplicas") == 1, timeout=120)
    unhog(real_cluster, ns, hogs)

    gone = run_cli("uninstall", "demo", "-n", ns, "--yes", "--delete-data", "--helm-binary", helm)
    assert gone.code == 0, gone.err
    assert (f"the PersistentVolume {pv} (reclaimPolicy Retain) with every experiment record on it: it stays, "
            "Released, once its claim is deleted") in gone.err
    assert f"Deleted the database volume claim determined-db-pvc-demo; the PersistentVolume {pv}" in gone.err
    assert "permanently deletes" not in gone.err
    real_cluster.wait_for("the volume Released", lambda: (real_cluster.api.get("persistentvolumes", pv, None) or {}).get(
        "status", {}).get("phase") == "Released", timeout=60)


def _det(args: list, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "det_k8s", *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _stop_when(proc: subprocess.Popen, seen: str, sig: int, timeout: float = 240) -> tuple[list[str], str]:
    """Read det-k8s's stderr until a line holds `seen`, send `sig`, and return the lines read and the rest."""
    lines = []
    deadline = time.monotonic() + timeout
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if seen in line:
            proc.send_signal(sig)
            break
    else:
        proc.kill()
    _, rest = proc.communicate(timeout=90)
    return lines, rest


@pytest.mark.parametrize("undo", [False, True], ids=["named", "rolled-back"])
def test_a_stopped_upgrade_is_failed_in_helms_record_and_undone_or_named(real_cluster, site, helm, ns, undo):
    """Issue 38, item 2: Ctrl-C while det-k8s waited for an upgraded master left revision 2 `deployed`, the old master
    already replaced and the new one Pending, and said only `interrupted`. Now the last line states the release's
    state read back from helm and the cluster and the command that restores service, or, with
    --rollback-on-failure, that it was rolled back and the master serves."""
    real_cluster.api.put(MANUAL)
    real_cluster.api.put(volume())
    env = {**os.environ, "KUBECONFIG": str(real_cluster.kubeconfig), "DET_K8S_HELM": str(helm)}
    common = ["-n", ns, "--skip-storage-check"]
    installed = subprocess.run([sys.executable, "-m", "det_k8s", "install", "demo", "-f", site, "--create-namespace",
                                "--wait", "--timeout", "5m", *common], env=env, capture_output=True, text=True,
                               timeout=400)
    assert installed.returncode == 0, installed.stderr
    hog(real_cluster, ns, leave="3", gone=MASTER)
    proc = _det(["upgrade", "demo", "-f", site, "--set", "masterCpuRequest=4", "--yes", "--timeout", "5m", *common,
                 *(["--rollback-on-failure"] if undo else [])], env)
    lines, rest = _stop_when(proc, f'Waiting for deployment "{MASTER}" rollout', signal.SIGINT)
    assert proc.returncode == 130, "\n".join(lines) + rest
    assert "Traceback" not in rest
    last = rest.strip().splitlines()[-1]
    history = [h["status"] for h in helm_history(helm, ns)]
    if not undo:
        assert last.startswith(f"interrupted: revision 2 marked failed in helm's record; release demo in namespace "
                               f"{ns} is failed at revision 2 in helm's record; Deployment {MASTER}: "), last
        assert last.endswith(f"; to restore service, run: det-k8s rollback demo 1 -n {ns}"), last
        assert history == ["superseded", "failed"]
        fixed = subprocess.run([sys.executable, "-m", "det_k8s", "rollback", "demo", "1", "--yes", "--timeout", "3m",
                                *common], env=env, capture_output=True, text=True, timeout=300)
        assert fixed.returncode == 0, fixed.stderr
    else:
        assert last == (f"interrupted: revision 2 marked failed in helm's record; rolled back to revision 1 "
                        f"(--rollback-on-failure); release demo in namespace {ns} is deployed at revision 3 in helm's "
                        f"record; the master serves (Deployment {MASTER})"), last
        assert history == ["superseded", "failed", "deployed"]
    assert (real_cluster.api.get("deployments", MASTER, ns) or {})["status"].get("availableReplicas") == 1


def test_a_stopped_first_install_names_the_failed_release_and_its_recovery(run_cli, real_cluster, site, helm, ns):
    """Issue 38, item 2: a first install stopped while its master could not start (SIGTERM), and helm's record of it
    failed with no master Deployment (as helm leaves an install it was stopped in before it created the objects):
    the last line and `status` name the failed release and the command that recovers it, and that command does."""
    real_cluster.api.put(MANUAL)
    real_cluster.api.put(volume())
    hogs = hog(real_cluster, ns, leave="1")
    env = {**os.environ, "KUBECONFIG": str(real_cluster.kubeconfig), "DET_K8S_HELM": str(helm)}
    common = ["-n", ns, "--skip-storage-check"]
    proc = _det(["install", "demo", "-f", site, "--create-namespace", "--wait", "--timeout", "5m", *common], env)
    lines, rest = _stop_when(proc, f'Waiting for deployment "{MASTER}" rollout', signal.SIGTERM)
    assert proc.returncode == 143, "\n".join(lines) + rest
    last = rest.strip().splitlines()[-1]
    assert last.startswith(f"stopped by SIGTERM: revision 1 marked failed in helm's record; release demo in namespace "
                           f"{ns} is failed at revision 1 in helm's record;"), last
    assert last.endswith(f"to restore service, run: det-k8s uninstall demo -n {ns}; then install again"), last
    assert [h["status"] for h in helm_history(helm, ns)] == ["failed"]
    real_cluster.api.remove("deployments", MASTER, ns)
    real_cluster.wait_for("the master Deployment gone", lambda: real_cluster.api.get("deployments", MASTER, ns) is None)
    said = run_cli("status", "demo", "-n", ns)
    assert said.code == 1
    assert said.err.strip().splitlines()[-1] == (
        f"error: release demo: no master Deployment {MASTER} in namespace {ns}; helm's record: revision 1 is failed; "
        f"to restore service, run: det-k8s uninstall demo -n {ns}; then install again")
    unhog(real_cluster, ns, hogs)
    assert run_cli("uninstall", "demo", "-n", ns, "--yes", "--helm-binary", helm).code == 0
    again = run_cli("install", "demo", "-f", site, "--wait", "--timeout", "5m", *common, "--helm-binary", helm)
    assert again.code == 0, again.err + real_cluster.describe(ns)


def test_a_master_or_database_that_fits_no_node_or_quota_is_refused_before_helm(run_cli, real_cluster, site, helm,
                                                                                 ns):
    """Issue 38, item 3: a 9-CPU master on 8-CPU nodes passed the preflight and stayed Pending; the preflight now asks
    of the chart's own pods what it asks of task slots (allocatable), and the namespace's ResourceQuotas."""
    real_cluster.api.put(MANUAL)
    real_cluster.api.put(volume())
    args = ("-n", ns, "--skip-storage-check", "--helm-binary", helm)
    big = run_cli("install", "demo", "-f", site, "--set", "masterCpuRequest=9", "--set", "masterCpuLimit=9",
                  "--create-namespace", *args)
    assert big.code == 1
    assert ("error: masterCpuRequest: 9: the master's pod asks more cpu than any node of cluster real can give (the "
            "most allocatable cpu: 7910m, of 2 node(s) it may run on)") in big.err, big.err
    assert real_cluster.api.get("namespaces", ns, None) is None  # nothing was changed
    db = run_cli("install", "demo", "-f", site, "--set", "db.memRequest=64Gi", "--create-namespace", *args)
    assert db.code == 1 and "error: db.memRequest: 64Gi: the database's pod asks more memory" in db.err, db.err
    real_cluster.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    real_cluster.api.put({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "small", "namespace": ns},
                          "spec": {"hard": {"requests.cpu": "3"}}})
    real_cluster.wait_for("the quota's status", lambda: (real_cluster.api.get(
        "resourcequotas", "small", ns) or {}).get("status", {}).get("hard"))
    quota = run_cli("install", "demo", "-f", site, *args)
    assert quota.code == 1
    assert ("error: masterCpuRequest: ResourceQuota small in namespace " + ns + " would refuse the master's pod and "
            "the database's pod: requests.cpu 0 used of 3, and the master's pod and the database's pod add 4") \
        in quota.err, quota.err
    assert not [s for s in real_cluster.api.items("secrets", ns) if s["metadata"]["name"].startswith("sh.helm")]
