"""The live gang scheduler through the CLI, against the Kubernetes API emulator: all pods or none."""

from __future__ import annotations

import json

import pytest

from tests.conftest import example
from tests.support.builders import node_of
from tests.support.k8s_emulator import node

EXP = example("experiments")
ON_REAL_CLUSTER_TOO = True  # every test but the emulator_only ones also runs on the real control plane


@pytest.fixture
def gpus(cluster, tmp_path):
    """Three 4-GPU nodes (the documents' cluster) and a settings file with maxSlotsPerPod 4."""
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    return settings


def entries(cluster) -> dict[str, dict]:
    out = {}
    for cm in cluster.api.items("configmaps"):
        if cm["metadata"].get("labels", {}).get("det-k8s.io/queue-entry"):
            out[json.loads(cm["data"]["entry.json"])["experiment"]] = {**json.loads(cm["data"]["status.json"]),
                                                                        "id": json.loads(cm["data"]["entry.json"])["id"]}
    return out


def gpus_by_node(cluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in cluster.api.items("pods"):
        if pod["status"]["phase"] in ("Succeeded", "Failed"):
            continue
        for c in pod["spec"]["containers"]:
            used[node_of(pod)] = used.get(node_of(pod), 0) + int(
                c["resources"]["requests"].get("nvidia.com/gpu", "0"))
    return used


def test_a_group_that_fits_starts_all_its_pods_pinned_together(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus, "--user", "alice")
    assert result.code == 0, result.err
    pods = cluster.api.items("pods")
    assert len(pods) == 3
    assert gpus_by_node(cluster) == {"gpu-0": 4, "gpu-1": 4, "gpu-2": 4}
    entry = entries(cluster)["distributed-12gpu-a"]
    assert entry["state"] == "running"
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert labels["det-k8s.io/group"] == entry["id"]
        assert not set(labels) & {"determined", "determined-system", "determined-preemption"}  # the master acts on these
        assert labels["det-k8s.io/user"] == "alice" and labels["det-k8s.io/size"] == "3"
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
        assert env["WORLD_SIZE"] == "3" and env["RANK"] == labels["det-k8s.io/rank"]
    (service,) = [s for s in cluster.api.items("services") if s["metadata"]["name"] != "kubernetes"]  # (the real one's)
    assert service["spec"]["clusterIP"] == "None"
    assert f"{entry['id']}: placed, 3 pod(s) started together on gpu-0, gpu-1, gpu-2" in result.err


def test_two_12_gpu_experiments_on_12_gpus_one_runs_whole_the_other_waits(run_cli, cluster, gpus):
    assert run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus).code == 0
    second = run_cli("experiment", "create", EXP / "distributed-12gpu-b.yaml", "-f", gpus)
    assert second.code == 0
    assert len(cluster.api.items("pods")) == 3  # never a partial group: b has no pod at all
    state = entries(cluster)
    assert state["distributed-12gpu-a"]["state"] == "running"
    assert state["distributed-12gpu-b"]["state"] == "queued"
    assert "needs 3 pods x 4 nvidia.com/gpu" in state["distributed-12gpu-b"]["reason"]
    listing = run_cli("experiment", "list", "-o", "json")
    records = {r["name"]: r for r in json.loads(listing.out)["experiments"]}
    assert records["distributed-12gpu-b"]["position"] == 1
    assert records["distributed-12gpu-a"]["position"] is None


def test_a_group_larger_than_the_cluster_is_rejected_with_both_numbers(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", EXP / "distributed-16gpu.yaml", "-f", gpus)
    assert result.code == 1
    assert "can never run here" in result.err and "16" in result.err and "12" in result.err
    assert entries(cluster) == {} and cluster.api.items("pods") == []
    queued = run_cli("experiment", "create", EXP / "distributed-16gpu.yaml", "-f", gpus, "--autoscaling")
    assert queued.code == 0
    assert entries(cluster)["distributed-16gpu"]["state"] == "queued"
    assert cluster.api.items("pods") == []


def test_slots_not_divisible_are_rejected_at_submit_time(run_cli, cluster, gpus, tmp_path):
    bad = tmp_path / "six.yaml"
    bad.write_text("name: six\nresources:\n  slots_per_trial: 6\n")
    result = run_cli("experiment", "create", bad, "-f", gpus)
    assert result.code == 1
    assert "slots_per_trial 6 is not a multiple of maxSlotsPerPod 4" in result.err
    assert entries(cluster) == {}


@pytest.mark.emulator_only
def test_dry_run_changes_nothing(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus, "--dry-run")
    assert result.code == 0
    assert "would start now" in result.err
    assert entries(cluster) == {} and cluster.api.items("pods") == []
    assert cluster.api.count("POST") == 0


def test_a_lost_pod_tears_the_whole_group_down_and_requeues_it(run_cli, cluster, gpus):
    assert run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus).code == 0
    victim = cluster.api.items("pods")[1]["metadata"]["name"]
    cluster.api.update("pods", victim, {"status": {"phase": "Failed", "reason": "Evicted"}})
    result = run_cli("scheduler", "run", "--once")
    assert result.code == 0, result.err
    entry = entries(cluster)["distributed-12gpu-a"]
    assert f"pod {victim} failed (Evicted)" in result.err, result.err
    assert entry["attempts"] == 1
    run_cli("scheduler", "run", "--once")
    assert entries(cluster)["distributed-12gpu-a"]["state"] == "running"
    assert len(cluster.api.items("pods")) == 3


