"""Bad input to the GPU map, plan and snapshot surfaces: each test
failed before its fix."""

from __future__ import annotations

import pytest

from tests.conftest import example

SNAPSHOT = example("snapshots") / "fragmented.yaml"
SMALL = example("experiments") / "small-4gpu.yaml"


@pytest.mark.parametrize("key", ["\x1b[31m", "a b", "rack\n", "-zone", "x/" + "y" * 64])
def test_a_topology_key_that_is_no_label_key_is_a_usage_error(run_cli, key):
    result = run_cli("plan", SMALL, "--snapshot", SNAPSHOT, "--topology-key", key)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"error: --topology-key {key!r}"[:40]) and "not a node label key" in result.err
    assert "\x1b" not in result.err


def test_plan_topology_key_empty_still_turns_it_off(run_cli):
    assert run_cli("plan", SMALL, "--snapshot", SNAPSHOT, "--topology-key", "").code == 0


def test_scheduler_policy_refuses_a_topology_key_before_writing_it_for_everyone(run_cli, cluster):
    result = run_cli("scheduler", "policy", "--topology-key", "not a key")
    assert result.code == 2 and "--topology-key 'not a key': not a node label key" in result.err
    assert cluster.api.count("POST", "configmaps") == 0 and cluster.api.count("PUT", "configmaps") == 0
    assert run_cli("scheduler", "policy", "--topology-key", "example.com/rack").code == 0


@pytest.mark.parametrize("columns", ["20", "24", "30"])
def test_a_narrow_terminal_gets_no_line_wider_than_it(run_cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    width = int(columns)
    drawn = run_cli("nodes", "map", "--snapshot", example("snapshots") / "mixed-cluster.yaml")
    planned = run_cli("plan", example("experiments") / "distributed-16gpu.yaml",
                      example("experiments") / "high-priority-8gpu.yaml", "--preemption", "--snapshot", SNAPSHOT,
                      "--map")
    for result in (drawn, planned):
        assert result.code == 0, result.err
        assert [line for line in result.out.splitlines() if len(line) > width] == []
    assert "gpu" in drawn.out
    assert "Not placed, and why" in planned.out and "  distrib" in planned.out


def test_a_one_column_terminal_is_drawn_for_as_twenty_not_one_letter_a_line(run_cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1")
    result = run_cli("nodes", "map", "--snapshot", example("snapshots") / "mixed-cluster.yaml")
    assert result.code == 0 and "Now: 56 GPU slots..." in result.out
    assert max(len(line) for line in result.out.splitlines()) <= 20
    assert not [line for line in result.out.splitlines() if len(line.strip()) == 1]


@pytest.mark.parametrize(("env", "file", "source"), [
    ({"HELM_NAMESPACE": "../../x"}, "det", "HELM_NAMESPACE '../../x'"),
    ({"HELM_NAMESPACE": "det\n"}, "det", "HELM_NAMESPACE 'det\\n'"),
    ({}, "../kube-system", "the pod's namespace"),
])
def test_in_a_pod_the_namespace_is_checked_wherever_it_comes_from(tmp_path, env, file, source):
    from det_k8s.errors import UsageError
    from det_k8s.kube.incluster import in_cluster_target

    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("t")
    (account / "namespace").write_text(file)
    pod_env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443", **env}
    with pytest.raises(UsageError) as raised:
        in_cluster_target(pod_env, None, account)
    assert raised.value.message.startswith(source) and "not a valid namespace name" in raised.value.message
    assert in_cluster_target(pod_env, "research", account).namespace == "research"  # -n wins, as checked by -n


@pytest.mark.parametrize(("key", "value"), [
    ("masterCpuRequest", "\u0664"),  # ARABIC-INDIC DIGIT FOUR: Python's \d and int() take it for 4, Kubernetes not
    ("masterMemRequest", "\uff18Gi"),  # FULLWIDTH DIGIT EIGHT
    ("taskContainerDefaults.ncclPortRange", "\u0662\u0669\u0664\u0660\u0660:29500"),
])
def test_digits_other_than_ascii_are_not_numbers(run_cli, tmp_path, key, value):
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set-string", f"{key}={value}")
    assert result.code == 1, result.out
    assert f"error: {key}:" in result.err or f"error: {key}:" in result.out


def test_a_snapshot_quantity_in_other_digits_is_refused_naming_the_node(run_cli, tmp_path):
    import json

    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "g0"}, "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "\u0664"}}}]}))
    result = run_cli("nodes", "map", "--snapshot", snapshot)
    assert result.code == 1 and "node g0: nvidia.com/gpu:" in result.err and "not a quantity" in result.err


@pytest.mark.parametrize(("names", "message"), [
    (["g0", "g0"], "Node g0 is listed twice"),
    (["", "g1"], 'Node "": metadata.name: empty'),
])
def test_a_snapshot_with_a_node_twice_or_nameless_is_refused(run_cli, tmp_path, names, message):
    import json

    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": n},
         "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": str(4 * (i + 1))}}} for i, n in enumerate(names)]}))
    for args in (["nodes", "map"], ["plan", SMALL]):
        result = run_cli(*args, "--snapshot", snapshot)
        assert result.code == 1 and result.out == ""
        assert f"error: {snapshot}: {message}" in result.err


