"""Team queues where admins and users meet them: `scheduler policy --queues`, `plan --policy`, live passes."""

from __future__ import annotations

import json

import yaml

from tests.conftest import example
from tests.support.k8s_emulator import node

EXPERIMENTS = example("experiments")
SNAPSHOTS = example("snapshots")
TWELVE_A, TWELVE_B = EXPERIMENTS / "distributed-12gpu-a.yaml", EXPERIMENTS / "distributed-12gpu-b.yaml"
QUEUES = """\
version: 1
defaultQueue: everyone
queues:
- name: research
  guarantee: {nvidia.com/gpu: 8}
  limit: {nvidia.com/gpu: 12}
  children:
  - name: nlp
    guarantee: {nvidia.com/gpu: 8}
    members: {namespaces: [default]}
- name: everyone
  limit: {nvidia.com/gpu: 4}
"""


def test_scheduler_policy_sets_checked_queues_for_every_client(run_cli, cluster, tmp_path):
    from det_k8s.live.policy import read_policy

    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    result = run_cli("scheduler", "policy", "--queues", queues)
    assert result.code == 0, result.err
    assert "Queues:        research, nlp, everyone" in result.out.splitlines()
    stored = read_policy(cluster.connect(), "default").queues
    assert stored is not None and stored.path("nlp") == ("nlp", "research") and stored.default == "everyone"
    shown = yaml.safe_load(run_cli("scheduler", "policy", "-o", "yaml").out)
    assert shown["queues"]["queues"][0]["limit"] == {"nvidia.com/gpu": "12"}
    assert run_cli("scheduler", "policy", "--no-queues").code == 0
    assert read_policy(cluster.connect(), "default").queues is None


def test_a_broken_queue_file_is_refused_with_every_problem_and_nothing_changes(run_cli, cluster, tmp_path):
    from det_k8s.live.policy import read_policy

    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES.replace("limit: {nvidia.com/gpu: 12}", "limit: {nvidia.com/gpu: 4}")
                      .replace("name: everyone", "name: nlp"))
    result = run_cli("scheduler", "policy", "--queues", queues)
    assert result.code == 1
    assert result.err.splitlines() == [
        f"error: queues[0].limit.nvidia.com/gpu: 4 is below the queue's guarantee of 8 ({queues})",
        f"error: queues[1].name: nlp is also the name of queues[0].children[0]; queue names are unique ({queues})",
        f"error: defaultQueue: 'everyone' is not one of the queues ({queues})",
    ]
    assert read_policy(cluster.connect(), "default").queues is None


def test_plan_tries_a_queue_change_offline(run_cli, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"queues": yaml.safe_load(QUEUES.replace("nvidia.com/gpu: 12", "nvidia.com/gpu: 8")
                                                                      .replace("guarantee: {nvidia.com/gpu: 8}\n  limit",
                                                                               "limit"))}))
    result = run_cli("plan", TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "--policy", policy, "-o", "json")
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)["experiments"]
    assert record["status"] == "queued"
    assert record["reason"].startswith("queue research (above nlp): 0 of 8 GPUs (its limit), the group needs 12")
    assert record["why"]["queue"]["queue"] == "research"
    alone = tmp_path / "queues.yaml"  # the queue document alone, as scheduler policy --queues takes it
    alone.write_text(yaml.safe_dump(yaml.safe_load(policy.read_text())["queues"]))
    again = run_cli("plan", TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "--policy", alone, "-o", "json")
    assert json.loads(again.out)["experiments"][0]["reason"] == record["reason"]
    placed = json.loads(run_cli("plan", TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "-o", "json").out)
    assert placed["experiments"][0]["status"] == "placed"  # the policy applied is not the one tried