def test_a_group_that_keeps_losing_pods_fails_after_the_retry_limit(run_cli, cluster, gpus):
    assert run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus).code == 0
    for _ in range(3):
        (pod,) = cluster.api.items("pods")
        cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Failed", "reason": "OOMKilled"}})
        run_cli("scheduler", "run", "--once")
        run_cli("scheduler", "run", "--once")
    entry = entries(cluster)["small-4gpu"]
    assert entry["state"] == "failed"
    assert "gave up after 3 attempts" in entry["reason"]
    assert cluster.api.items("pods") == []


def test_a_finished_group_completes_and_frees_its_service(run_cli, cluster, gpus):
    assert run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus).code == 0
    (pod,) = cluster.api.items("pods")
    cluster.api.update("pods", pod["metadata"]["name"], {"status": {"phase": "Succeeded"}})
    assert run_cli("scheduler", "run", "--once").code == 0
    assert entries(cluster)["small-4gpu"]["state"] == "completed"
    assert [s for s in cluster.api.items("services") if s["metadata"]["name"] != "kubernetes"] == []


def test_killing_the_running_group_lets_the_waiting_one_start(run_cli, cluster, gpus):
    run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus)
    run_cli("experiment", "create", EXP / "distributed-12gpu-b.yaml", "-f", gpus)
    first = entries(cluster)["distributed-12gpu-a"]["id"]
    assert run_cli("experiment", "kill", first[:12], "--yes").code == 0  # kill never asks; --yes is taken all the same
    assert entries(cluster)["distributed-12gpu-a"]["state"] == "killed"
    assert cluster.api.items("pods") == []
    run_cli("scheduler", "run", "--once")
    assert entries(cluster)["distributed-12gpu-b"]["state"] == "running"
    assert {p["metadata"]["labels"]["det-k8s.io/experiment"] for p in cluster.api.items("pods")} == {
        "distributed-12gpu-b"}


def test_pause_and_resume(run_cli, cluster, gpus):
    run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus)
    entry_id = entries(cluster)["small-4gpu"]["id"]
    assert run_cli("experiment", "pause", entry_id).code == 0
    assert cluster.api.items("pods") == [] and entries(cluster)["small-4gpu"]["state"] == "paused"
    assert run_cli("experiment", "pause", entry_id).code == 2  # already paused: nothing to do
    assert run_cli("experiment", "resume", entry_id).code == 0
    assert entries(cluster)["small-4gpu"]["state"] == "running"
    assert len(cluster.api.items("pods")) == 1


@pytest.mark.emulator_only
def test_a_failed_pod_creation_leaves_nothing_running_and_the_group_queued(run_cli, cluster, gpus):
    """A quota refusal det-k8s did not foresee (the quota changed after the pass read it): rolled back, and one
    retry after a pause, not one every pass."""
    cluster.api.fail("POST", "pods", 403, 'pods is forbidden: exceeded quota: gpu-quota, requested: '
                                          'nvidia.com/gpu=4', times=1)
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus)
    assert result.code == 0
    assert cluster.api.items("pods") == [] and cluster.api.items("services") == []
    entry = entries(cluster)["distributed-12gpu-a"]
    assert entry["state"] == "queued" and "exceeded quota" in entry["reason"]
    assert entry["reason"].endswith("trying again once in 30 s (not counted as an attempt)")
    posts = cluster.api.count("POST", "pods")
    run_cli("scheduler", "run", "--once")
    assert cluster.api.count("POST", "pods") == posts and entries(cluster)["distributed-12gpu-a"]["state"] == "queued"