HOSTILE_NAME = "g\x1b[2J\x9b2J\u202eevil"  # ESC clears the screen, U+009B is CSI alone, U+202E reverses the line


def test_names_from_a_snapshot_never_drive_the_terminal_in_tables_either(run_cli, tmp_path):
    import json

    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": HOSTILE_NAME},
         "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "4"}}}]}))
    planned = run_cli("plan", SMALL, "--snapshot", snapshot)
    drawn = run_cli("nodes", "map", "--snapshot", snapshot)
    for result in (planned, drawn):
        assert result.code == 0, result.err
        assert not {"\x1b", "\x9b", "\u202e"} & set(result.out), result.out
    assert "g?[2J?2J?evil" in planned.out and "g?[2J?2J?evil" in drawn.out
    data = json.loads(run_cli("plan", SMALL, "--snapshot", snapshot, "-o", "json").out)  # the data keeps the name
    assert data["experiments"][0]["pods"][0]["node"] == HOSTILE_NAME


def test_another_users_experiment_name_never_drives_the_terminal(run_cli, cluster, tmp_path):
    import json

    from tests.cli.test_experiment_commands import entries
    from tests.support.k8s_emulator import node

    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    experiment = tmp_path / "e.yaml"
    experiment.write_text(json.dumps({"name": "x\x1b]0;owned\x07\x1b[2J", "resources": {"slots_per_trial": 4},
                                      "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}}}))
    assert run_cli("experiment", "create", experiment, "-f", settings, "--user", "eve\x1b[2J").code == 0
    (entry,) = entries(cluster).values()
    for args in (["experiment", "list"], ["experiment", "describe", entry["id"]]):
        result = run_cli(*args)
        assert result.code == 0, result.err
        assert "\x1b" not in result.out and "\x07" not in result.out and "x?]0;owned??[2J" in result.out


def test_describe_of_a_group_whose_node_is_gone_draws_no_empty_map(run_cli, cluster, tmp_path):
    from tests.cli.test_experiment_commands import entries
    from tests.support.k8s_emulator import node

    cluster.api.put(node("gpu-0", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    assert run_cli("experiment", "create", SMALL, "-f", settings).code == 0
    (entry,) = entries(cluster).values()
    cluster.api.remove("nodes", "gpu-0")
    result = run_cli("experiment", "describe", entry["id"])
    assert result.code == 0, result.err
    assert "no node offers GPUs" not in result.out and "0 GPU slots" not in result.out
    assert "warning: node gpu-0 is not in the cluster (deleted or replaced?)" in result.err


def test_a_plan_onto_a_node_beyond_the_drawn_cells_counts_every_planned_slot(run_cli, tmp_path):
    import json

    snapshot = tmp_path / "big.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": "big"},
         "status": {"allocatable": {"cpu": "1000", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(10**9)}}},
        {"kind": "Pod", "metadata": {"name": "x", "namespace": "kube-system"}, "status": {"phase": "Running"},
         "spec": {"nodeName": "big", "containers": [{"name": "c"}]}}]}))
    experiment = tmp_path / "e.yaml"
    experiment.write_text("name: wide\nresources: {slots_per_trial: 8000}\n"
                          "searcher: {name: single, metric: loss, max_length: {batches: 1}}\n")
    result = run_cli("plan", experiment, "--snapshot", snapshot, "--set", "maxSlotsPerPod=4000", "--map", "-o", "json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    planned = sum(pod["slots"] for pod in data["experiments"][0]["pods"])
    (holder,) = data["map"]["holders"].values()
    (row,) = data["map"]["nodes"]
    assert planned == holder["slots"] == 8000  # the map said 1,024: the drawn cells only
    assert row["notDrawn"]["planned"] + sum(c["kind"] == "planned" for c in row["cells"]) == 8000
    assert row["free"] == 10**9 - 8000


def amd_node(name: str, gpus: int = 8) -> dict:
    from tests.support.k8s_emulator import node

    obj = node(name, cpu="63910m", memory="240Gi")
    for field in ("allocatable", "capacity"):
        obj["status"][field]["amd.com/gpu"] = str(gpus)
    return obj


@pytest.fixture
def rocm(tmp_path):
    settings = tmp_path / "rocm.yaml"
    settings.write_text("maxSlotsPerPod: 8\nslotType: rocm\ncheckpointStorage: {type: s3, bucket: b}\n")
    return settings


def test_an_amd_cluster_with_slot_type_rocm_is_mapped_and_planned_in_amd_gpus(run_cli, tmp_path, rocm):
    import json

    snapshot = tmp_path / "amd.json"
    held = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "namespace": "det", "labels": {"determined": "a1"}},
            "spec": {"nodeName": "a0", "containers": [{"name": "c", "resources": {"requests": {"amd.com/gpu": "3"}}}]},
            "status": {"phase": "Running"}}
    snapshot.write_text(json.dumps({"kind": "List", "items": [amd_node("a0"), amd_node("a1"), held]}))
    drawn = run_cli("nodes", "map", "--snapshot", snapshot, "-f", rocm)
    assert drawn.code == 0, drawn.err
    assert drawn.out.startswith("Now: 16 GPU slots (amd.com/gpu) on 2 nodes\n")  # was "0 ... no node offers GPUs"
    assert "  a0  AAA.....  5 free" in drawn.out
    planned = run_cli("plan", example("experiments") / "high-priority-8gpu.yaml", "--snapshot", snapshot, "-f", rocm,
                      "--map", "-o", "json")
    assert planned.code == 0, planned.err  # was rejected: its pods asked for nvidia.com/gpu
    data = json.loads(planned.out)
    assert data["experiments"][0]["status"] == "placed" and data["map"]["resource"] == "amd.com/gpu"