def test_plan_refuses_a_broken_policy_file_naming_each_problem(run_cli, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("queues:\n  queues:\n  - name: a\n    wieght: 2\n")
    result = run_cli("plan", TWELVE_A, "--snapshot", SNAPSHOTS / "twelve-gpus.yaml", "--policy", policy)
    assert result.code == 1
    assert result.err.splitlines()[-1] == (
        "error: queues.queues[0].wieght: not a key here (did you mean weight?); expected one of name, guarantee, "
        f"limit, borrowingLimit, lendingLimit, weight, members, children ({policy})")


def test_live_passes_hold_a_group_at_its_queue_limit(run_cli, cluster, tmp_path):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES.replace("members: {namespaces: [default]}", "members: {namespaces: [elsewhere]}"))
    assert run_cli("scheduler", "policy", "--queues", queues).code == 0
    assert run_cli("experiment", "create", TWELVE_A, "-f", settings).code == 0
    assert cluster.api.count("POST", "pods") == 0
    listed = json.loads(run_cli("experiment", "list", "-o", "json").out)
    (entry,) = listed if isinstance(listed, list) else listed["experiments"]
    assert "queue everyone: 0 of 4 GPUs (its limit), the group needs 12" in json.dumps(entry)


def test_queues_lists_guarantee_use_borrowed_lent_limit_and_waiting(run_cli, cluster, tmp_path):
    for i in range(4):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    none = run_cli("queues")  # none yet: says how to set them; nothing to show is no failure, nor a usage error
    assert (none.code, none.out) == (0, "") and none.err == (
        "namespace default has no team queues; set them with `det-k8s scheduler policy --queues FILE` (try them "
        "first: det-k8s plan --policy)\n")
    assert json.loads(run_cli("queues", "-o", "json").out) == {"namespace": "default", "default_queue": None,
                                                                "queues": []}
    assert run_cli("scheduler", "policy", "--queues", queues).code == 0
    assert run_cli("experiment", "create", TWELVE_A, "-f", settings).code == 0  # nlp: 12 GPUs, 4 borrowed
    assert run_cli("experiment", "create", TWELVE_B, "-f", settings).code == 0  # research is at its limit
    data = json.loads(run_cli("queues", "-o", "json").out)
    rows = {row["name"]: row for row in data["queues"]}
    assert list(rows) == ["research", "nlp", "everyone"] and data["default_queue"] == "everyone"
    nlp = rows["nlp"]
    assert (nlp["guarantee"], nlp["used"], nlp["borrowed"], nlp["lent"], nlp["limit"]) == (
        {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "12"}, {"nvidia.com/gpu": "4"}, {}, {})
    assert len(nlp["running"]) == 1 and len(nlp["waiting"]) == 1 and rows["research"]["waiting"] == nlp["waiting"]
    assert (rows["everyone"]["used"], rows["everyone"]["limit"], rows["everyone"]["waiting"]) == (
        {}, {"nvidia.com/gpu": "4"}, [])
    table = run_cli("queues").out.splitlines()
    assert table[0].split() == ["QUEUE", "GUARANTEE", "USE", "BORROWED", "LENT", "LIMIT", "WEIGHT", "RUNNING",
                                "WAITING"]
    assert table[2].split() == ["nlp", "8", "GPUs", "12", "GPUs", "4", "GPUs", "-", "-", "1", "1", "1"]


def test_queues_warns_about_guarantees_the_cluster_cannot_hold(run_cli, cluster, tmp_path):
    cluster.api.put(node("gpu-0", gpus=4, cpu="31910m", memory="240Gi"))
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)  # research is guaranteed 8 GPUs; the cluster has 4
    assert run_cli("scheduler", "policy", "--queues", queues).code == 0
    result = run_cli("queues")
    assert result.code == 0
    assert ("warning: the guarantees of nvidia.com/gpu (research) add up to 8 GPUs, and the cluster has 4 GPUs: "
            "reclaim cannot give every queue its guarantee at once") in result.err