def test_a_group_over_its_namespace_quota_waits_naming_it_and_creates_no_pod(run_cli, cluster, gpus):
    """The defect of issue 22: a 3-pod group under a GPU quota was created a pod at a time, refused, torn
    down and tried again without end. Now it waits, with the quota named, until the quota has room. (On the real
    control plane the API server's own quota admission and the quota controller keep the quota.)"""
    import time

    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": "default"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "8"}}}
    cluster.api.put(quota)
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus)
    assert result.code == 0
    for _ in range(3):
        run_cli("scheduler", "run", "--once")
    assert cluster.api.items("pods", "default") == []
    entry = entries(cluster)["distributed-12gpu-a"]
    assert entry["state"] == "queued" and entry["attempts"] == 0
    assert entry["reason"].startswith("namespace default: quota gpu-quota: requests.nvidia.com/gpu ")
    assert "of 8 used, the group needs 12 (more than the quota allows in all)" in entry["reason"]
    assert not any("creating its pods failed" in event for event in entry["events"])  # never tried, so never torn down
    cluster.api.update("resourcequotas", "gpu-quota", {"spec": {"hard": {"requests.nvidia.com/gpu": "12"}}}, "default")
    deadline = time.monotonic() + 30
    while ((cluster.api.get("resourcequotas", "gpu-quota", "default").get("status") or {}).get("hard") or {}).get(
            "requests.nvidia.com/gpu") != "12":  # the quota controller's turn (at once in the emulator)
        assert time.monotonic() < deadline, "the quota's status never showed the new limit"
        time.sleep(0.2)
    run_cli("scheduler", "run", "--once")
    assert entries(cluster)["distributed-12gpu-a"]["state"] == "running"


@pytest.mark.emulator_only
def test_preemption_evicts_whole_lower_priority_groups_which_return_to_the_queue(run_cli, cluster, gpus, tmp_path):
    cluster.api.graceful_pods = True
    low = tmp_path / "low.yaml"
    low.write_text("name: low\nresources: {slots_per_trial: 12, priority: 10}\n")
    high = tmp_path / "high.yaml"
    high.write_text("name: high\nresources: {slots_per_trial: 8, priority: 90}\n")
    assert run_cli("scheduler", "policy", "--preemption").code == 0
    assert run_cli("experiment", "create", low, "-f", gpus).code == 0
    result = run_cli("experiment", "create", high, "-f", gpus)
    assert result.code == 0
    state = entries(cluster)
    assert state["low"]["state"] == "queued" and "preempted by" in state["low"]["reason"]
    assert state["high"]["state"] == "queued" and "waiting for preempted group(s) to stop" in state["high"]["reason"]
    pods = cluster.api.items("pods")
    assert len(pods) == 3 and all(p["metadata"].get("deletionTimestamp") for p in pods)  # all three go, not 2
    cluster.api.finish_deletions()
    run_cli("scheduler", "run", "--once")
    state = entries(cluster)
    assert state["high"]["state"] == "running" and state["low"]["state"] == "queued"
    assert sum(gpus_by_node(cluster).values()) == 8


def test_describe_says_why_it_waits_and_who_is_ahead(run_cli, cluster, gpus):
    run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus)
    run_cli("experiment", "create", EXP / "distributed-12gpu-b.yaml", "-f", gpus)
    run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus)
    small = entries(cluster)["small-4gpu"]["id"]
    result = run_cli("experiment", "describe", small, "-o", "json")
    data = json.loads(result.out)
    assert data["state"] == "queued" and data["position"] == 2
    assert "needs 1 pod x 4 nvidia.com/gpu" in data["reason"]
    text = run_cli("experiment", "describe", small)
    assert "Why:" in text.out and "submitted by" in text.out


def test_settings_come_from_the_installed_master_when_no_file_is_given(run_cli, cluster, gpus):
    cluster.api.put({"kind": "ConfigMap", "metadata": {"name": "determined-master-config-demo", "namespace": "default"},
                     "data": {"master.yaml": "resource_manager:\n  type: kubernetes\n  max_slots_per_pod: 4\n"}})
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml")
    assert result.code == 0, result.err
    assert len(cluster.api.items("pods")) == 3