def test_experiment_create_with_slot_type_rocm_asks_for_amd_gpus(run_cli, cluster, rocm):
    cluster.api.put(amd_node("a0"))
    result = run_cli("experiment", "create", example("experiments") / "high-priority-8gpu.yaml", "-f", rocm)
    assert result.code == 0, result.err
    (pod,) = cluster.api.items("pods")
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["requests"]["amd.com/gpu"] == "8" and "nvidia.com/gpu" not in str(pod)


@pytest.mark.parametrize("columns", ["27", "32", "45"])
def test_an_unusable_nodes_state_never_drops_off_a_narrow_row(run_cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    result = run_cli("nodes", "map", "--snapshot", example("snapshots") / "mixed-cluster.yaml")
    assert result.code == 0, result.err
    rows = [line for line in result.out.splitlines() if line.startswith("  gpu-4 ")]
    # either the row says the node is cordoned (readably), or the pool summary counts it as unavailable
    assert all("cordoned" in row for row in rows), rows
    assert rows or "1 cordoned" in result.out.replace("\n  ", " ")


def test_a_throttled_api_server_is_waited_for_as_kubectl_waits(run_cli, cluster, tmp_path):
    from tests.cli.test_experiment_commands import entries
    from tests.support.k8s_emulator import node

    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    cluster.api.fail("POST", "pods", 429, "too many requests, please try again later", times=2, retry_after="0")
    cluster.api.fail("GET", "nodes", 429, "too many requests, please try again later", times=1, retry_after="0")
    result = run_cli("experiment", "create", example("experiments") / "distributed-12gpu-a.yaml", "-f", settings)
    assert result.code == 0, result.err  # was: exit 1, "the rollback is not complete", nothing created
    assert [e["state"] for e in entries(cluster).values()] == ["running"] and len(cluster.api.items("pods")) == 3


def test_an_api_server_that_stays_throttled_is_one_line_naming_it(run_cli, cluster):
    cluster.api.fail("GET", "nodes", 429, "too many requests", times=100, retry_after="0")
    result = run_cli("nodes", "list")
    assert result.code == 1 and result.out == ""
    assert result.err.startswith("error: nodes: the API server kept answering 429 Too Many Requests (11 tries, 0s of "
                                 "waiting)")
    assert "try again later" in result.err and cluster.api.count("GET", "nodes") == 11


def test_a_throttled_request_waits_no_longer_than_its_read_timeout_in_all(cluster):
    """Retry-After is honoured while the waits fit the request's budget (its read timeout, at most 20 s), so a Lease
    renewal held back by 429s never lands long after it was written (10 waits of 10 s would be 100 s)."""
    from det_k8s.errors import ClusterError
    from det_k8s.kube.api import KubeApi
    from det_k8s.kube.kinds import NODES

    cluster.api.fail("GET", "nodes", 429, "too many requests", times=100, retry_after="1")
    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig), timeout=(5.0, 2.5))
    with pytest.raises(ClusterError) as raised:
        api.list(NODES)
    assert "kept answering 429 Too Many Requests (3 tries, 2s of waiting)" in raised.value.message
    assert cluster.api.count("GET", "nodes") == 3  # waited 1 s twice; a third wait would pass 2.5 s


