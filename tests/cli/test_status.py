"""status through the real entry point against the API emulator: readiness, address, logs and the diagnosis."""

from __future__ import annotations

import json

from tests.support.k8s_emulator import node, pod

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


def scheduler_deployment(ready: int) -> dict:
    """det-k8s's scheduler as the bundled chart deploys it for release demo (its Lease in det-system)."""
    from det_k8s.chart.deploy import scheduler_manifests

    (found,) = [d for d in scheduler_manifests("det-k8s:0.1", "default", name="det-k8s-scheduler-demo",
                                               cluster_name="det-k8s-scheduler-default-demo", instance="demo",
                                               lease_namespace="det-system") if d["kind"] == "Deployment"]
    return {**found, "status": {"readyReplicas": ready}}


def lease(holder: str, *, age: int = 1) -> dict:
    from datetime import UTC, datetime, timedelta

    renewed = (datetime.now(UTC) - timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    until = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "det-k8s-scheduler", "namespace": "det-system",
                         "annotations": {"det-k8s.io/serving": f"coscheduler until {until}"}},
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 30}}


def healthy_master(cluster) -> None:
    cluster.api.put(deployment(ready=1))
    cluster.api.put(master_pod(ready=True))
    service(cluster)


def test_status_says_the_charts_gang_scheduler_runs_and_holds_the_lease(run_cli, cluster):
    healthy_master(cluster)
    cluster.api.put(scheduler_deployment(ready=2))
    holder = "det-k8s-scheduler@det-k8s-scheduler-demo-6c9f7-x2k4p-1f3a"
    cluster.api.put(lease(holder))
    result = run_cli("status", "demo")
    assert result.code == 0, result.err
    assert (f"Gang scheduler: 2/2 ready (Deployment det-k8s-scheduler-demo), holds the Lease "
            f"det-system/det-k8s-scheduler ({holder}, serving coscheduler)") in result.out.splitlines()
    data = json.loads(run_cli("status", "demo", "-o", "json").out)["gangScheduler"]
    assert (data["deployed"], data["ready"], data["holds_lease"], data["serving"]) == (True, 2, True, "coscheduler")


def test_status_says_when_another_client_holds_the_lease_or_nobody(run_cli, cluster):
    healthy_master(cluster)
    cluster.api.put(scheduler_deployment(ready=2))
    cluster.api.put(lease("alice@laptop-1f3a"))
    result = run_cli("status", "demo")
    assert result.code == 0, result.err
    assert ("Gang scheduler: 2/2 ready (Deployment det-k8s-scheduler-demo); does not hold the Lease "
            "det-system/det-k8s-scheduler (held by alice@laptop-1f3a)") in result.out.splitlines()
    cluster.api.put(lease("det-k8s-scheduler@det-k8s-scheduler-demo-6c9f7-x2k4p-1f3a", age=600))  # expired
    assert "(held by nobody)" in run_cli("status", "demo").out


def test_a_stopped_gang_scheduler_is_a_problem(run_cli, cluster):
    healthy_master(cluster)
    cluster.api.put(scheduler_deployment(ready=0))
    result = run_cli("status", "demo")
    assert result.code == 1
    assert ("Problem: det-k8s's gang scheduler is not running (0/2 ready): the master's task pods wait unbound"
            in result.out)
    assert "error: release demo is not healthy: 1 problem(s) found" in result.err


def test_without_the_charts_scheduler_status_says_how_to_run_one(run_cli, cluster):
    healthy_master(cluster)
    result = run_cli("status", "demo")
    assert result.code == 0, result.err
    line = next(line for line in result.out.splitlines() if line.startswith("Gang scheduler: "))
    assert line.startswith("Gang scheduler: not deployed by this release (no Deployment det-k8s-scheduler-demo")
    assert "det-k8s scheduler run" in line and "det-k8s scheduler manifest" in line


def scheduler_pod(*, waiting: str | None, image: str = "det-k8s:0.1.0", ready: bool = False,
                  name: str = "det-k8s-scheduler-demo-6c9f7-x2k4p") -> dict:
    """A pod of the chart's scheduler Deployment for release demo, its container waiting (`waiting`) or running."""
    state = {"waiting": {"reason": waiting, "message": f'Back-off pulling image "{image}"'}} if waiting else {
        "running": {}}
    obj = pod(name, phase="Pending" if waiting else "Running", node_name="cpu-0",
              labels={"app.kubernetes.io/name": "det-k8s-scheduler", "app.kubernetes.io/instance": "demo"},
              container_statuses=[{"name": "scheduler", "restartCount": 0, "state": state}])
    obj["spec"]["containers"][0].update(name="scheduler", image=image)
    obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return obj


def test_the_schedulers_pods_in_image_pull_back_off_are_shown_with_the_fix(run_cli, cluster):
    healthy_master(cluster)
    cluster.api.put(scheduler_deployment(ready=0))
    cluster.api.put(scheduler_pod(waiting="ImagePullBackOff"))
    result = run_cli("status", "demo")
    assert result.code == 1
    row = next(line for line in result.out.splitlines() if line.strip().startswith("det-k8s-scheduler-demo-6c9f7"))
    assert "Pending" in row and "ImagePullBackOff" in row, result.out
    text = " ".join(result.out.split())
    assert ("Problem: det-k8s's gang scheduler cannot start: its pod det-k8s-scheduler-demo-6c9f7-x2k4p is in "
            "ImagePullBackOff for det-k8s:0.1.0 (detK8sScheduler.image unset: a placeholder nobody publishes); "
            "the master's task pods wait unbound") in text
    assert ("- build the image (scripts/image in det-k8s's checkout, or docker build -f deploy/Dockerfile), push it "
            "where the nodes pull from, and set detK8sScheduler.image to it") in text
    assert "- or set detK8sScheduler.enabled: false and run `det-k8s scheduler run` yourself" in text
    assert "is not running (0/2 ready)" not in text  # the cause, not only the symptom
    data = json.loads(run_cli("status", "demo", "-o", "json").out)
    assert [p["reason"] for p in data["gangScheduler"]["pods"]] == ["ImagePullBackOff"]
    assert data["problems"][-1]["problem"].startswith("det-k8s's gang scheduler cannot start")


def test_a_running_scheduler_pod_is_listed_and_no_problem(run_cli, cluster):
    healthy_master(cluster)
    cluster.api.put(scheduler_deployment(ready=1))
    cluster.api.put(scheduler_pod(waiting=None, image="registry.example.com/det-k8s:0.1", ready=True))
    result = run_cli("status", "demo")
    assert result.code == 0, result.out + result.err
    assert any(line.strip().startswith("det-k8s-scheduler-demo-6c9f7") and "Running" in line
               for line in result.out.splitlines()), result.out
