"""Determined 0.34+ task Jobs in `pods list`, `pods cleanup` and `uninstall`, against the API emulator through the
real `kubernetes` client: the master's unit is a batch/v1 Job, deleted with propagation so its pods go too, never a
Job's pod alone; bare pre-0.34 task pods and det-k8s's own pods are told apart. Objects are shaped as the v0.38.1
master makes them (master/internal/rm/kubernetesrm/{job,jobs}.go; facts document section 6)."""

from __future__ import annotations

import json

import pytest

from tests.support.k8s_emulator import pod

CLUSTER_ID = "1a2b3c4d"


def determined_job(cluster, namespace: str, experiment: int, trial: int, pods: int, *, user: str = "alice") -> str:
    """A trial's Job, its pods (from the Job controller) and its ConfigMap, as v0.38.1 leaves them."""
    job = f"det-{CLUSTER_ID}-exp-{experiment}-trial-{trial}-attempt-1"
    allocation = f"{experiment}.4b1d6f0e-8c2a-4f5e-9d3b-{trial:012d}.1"
    labels = {"determined": allocation, "determined.ai/allocation_id": allocation,
              "determined.ai/task_id": allocation.rsplit(".", 1)[0], "determined.ai/container_id": allocation,
              "determined.ai/task_type": "TRIAL", "determined.ai/resource_pool": "default",
              "determined.ai/workspace": "Uncategorized", "determined.ai/user": user,
              "determined.ai/experiment_id": str(experiment), "determined.ai/trial_id": str(trial)}
    stored = cluster.api.put({"kind": "Job", "apiVersion": "batch/v1",
                              "metadata": {"name": job, "namespace": namespace, "labels": labels},
                              "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                                       "ttlSecondsAfterFinished": 900,
                                       "template": {"metadata": {"labels": labels},
                                                    "spec": {"restartPolicy": "Never"}}}})
    uid = stored["metadata"]["uid"]
    for i in range(pods):
        task = pod(f"{job}-{'abcde'[i]}x7k2", namespace=namespace, node_name=f"gpu-{i}",
                   requests={"nvidia.com/gpu": "4"},
                   labels={**labels, "batch.kubernetes.io/job-name": job, "job-name": job, "controller-uid": uid,
                           "batch.kubernetes.io/controller-uid": uid, "determined-queue-position": "0"})
        task["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid,
                                                "controller": True, "blockOwnerDeletion": True}]
        task["spec"]["containers"][0]["name"] = "determined-container"
        cluster.api.put(task)
    cluster.api.put({"kind": "ConfigMap", "metadata": {"name": job, "namespace": namespace,
                                                       "labels": {"determined": allocation}}})
    return job


@pytest.fixture
def tasks(cluster) -> dict[str, str]:
    """Two 0.38.1 trial Jobs (default, ml), a bare pre-0.34 task pod, det-k8s's own group, someone else's Job."""
    api = cluster.api
    names = {"trial": determined_job(cluster, "default", 12, 34, 2), "other": determined_job(cluster, "ml", 7, 1, 1)}
    api.put(pod("exp-3-trial-4-0-c-owl", labels={"determined": "c"}))  # a 0.17-0.33 bare task pod
    api.put({"kind": "ConfigMap", "metadata": {"name": "exp-3-trial-4-0-c-owl", "namespace": "default",
                                               "labels": {"determined": "c"}}})
    api.put(pod("mnist-7f3a2c1b-0", labels={"app.kubernetes.io/managed-by": "det-k8s", "det-k8s.io/group": "7f3a"}))
    etl = api.put({"kind": "Job", "metadata": {"name": "nightly-etl", "namespace": "default"}})
    etl_pod = pod("nightly-etl-q1w2e", labels={"batch.kubernetes.io/job-name": "nightly-etl"})
    etl_pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "nightly-etl",
                                               "uid": etl["metadata"]["uid"], "controller": True}]
    api.put(etl_pod)
    return names


def pod_names(cluster, namespace: str | None = None) -> list[str]:
    return [p["metadata"]["name"] for p in cluster.api.items("pods", namespace)]


