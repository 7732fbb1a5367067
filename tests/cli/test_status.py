"""status through the real entry point against the API emulator: readiness, address, logs and the diagnosis."""

from __future__ import annotations

import json

from tests.k8s_emulator import node, pod

IMAGE = "determinedai/determined-master:0.17.99-dev"


def deployment(*, ready: int = 0, pull_secret: str | None = None, tls: str | None = None) -> dict:
    spec: dict = {"containers": [{"name": "determined-master", "image": IMAGE}]}
    if pull_secret:
        spec["imagePullSecrets"] = [{"name": pull_secret}]
    if tls:
        spec["volumes"] = [{"name": "tls-secret", "secret": {"secretName": tls}}]
    return {"kind": "Deployment", "metadata": {"name": "determined-master-deployment-demo", "namespace": "default",
                                               "labels": {"app": "determined-master-demo", "release": "demo"}},
            "spec": {"replicas": 1, "template": {"spec": spec}}, "status": {"readyReplicas": ready}}


def master_pod(phase: str = "Running", *, waiting: str | None = None, message: str = "", restarts: int = 0,
               ready: bool = False) -> dict:
    state = {"waiting": {"reason": waiting, "message": message}} if waiting else {"running": {}}
    obj = pod("determined-master-deployment-demo-7d9-x2", phase=phase, labels={"app": "determined-master-demo"},
              node_name="cpu-0", container_statuses=[{"name": "determined-master", "restartCount": restarts,
                                                     "state": state}])
    obj["spec"]["containers"][0].update(name="determined-master", image=IMAGE)
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return obj


def service(cluster) -> None:
    cluster.api.put({"kind": "Service", "metadata": {"name": "determined-master-service-demo", "namespace": "default"},
                     "spec": {"type": "NodePort", "ports": [{"port": 8080, "nodePort": 30080}]}})
    cluster.api.put(node("cpu-0", addresses=[{"type": "ExternalIP", "address": "198.51.100.4"}]))


def test_image_pull_back_off_is_diagnosed_and_exits_1(run_cli, cluster):
    cluster.api.put(deployment(pull_secret="regcred"))
    cluster.api.put(master_pod("Pending", waiting="ImagePullBackOff",
                               message='Back-off pulling image "determinedai/determined-master:0.17.99-dev"'))
    service(cluster)
    result = run_cli("status", "demo")
    assert result.code == 1
    assert "Master:   0/1 ready (Deployment determined-master-deployment-demo)" in result.out
    assert "Address:  http://198.51.100.4:30080" in result.out
    assert f"Problem: pod determined-master-deployment-demo-7d9-x2 cannot pull image {IMAGE} (ImagePullBackOff)" \
        in result.out
    assert "  - appVersion 0.17.99-dev: is it a released Determined version?" in result.out
    assert "  - imageRegistry determinedai: does it host determined-master:0.17.99-dev?" in result.out
    assert "  - imagePullSecretName regcred: the Secret is MISSING in default" in result.out
    assert result.err.strip().splitlines()[-1] == "error: release demo is not healthy: 1 problem(s) found"


def test_a_healthy_master_exits_0_with_its_logs(run_cli, cluster):
    cluster.api.put(deployment(ready=1))
    cluster.api.put(master_pod(ready=True))
    cluster.api.pod_logs[("default", "determined-master-deployment-demo-7d9-x2")] = "master started\nlistening\n"
    service(cluster)
    result = run_cli("status", "demo")
    assert result.code == 0, result.err
    assert "Last master log lines:\n  master started\n  listening\n" in result.out
    assert "release demo is healthy" in result.err
    assert "Database: external (?)" in result.out  # no determined-db-deployment-demo here


def test_crash_loop_points_at_the_database(run_cli, cluster):
    cluster.api.put(deployment())
    cluster.api.put({"kind": "Deployment", "metadata": {"name": "determined-db-deployment-demo", "namespace": "default"}})
    cluster.api.put(pod("determined-db-deployment-demo-1", labels={"app": "determined-db-demo"}, phase="Pending"))
    cluster.api.put({"kind": "PersistentVolumeClaim", "metadata": {"name": "determined-db-pvc-demo",
                                                                   "namespace": "default"},
                     "spec": {"storageClassName": "gp3"}, "status": {"phase": "Pending"}})
    cluster.api.put({"kind": "StorageClass", "metadata": {"name": "standard"}})
    cluster.api.put({"kind": "Event", "metadata": {"name": "e1", "namespace": "default"}, "reason": "FailedScheduling",
                     "involvedObject": {"kind": "Pod", "name": "determined-db-deployment-demo-1"},
                     "message": 'pod has unbound immediate PersistentVolumeClaims'})
    cluster.api.put(master_pod(waiting="CrashLoopBackOff", restarts=4))
    cluster.api.pod_logs[("default", "determined-master-deployment-demo-7d9-x2")] = (
        "loading config\nFATA could not connect to database: dial tcp 10.96.0.12:5432: connect: connection refused\n")
    result = run_cli("status", "demo", "-o", "json")
    assert result.code == 1
    data = json.loads(result.out)
    problems = [p["problem"] for p in data["problems"]]
    assert problems[0].startswith("the master in pod determined-master-deployment-demo-7d9-x2 keeps crashing "
                                  "(CrashLoopBackOff, 4 restarts)")
    checks = data["problems"][0]["checks"]
    assert "the bundled database pod determined-db-deployment-demo-1 is Pending" in checks
    assert checks[-1].startswith("the master's log says: FATA could not connect to database")
    assert "pod determined-db-deployment-demo-1 is Pending: pod has unbound immediate PersistentVolumeClaims" in problems
    assert data["problems"][-1]["checks"] == ["storage class gp3 does not exist (classes: standard); set "
                                              "db.storageClassName to one of them"]
    assert data["healthy"] is False and data["database"]["bundled"] is True


def test_missing_release_is_one_line(run_cli, cluster):
    result = run_cli("status", "ghost")
    assert result.code == 1
    assert result.err.strip().splitlines() == [
        "error: release ghost: no master Deployment determined-master-deployment-ghost in namespace default; "
        "det-k8s list -A shows where Determined is installed"]


def test_forbidden_is_one_line_naming_the_context(run_cli, cluster):
    cluster.api.fail("GET", "deployments", 403, 'deployments.apps is forbidden: User "bob" cannot get resource')
    result = run_cli("status", "demo")
    assert result.code == 1 and len(result.err.strip().splitlines()) == 1
    assert "(context emulator)" in result.err and "Traceback" not in result.err