def test_doctor_names_queues_whose_guarantees_the_cluster_cannot_hold(run_cli, cluster, tmp_path):
    cluster.api.put(node("gpu-0", gpus=4, cpu="31910m", memory="240Gi"))
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    assert run_cli("scheduler", "policy", "--queues", queues).code == 0
    result = run_cli("doctor")
    assert result.code == 0  # a warning, not a finding
    assert "warning: team queues: the guarantees of nvidia.com/gpu (research) add up to 8 GPUs" in result.err
    data = json.loads(run_cli("doctor", "-o", "json").out)
    assert data["unheldGuarantees"] == ["the guarantees of nvidia.com/gpu (research) add up to 8 GPUs, and the "
                                        "cluster has 4 GPUs: reclaim cannot give every queue its guarantee at once"]


def test_queues_broken_by_hand_in_the_configmap_can_be_repaired(run_cli, cluster, tmp_path):
    from det_k8s.live.policy import POLICY_NAME, read_policy

    cluster.api.put({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": POLICY_NAME, "namespace": "default"},
                     "data": {"policy.json": json.dumps({"queues": {"queues": [{"name": "a", "weight": -1}]}})}})
    broken = run_cli("queues")
    assert broken.code == 1 and "queues.queues[0].weight: -1 is not a positive number" in broken.err
    queues = tmp_path / "queues.yaml"
    queues.write_text(QUEUES)
    repaired = run_cli("scheduler", "policy", "--queues", queues)
    assert repaired.code == 0 and "starting again from the defaults" in repaired.err
    assert read_policy(cluster.connect(), "default").queues is not None


def test_a_reclaim_out_of_the_passes_reach_is_named_by_list_and_doctor(run_cli, cluster, tmp_path):
    """Team b borrows a's guarantee with det-k8s experiments of namespace team-b; a pass for namespace default
    deletes only its own namespace's experiments, so a's experiment waits, and both commands say why exactly."""
    from tests.support.kube_objects import running

    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    for pod in running("b1", ["gpu-0", "gpu-1", "gpu-2"], gpus=4, namespace="team-b"):
        cluster.api.put(pod)
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    queues = tmp_path / "queues.yaml"
    queues.write_text("queues:\n- {name: a, guarantee: {nvidia.com/gpu: 12}, members: {namespaces: [default]}}\n"
                      "- {name: b, members: {namespaces: [team-b]}}\n")
    assert run_cli("scheduler", "policy", "--queues", queues).code == 0
    assert run_cli("experiment", "create", TWELVE_A, "-f", settings).code == 0
    assert cluster.api.count("DELETE", "pods") == 0 and cluster.api.count("POST", "pods") == 0
    line = ("its queue could reclaim 12 GPUs lent to b, but det-k8s experiments of namespace team-b hold them, and a "
            "pass evicts only its own namespace's experiments and the Determined master's trials")
    listed = json.loads(run_cli("experiment", "list", "-o", "json").out)
    (entry,) = listed["experiments"]
    assert line in entry["reason"]
    result = run_cli("doctor")
    assert result.code == 0 and line in result.err
    assert line in json.loads(run_cli("doctor", "-o", "json").out)["unreachableReclaims"][0]


def test_plan_names_what_a_reclaim_takes_back_and_from_whom(run_cli, tmp_path):
    from tests.support.kube_objects import node as snapshot_node
    from tests.support.kube_objects import running

    items = [snapshot_node(f"gpu-{i}", 4) for i in range(3)]
    for i in range(3):
        items += running(f"b{i}", [f"gpu-{i}"], gpus=4, namespace="default", priority=90,
                         created=f"2024-01-01T0{i}:00:00Z")
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    policy = tmp_path / "queues.yaml"
    policy.write_text("queues:\n- {name: a, guarantee: {nvidia.com/gpu: 12}, members: {users: [alice]}}\n"
                      "- {name: b, members: {users: [bob]}}\n")
    result = run_cli("plan", TWELVE_A, "--snapshot", snapshot, "--policy", policy, "--user", "alice", "-o", "json")
    assert result.code == 0, result.err
    (record,) = json.loads(result.out)["experiments"]
    assert record["status"] == "placed"
    assert record["reason"].startswith("waiting to reclaim 12 GPUs lent to b; after preempting ")
    assert record["reclaims"] == [{"from": "b", "resource": "nvidia.com/gpu", "amount": "12"}]