def test_the_emulator_orphans_a_jobs_pods_unless_told_to_propagate(cluster, tasks):
    """As a real API server: DELETE of a batch/v1 Job without a propagation policy leaves its pods running."""
    api = cluster.connect()
    api.request("DELETE", f"/apis/batch/v1/namespaces/ml/jobs/{tasks['other']}", body={})
    orphan = cluster.api.get("pods", f"{tasks['other']}-ax7k2", "ml")
    assert orphan is not None and orphan["metadata"]["ownerReferences"] == []


def test_pods_list_names_each_pods_job(run_cli, cluster, tasks):
    result = run_cli("pods", "list")
    rows = [line.split() for line in result.out.splitlines()]
    assert rows[0] == ["NAME", "NAMESPACE", "PHASE", "NODE", "GPUS", "AGE", "JOB"]
    assert [(r[0], r[-1]) for r in rows[1:3]] == [(f"{tasks['trial']}-ax7k2", tasks["trial"]),
                                                  (f"{tasks['trial']}-bx7k2", tasks["trial"])]
    assert rows[3][0] == "exp-3-trial-4-0-c-owl" and tasks["trial"] not in rows[3]  # bare: no JOB
    data = json.loads(run_cli("pods", "list", "-A", "-o", "json").out)
    assert [(p["name"], p["job"]) for p in data] == [
        (f"{tasks['trial']}-ax7k2", tasks["trial"]), (f"{tasks['trial']}-bx7k2", tasks["trial"]),
        ("exp-3-trial-4-0-c-owl", ""), (f"{tasks['other']}-ax7k2", tasks["other"])]


def test_cleanup_dry_run_says_the_job_goes_with_its_pods_and_deletes_nothing(run_cli, cluster, tasks):
    result = run_cli("pods", "cleanup", "--dry-run")
    assert result.code == 0, result.err
    trial = tasks["trial"]
    assert result.err.splitlines() == [
        "This would delete 1 Job(s) with their 2 pod(s), 1 pod(s) and 2 ConfigMap(s):",
        f"  Job default/{trial} with its 2 pod(s): {trial}-ax7k2, {trial}-bx7k2",
        "  Pod default/exp-3-trial-4-0-c-owl",
        f"  ConfigMap default/{trial}",
        "  ConfigMap default/exp-3-trial-4-0-c-owl"]
    assert cluster.api.count("DELETE") == 0


def test_cleanup_deletes_the_job_with_propagation_never_a_jobs_pod(run_cli, cluster, tasks):
    result = run_cli("pods", "cleanup", "-A", "--yes")
    assert result.code == 0, result.err
    assert "Deleted 2 Job(s) with their pods, 1 pod(s) and 3 ConfigMap(s)" in result.err
    trial, other = tasks["trial"], tasks["other"]
    assert cluster.api.deletions == [
        (f"/apis/batch/v1/namespaces/default/jobs/{trial}", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                             "propagationPolicy": "Background"}),
        (f"/apis/batch/v1/namespaces/ml/jobs/{other}", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                        "propagationPolicy": "Background"}),
        ("/api/v1/namespaces/default/pods/exp-3-trial-4-0-c-owl", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                                   "propagationPolicy": "Background"}),
        (f"/api/v1/namespaces/default/configmaps/{trial}", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                            "propagationPolicy": "Background"}),
        ("/api/v1/namespaces/default/configmaps/exp-3-trial-4-0-c-owl", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                                         "propagationPolicy": "Background"}),
        (f"/api/v1/namespaces/ml/configmaps/{other}", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                       "propagationPolicy": "Background"})]
    # the garbage collector took the Jobs' pods; det-k8s's own group and someone else's Job are untouched
    assert pod_names(cluster) == ["mnist-7f3a2c1b-0", "nightly-etl-q1w2e"]
    assert [j["metadata"]["name"] for j in cluster.api.items("jobs")] == ["nightly-etl"]


