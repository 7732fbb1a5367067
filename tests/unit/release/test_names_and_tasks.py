"""Release names as helm and the chart's object names allow them; task pods and their grouping."""

from __future__ import annotations

import datetime

import pytest

from det_k8s.errors import UsageError
from det_k8s.release.names import MAX_RELEASE, validate_release_name
from det_k8s.release.tasks import age, describe_task, group_tasks, is_live, only_task_pods, owning_job, units
from tests.support.k8s_emulator import pod


@pytest.mark.parametrize("name", ["determined", "det-1", "a", "x" * MAX_RELEASE])
def test_good_names(name):
    assert validate_release_name(name) == name


@pytest.mark.parametrize("name,says", [
    ("Determined", "not a valid release name"), ("det_1", "not a valid release name"),
    ("-det", "not a valid release name"), ("det.prod", "not a valid release name"),
    ("x" * 54, "helm allows at most 53"), ("x" * 38, "the master Service determined-master-service-<release> must fit"),
    ("", "a release name is required"),
])
def test_bad_names_are_usage_errors_naming_the_argument(name, says):
    with pytest.raises(UsageError) as info:
        validate_release_name(name)
    assert says in str(info.value) and info.value.exit_code == 2
    assert str(info.value).startswith("RELEASE")


def test_a_user_selector_only_narrows_task_pods():
    base = "determined,app.kubernetes.io/managed-by!=det-k8s"  # the master's tasks, never det-k8s's own groups
    assert only_task_pods(None) == base
    assert only_task_pods("app=x") == f"{base},app=x"
    assert only_task_pods("determined,app=x") == f"{base},app=x"
    assert only_task_pods("!determined") == f"{base},!determined"  # matches nothing, never widens


def test_tasks_are_grouped_by_allocation_and_described():
    pods = [pod("exp-7-trial-12-0-7.ab.1-happy-cat", labels={"determined": "7.ab.1"}),
            pod("exp-7-trial-12-1-7.ab.1-sad-dog", labels={"determined": "7.ab.1"}),
            pod("cmd-0-cd-brave-owl", labels={"determined": "cd"})]
    groups = group_tasks(pods)
    assert [(g.allocation, g.description, len(g.pods)) for g in groups] == [
        ("7.ab.1", "experiment 7, trial 12", 2), ("cd", "command, notebook, shell or TensorBoard", 1)]
    assert describe_task("gc-1") == "checkpoint garbage collection"


def test_finished_and_terminating_pods_are_not_live():
    assert is_live(pod("a", phase="Running"))
    assert not is_live(pod("b", phase="Succeeded"))
    terminating = pod("c")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not is_live(terminating)


def test_age_like_kubectl():
    now = datetime.datetime(2026, 1, 3, 0, 0, 0, tzinfo=datetime.UTC)
    assert [age(t, now) for t in ("2026-01-02T23:59:15Z", "2026-01-02T23:48:00Z", "2026-01-02T19:00:00Z",
                                  "2025-12-30T00:00:00Z", "", "garbage")] == ["45s", "12m", "5h", "4d", "", ""]


def _job_pod(name: str, job: str, *, owner: bool = True, label: str = "batch.kubernetes.io/job-name"):
    obj = pod(name, labels={"determined": "a", label: job})
    if owner:
        obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u",
                                               "controller": True}]
    return obj


def _job(name: str, labels: dict[str, str] | None = None):
    return {"kind": "Job", "metadata": {"name": name, "namespace": "default",
                                        "labels": {"determined": "a"} if labels is None else labels}}


def test_a_pods_job_is_its_controlling_owner_or_the_job_controllers_label():
    assert owning_job(_job_pod("j-x", "j")) == "j"
    assert owning_job(_job_pod("j-x", "j", owner=False, label="job-name")) == "j"  # Kubernetes before 1.27
    assert owning_job(pod("exp-1-trial-1-0-a-cat", labels={"determined": "a"})) is None


def test_units_take_each_job_with_its_pods_and_hold_pods_of_jobs_not_deleted():
    pods = [_job_pod("j-a", "j"), _job_pod("j-b", "j"), _job_pod("k-a", "k"), _job_pod("own-a", "own"),
            pod("exp-1-trial-1-0-a-cat", labels={"determined": "b"})]
    maps = [{"kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}}
            for n in ("j", "exp-1-trial-1-0-a-cat", "stray")]
    found = units([_job("j"), _job("own", {"determined": "x", "app.kubernetes.io/managed-by": "det-k8s"})], pods, maps)
    assert [j["metadata"]["name"] for j in found.jobs] == ["j"]  # det-k8s's own Job is never the master's
    assert found.job_pods == {("default", "j"): ("j-a", "j-b")}
    assert [p["metadata"]["name"] for p in found.pods] == ["exp-1-trial-1-0-a-cat"]
    assert [c["metadata"]["name"] for c in found.configmaps] == ["j", "exp-1-trial-1-0-a-cat"]
    assert found.held == {("default", "k"): ("k-a",), ("default", "own"): ("own-a",)}
    assert found.summary() == "1 Job(s) with their 2 pod(s), 1 pod(s) and 2 ConfigMap(s)" and found.pod_count == 3


def test_0_34_task_names_are_described_too():
    assert describe_task("det-1a2b3c4d-exp-12-trial-34-attempt-1-ax7k2") == "experiment 12, trial 34"
    assert describe_task("det-1a2b3c4d-cmd-5f0e-ax7k2") == "command, notebook, shell or TensorBoard"
    assert describe_task("det-1a2b3c4d-gc-12-ax7k2") == "checkpoint garbage collection"
