"""The release lifecycle of the bundled chart through real helm 3 and 4 into the real API server (tests/realkube):
the Deployment controller makes the master's and database's pods, kube-scheduler places them on kwok's nodes, kwok
runs them, and the PersistentVolume controller binds the database's claim.

Issue 24 found two defects this way, both fixed and proven here: `upgrade`/`rollback` always failed where no load
balancer answers (helm's --wait waited for the master Service's address), and `install` let a database volume that
can never bind through (no default StorageClass, db.storageClassName unset).
"""

from __future__ import annotations

import json
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


@pytest.fixture
def site(tmp_path, real_cluster):
    from tests.k8s_emulator import node

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
    """No node can hold the master (it asks 64 CPUs): the wait ends naming the Deployment and kube-scheduler's own
    reason, from the pod's events, not helm's bare `context deadline exceeded`."""
    real_cluster.api.put(MANUAL)
    real_cluster.api.put(volume())
    result = run_cli("install", "demo", "-f", site, "--set", "masterCpuRequest=64", "-n", ns, "--create-namespace",
                     "--skip-storage-check", "--wait", "--timeout", "15s", "--helm-binary", helm)
    assert result.code == 1, result.err
    line = result.err.strip().splitlines()[-1]
    assert line.startswith("error: release demo is not ready after 15s: Deployment determined-master-deployment-demo:"
                           " 0 of 1 replica(s) available")
    assert "Insufficient cpu" in line