def test_no_settings_anywhere_is_one_clear_line(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", EXP / "small-4gpu.yaml")
    assert result.code == 2
    assert result.err.startswith("error: no settings: no Determined master configuration in namespace default")


def test_an_unknown_id_is_a_usage_error(run_cli, cluster, gpus):
    result = run_cli("experiment", "describe", "nope")
    assert (result.code, result.err.strip()) == (
        2, "error: no experiment nope in namespace default; `det-k8s experiment list --all` shows the ids")


def test_policy_is_stored_for_every_client(run_cli, cluster):
    assert run_cli("scheduler", "policy", "--preemption", "--weight", "alice=2", "--weight", "bob=0.5").code == 0
    shown = json.loads(run_cli("scheduler", "policy", "-o", "json").out)
    assert shown == {"preemption": True, "weights": {"alice": 2.0, "bob": 0.5}, "autoscaling": False,
                     "backfill": True, "reserve_after": 300.0, "topology_key": "topology.kubernetes.io/zone",
                     "topology_required": False, "extended_resource_toleration": None, "queues": None,
                     "placement": "auto"}
    assert run_cli("scheduler", "policy", "--weight", "alice").code == 2


def test_the_placement_mode_is_part_of_the_stored_policy(run_cli, cluster):
    from det_k8s.live.policy import read_policy

    assert read_policy(cluster.connect(), "default").placement == "auto"  # native where the PodGroup API is served
    shown = run_cli("scheduler", "policy", "--placement", "det-k8s")
    assert shown.code == 0 and "Placement:     det-k8s" in shown.out
    assert read_policy(cluster.connect(), "default").placement == "det-k8s"
    bad = run_cli("scheduler", "policy", "--placement", "kai")
    assert bad.code == 2 and "--placement 'kai': expected auto, native, det-k8s" in bad.err
    assert read_policy(cluster.connect(), "default").placement == "det-k8s"


def test_native_placement_where_the_cluster_serves_no_pod_group_api_submits_nothing(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus, "--placement", "native")
    assert result.code == 1
    assert "placement native: the cluster serves no PodGroup API (scheduling.k8s.io v1beta1 or v1alpha2 podgroups)" \
        in result.err
    assert entries(cluster) == {} and cluster.api.items("pods") == []


def test_auto_placement_without_the_pod_group_api_pins_the_pods_as_before(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", gpus, "--placement", "auto")
    assert result.code == 0, result.err
    pods = cluster.api.items("pods")
    assert len(pods) == 3 and not any("schedulingGroup" in p["spec"] for p in pods)
    assert all(p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
               ["nodeSelectorTerms"][0]["matchFields"][0]["key"] == "metadata.name" for p in pods)
    assert "placed, 3 pod(s) started together on gpu-0, gpu-1, gpu-2" in result.err
    describe = json.loads(run_cli("experiment", "describe", entries(cluster)["distributed-12gpu-a"]["id"],
                                  "-o", "json").out)
    assert describe["placedBy"] == "det-k8s" and describe["podGroup"] is None


def test_reserve_after_is_part_of_the_stored_policy(run_cli, cluster):
    from det_k8s.live.policy import read_policy

    assert run_cli("scheduler", "policy", "--reserve-after", "0").code == 0
    assert read_policy(cluster.connect(), "default").reserve_after == 0
    table = run_cli("scheduler", "policy", "--reserve-after", "900")
    assert "Reserve after: 900s" in table.out
    assert read_policy(cluster.connect(), "default").reserve_after == 900
    assert run_cli("scheduler", "policy", "--reserve-after", "-1").code == 2


def test_a_corrupt_queue_entry_is_skipped_with_a_warning_naming_it(run_cli, cluster, gpus):
    run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus)
    cluster.api.put({"kind": "ConfigMap", "metadata": {"name": "det-k8s-queue-broken", "namespace": "default",
                                                       "labels": {"det-k8s.io/queue-entry": "true",
                                                                  "det-k8s.io/state": "queued"}},
                     "data": {"entry.json": "{not json"}})
    listing = run_cli("experiment", "list")
    assert listing.code == 0
    assert "configmap default/det-k8s-queue-broken is not a readable queue entry" in listing.err
    assert "small-4gpu" in listing.out
    loop = run_cli("scheduler", "run", "--once")
    assert loop.code == 0 and "det-k8s-queue-broken" in loop.err


def test_a_corrupt_policy_is_one_line_and_can_be_repaired(run_cli, cluster, gpus):
    cluster.api.put({"kind": "ConfigMap", "metadata": {"name": "det-k8s-scheduler-policy", "namespace": "default"},
                     "data": {"policy.json": '{"weights": {"alice": "lots"}}'}})
    result = run_cli("experiment", "list")
    assert result.code == 1
    assert result.err.startswith("error: configmap default/det-k8s-scheduler-policy: not a readable scheduling policy")
    assert run_cli("scheduler", "policy", "--weight", "alice=2").code == 0
    assert run_cli("experiment", "list").code == 0


@pytest.mark.parametrize("weight", ["alice=nan", "alice=inf", "alice=-1", "=2", "alice"])
def test_bad_weights_are_usage_errors(run_cli, cluster, weight):
    assert run_cli("scheduler", "policy", "--weight", weight).code == 2


def test_ids_shorter_than_four_characters_must_match_exactly(run_cli, cluster, gpus):
    run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus)
    result = run_cli("experiment", "kill", "")
    assert result.code == 2 and "too short" in result.err
    assert entries(cluster)["small-4gpu"]["state"] == "running"