@pytest.mark.parametrize("args", [
    ["history", "demo", "--max", "99999999999999999999"],
    ["rollback", "demo", "99999999999999999999", "--dry-run"],
    ["get", "values", "demo", "--revision", "99999999999999999999"],
    ["status", "demo", "--tail", "-1"],
    ["status", "demo", "--tail", "99999999999999999999"],
])
def test_numbers_helm_and_the_api_cannot_take_are_usage_errors_before_anything_runs(run_cli, args):
    result = run_cli(*args)  # no cluster, no helm: the flag is refused first
    assert result.code == 2, result.err
    flag = next((a for a in args if a.startswith("--") and a != "--dry-run"), "REVISION")
    assert result.err.startswith(f"error: {flag} '") and "kubeconfig" not in result.err


def test_a_name_quoted_in_an_error_line_never_drives_the_terminal(run_cli, tmp_path):
    import json

    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": HOSTILE_NAME},
         "status": {"conditions": "x", "allocatable": {"cpu": "8", "nvidia.com/gpu": "2"}}}]}))
    result = run_cli("nodes", "map", "--snapshot", snapshot)
    assert result.code == 1 and "status.conditions" in result.err
    assert not {"\x1b", "\x9b", "\u202e"} & set(result.err) and "g?[2J?2J?evil" in result.err
    assert result.err.count("\n") == 1  # still one line


@pytest.mark.parametrize("name", ["g" + "1" * 5000, "n1\u00b22"])
def test_node_names_sort_naturally_whatever_their_digits(run_cli, tmp_path, name):
    import json

    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps({"kind": "List", "items": [
        {"kind": "Node", "metadata": {"name": n}, "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "2"}}}
        for n in (name, "g10", "g2")]}))
    result = run_cli("nodes", "map", "--snapshot", snapshot, "-o", "json")
    assert result.code == 0, result.err  # was: internal error: ValueError (int() of 5,000 digits, or of "²")
    names = [row["name"] for row in json.loads(result.out)["nodes"]]
    assert names.index("g2") < names.index("g10") and name in names


@pytest.mark.parametrize("selector", [")", "a in (x", "a=b c", "!", "a=" + "v" * 64])
@pytest.mark.parametrize("command", [["pods", "list"], ["pods", "cleanup", "--yes"]])
def test_a_pod_selector_kubectl_would_refuse_is_a_usage_error_before_anything_is_listed(run_cli, cluster, command,
                                                                                         selector):
    result = run_cli(*command, "-l", selector)
    assert result.code == 2, result.err  # was: "no task pods" (the API server's 400 aside), or a selector quietly cut
    assert result.err.startswith("error: --selector: label selector ") and result.err.count("\n") == 1
    assert cluster.api.count("GET", "pods") == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--image", ""], "--image '': not an image reference"),
    (["--image", "a b"], "--image 'a b': not an image reference"),
    (["--image", "x\x1b[2J"], "--image 'x\\x1b[2J': not an image reference"),
    (["nope"], "NODE nope: no such node in the cluster"),
])
def test_check_gpu_refuses_what_would_only_wait_out_its_timeout(run_cli, cluster, args, message):
    from tests.support.k8s_emulator import node

    cluster.api.put(node("gpu-0", gpus=4))
    result = run_cli("nodes", "check-gpu", *args, "--timeout", "30s")
    assert result.code == 2 and f"error: {message}" in result.err  # was: a pod created, Pending until the timeout
    assert cluster.api.count("POST", "pods") == 0