def test_a_selector_that_matches_a_jobs_pod_deletes_its_whole_job(run_cli, cluster, tasks):
    trial = tasks["trial"]
    result = run_cli("pods", "cleanup", "-l", f"batch.kubernetes.io/job-name={trial}", "--yes")
    assert result.code == 0, result.err
    assert [path for path, _ in cluster.api.deletions] == [f"/apis/batch/v1/namespaces/default/jobs/{trial}",
                                                           f"/api/v1/namespaces/default/configmaps/{trial}"]
    assert pod_names(cluster, "default") == ["exp-3-trial-4-0-c-owl", "mnist-7f3a2c1b-0", "nightly-etl-q1w2e"]


def test_a_selector_by_experiment_takes_that_experiments_jobs(run_cli, cluster, tasks):
    result = run_cli("pods", "cleanup", "-A", "-l", "determined.ai/experiment_id=7", "--dry-run")
    assert result.err.splitlines()[:2] == [
        "This would delete 1 Job(s) with their 1 pod(s), 0 pod(s) and 1 ConfigMap(s):",
        f"  Job ml/{tasks['other']} with its 1 pod(s): {tasks['other']}-ax7k2"]


def test_without_rights_on_jobs_their_pods_are_held_never_deleted_alone(run_cli, cluster, tasks):
    cluster.api.fail("GET", "jobs", 403, 'jobs.batch is forbidden: User "bob" cannot list resource "jobs"', times=9)
    result = run_cli("pods", "cleanup", "--yes")
    assert result.code == 0, result.err
    trial = tasks["trial"]
    warnings = [line for line in result.err.splitlines() if line.startswith("warning:")]
    assert warnings[0].startswith("warning: Determined's task Jobs (0.34 and later) not read: jobs.batch is "
                                  "forbidden")
    assert (f"warning: not deleted: pod(s) {trial}-ax7k2, {trial}-bx7k2 of Job default/{trial}, which det-k8s could "
            f"not read as the master's; deleting a Job's pod alone does not stop it: kubectl delete job {trial} -n "
            "default") in warnings
    assert [path for path, _ in cluster.api.deletions] == [
        "/api/v1/namespaces/default/pods/exp-3-trial-4-0-c-owl",
        "/api/v1/namespaces/default/configmaps/exp-3-trial-4-0-c-owl"]
    assert f"{trial}-ax7k2" in pod_names(cluster)


def installed(cluster) -> None:
    api = cluster.api
    api.put({"kind": "Secret", "metadata": {"name": "sh.helm.release.v1.demo.v1", "namespace": "default",
                                            "labels": {"owner": "helm", "name": "demo"}}})
    api.put({"kind": "Deployment", "metadata": {"name": "determined-master-deployment-demo", "namespace": "default",
                                                "labels": {"release": "demo", "app": "determined-master-demo"}}})


def test_uninstall_says_the_jobs_go_and_deletes_them_with_their_pods(run_cli, cluster, tasks, fake_helm):
    installed(cluster)
    refused = run_cli("uninstall", "demo")
    assert refused.code == 2 and cluster.api.deletions == []
    assert ("1 task Job(s) labelled determined with their 2 pod(s), 1 task pod(s) labelled determined and 2 task "
            "ConfigMap(s): running experiments stop") in refused.err
    result = run_cli("uninstall", "demo", "--yes")
    assert result.code == 0, result.err
    assert fake_helm.calls == [["uninstall", "demo", "--namespace", "default", "--timeout", "5m"]]
    assert "Deleted 1 task Job(s) with their pods, 1 leftover task pod(s) and 2 task ConfigMap(s)" in result.err
    assert [path for path, _ in cluster.api.deletions] == [
        f"/apis/batch/v1/namespaces/default/jobs/{tasks['trial']}",
        "/api/v1/namespaces/default/pods/exp-3-trial-4-0-c-owl",
        f"/api/v1/namespaces/default/configmaps/{tasks['trial']}",
        "/api/v1/namespaces/default/configmaps/exp-3-trial-4-0-c-owl"]
    assert all(options["propagationPolicy"] == "Background" for _, options in cluster.api.deletions)
    assert pod_names(cluster, "default") == ["mnist-7f3a2c1b-0", "nightly-etl-q1w2e"]
    assert pod_names(cluster, "ml") == [f"{tasks['other']}-ax7k2"]  # another namespace: not this release's