@pytest.mark.emulator_only
def test_the_scheduler_loop_survives_a_failed_pass(cluster, tmp_path):
    import signal
    import time

    from tests.cli.test_scheduler_loop import start, wait_until

    # (a Lease write: the loop's watch makes the first reads of configmaps and pods, and survives their failures)
    cluster.api.fail("POST", "leases", 500, "etcdserver: leader changed", times=1)
    loop = start(["scheduler", "run", "--interval", "1"], cluster.kubeconfig)
    wait_until(lambda: cluster.api.count("POST", "leases") >= 2, "a pass after the failed one")
    time.sleep(0.5)
    assert loop.poll() is None  # still running after the failure
    loop.send_signal(signal.SIGINT)
    assert loop.wait(60) == 130
    assert "pass failed:" in (loop.stderr.read() if loop.stderr else "")


@pytest.mark.parametrize("value", ["inf", "nan", "1e309", "-1", "700000"])
def test_reserve_after_must_be_a_sane_number_of_seconds(run_cli, cluster, value):
    assert run_cli("scheduler", "policy", "--reserve-after", value).code == 2
    assert run_cli("scheduler", "policy").code == 0  # nothing stored that would break later passes


def test_topology_and_the_admission_plugin_are_part_of_the_stored_policy(run_cli, cluster):
    from det_k8s.live.policy import read_policy

    assert run_cli("scheduler", "policy", "--topology-key", "rack", "--require-topology",
                   "--extended-resource-toleration", "on").code == 0
    policy = read_policy(cluster.connect(), "default")
    assert (policy.topology_key, policy.topology_required, policy.extended_resource_toleration) == ("rack", True, True)
    shown = run_cli("scheduler", "policy")
    assert "Topology:      rack (required)" in shown.out and "Admission:     ExtendedResourceToleration on" in shown.out
    assert run_cli("scheduler", "policy", "--extended-resource-toleration", "detect", "--prefer-topology").code == 0
    policy = read_policy(cluster.connect(), "default")
    assert (policy.topology_required, policy.extended_resource_toleration) == (False, None)
    bad = run_cli("scheduler", "policy", "--extended-resource-toleration", "maybe")
    assert bad.code == 2 and "expected on, off or detect" in bad.err


def test_create_dash_f_names_the_experiment_as_kubectl_users_expect(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", "-f", EXP / "distributed-12gpu-a.yaml", "-f", gpus, "--user", "alice")
    assert result.code == 0, result.err
    assert f"note: -f {EXP / 'distributed-12gpu-a.yaml'} is an experiment, taken as FILE" in result.err
    assert entries(cluster)["distributed-12gpu-a"]["state"] == "running"
    assert len(cluster.api.items("pods")) == 3


def test_create_without_an_experiment_file_says_how_in_one_line(run_cli, cluster, gpus):
    result = run_cli("experiment", "create", "-f", gpus)
    assert result.code == 2
    assert result.err.splitlines() == ["error: missing the experiment file; det-k8s experiment create FILE "
                                       "[-f SETTINGS]: -f names settings files here, as for install"]
    assert cluster.api.items("pods") == []


def test_create_in_a_namespace_that_does_not_exist_says_so(run_cli, cluster, gpus, cluster_backend):
    if cluster_backend == "emulator":  # the real API server's namespace lifecycle admission, word for word
        cluster.api.fail("POST", "configmaps", 404, 'namespaces "nope-ns" not found', reason="NotFound", times=5)
    result = run_cli("experiment", "create", EXP / "small-4gpu.yaml", "-f", gpus, "-n", "nope-ns")
    assert result.code == 1, result.err
    line = result.err.strip().splitlines()[-1]
    assert line.startswith("error: namespace nope-ns does not exist") and "config map" in line
    assert line.endswith("; create it: kubectl create namespace nope-ns; or pass -n NAME of one that exists")
    assert "not found" not in line
