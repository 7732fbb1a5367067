"""Issue 25, a newcomer's first hour: what a helm/kubectl user tries first does what they expect."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.conftest import example

EXPERIMENTS = example("experiments")
SNAPSHOTS = example("snapshots")
URGENT = EXPERIMENTS / "high-priority-8gpu.yaml"
MIXED = SNAPSHOTS / "mixed-cluster.yaml"
SETTINGS = example("gpu-cluster.yaml")


def test_plan_names_the_queue_it_planned_and_the_lower_priority_groups_elsewhere(run_cli):
    result = run_cli("plan", URGENT, "--snapshot", MIXED, "-f", SETTINGS, "--preemption")
    assert result.code == 0, result.err
    assert "no lower-priority group in this queue to evict" in result.out
    line = next(line for line in result.err.splitlines() if "planned for the queue" in line)
    assert "namespace default" in line
    assert "namespace determined: hp-sweep-trial-3 (priority 10)" in line
    assert "plan with -n determined" in line
    assert "llm-pretrain" in line  # priority 80 < 90: also a candidate there


def test_plan_in_the_victims_namespace_preempts_and_says_nothing_more(run_cli):
    result = run_cli("plan", URGENT, "--snapshot", MIXED, "-f", SETTINGS, "-n", "determined", "--preemption")
    assert result.code == 0, result.err
    assert "hp-sweep-trial-3" in result.out and "1 running group(s) preempted" in result.err
    assert "planned for the queue" not in result.err


def test_piped_map_lines_are_whole_not_cut_at_80_columns(run_cli, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    result = run_cli("plan", URGENT, "--snapshot", MIXED, "-f", SETTINGS, "-n", "determined", "--preemption", "--map")
    assert result.code == 0, result.err
    assert "planned, 2 pods; 8 slots in place of A" in result.out
    assert not [line for line in result.out.splitlines() if re.search(r"[a-z)]\.\.\.$", line)]  # nothing cut
    assert any(len(line) > 80 for line in result.out.splitlines())


@pytest.mark.parametrize("word", ["json", "yaml", "table", "wide", "JSON"])
def test_render_o_with_an_output_format_is_refused_and_writes_nothing(run_cli, tmp_path, monkeypatch, word):
    monkeypatch.chdir(tmp_path)
    result = run_cli("render", "-f", SETTINGS, "-o", word)
    assert result.code == 2
    assert result.err.splitlines() == [
        f"error: -o {word}: render writes a chart directory, it has no output format; name the directory with "
        f"--output-dir DIR (a directory named {word}: --output-dir ./{word})"]
    assert list(tmp_path.iterdir()) == []


def test_render_output_dir_is_helms_spelling_and_o_dir_still_works_with_a_note(run_cli, tmp_path):
    new = run_cli("render", "-f", SETTINGS, "--output-dir", tmp_path / "a")
    assert new.code == 0, new.err
    assert (tmp_path / "a" / "values.yaml").exists() and "note:" not in new.err
    old = run_cli("render", "-f", SETTINGS, "-o", tmp_path / "b")
    assert old.code == 0, old.err
    assert (tmp_path / "b" / "values.yaml").exists()
    assert f"note: -o {tmp_path / 'b'} is --output-dir {tmp_path / 'b'} (helm's spelling" in old.err
    neither = run_cli("render", "-f", SETTINGS)
    assert neither.code == 2 and "--output-dir DIR" in neither.err


def test_a_second_render_keeps_the_files_the_user_added(run_cli, tmp_path):
    out = tmp_path / "chart"
    assert run_cli("render", "-f", SETTINGS, "--output-dir", out).code == 0
    (out / "my-notes.txt").write_text("mine")
    again = run_cli("render", "-f", SETTINGS, "--output-dir", out)
    assert again.code == 2
    assert "holds files det-k8s did not write (my-notes.txt)" in again.err
    assert (out / "my-notes.txt").read_text() == "mine"


@pytest.mark.parametrize("args", [["nodes", "list", "-o", "wide"], ["plan", "x.yaml", "--snapshot", "s.json", "-o", "wide"],
                                  ["get", "values", "demo", "-o", "table"]])
def test_unknown_output_formats_name_the_valid_ones_in_one_line(run_cli, args):
    result = run_cli(*args)
    assert result.code == 2
    assert "Value error" not in result.err and "Traceback" not in result.err
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: -o {args[-1]}: not an output format")
    assert ("table, json and yaml" if args[0] != "get" else "yaml and json") in lines[0]


@pytest.mark.parametrize("command", ["install", "upgrade"])
def test_helms_version_flag_points_at_app_version_in_one_line(run_cli, command):
    result = run_cli(command, "demo", "-f", SETTINGS, "--version", "0.36.0")
    assert result.code == 2
    assert result.err.splitlines() == [
        "error: --version 0.36.0: the bundled chart has no versions of its own; the Determined release is appVersion; "
        "add --set appVersion=0.36.0 (or appVersion: in a -f file)"]


def test_nodes_map_of_a_snapshot_without_settings_says_taints_hide_capacity_and_suggests_f(run_cli):
    bare = run_cli("nodes", "map", "--snapshot", MIXED)
    assert bare.code == 0, bare.err
    assert "26 free (0 where Determined's pods may run)" in bare.out
    assert ("warning: no settings file given: Determined's task pods are taken to tolerate no taint, so 7 of 7 nodes "
            "show a taint that keeps them off; pass -f with your settings (their pod specs' tolerations), as plan "
            "does") in bare.err.splitlines()
    given = run_cli("nodes", "map", "--snapshot", MIXED, "-f", SETTINGS)
    assert given.code == 0 and "no settings file given" not in given.err
    assert "26 free (2 where Determined's pods may run)" in given.out
    untainted = run_cli("nodes", "map", "--snapshot", SNAPSHOTS / "fragmented.yaml")
    assert untainted.code == 0 and "no settings file given" not in untainted.err


def test_root_help_lists_each_command_description_whole(run_cli):
    result = run_cli("--help")
    commands = result.out.split("Commands:", 1)[1]
    assert "..." not in commands
    assert "write a complete chart\n              directory helm can install." in commands


def test_offline_help_does_not_talk_about_clusters_or_helm_it_never_runs(run_cli):
    text = " ".join(run_cli("plan", "-h").out.split())
    namespace = text.split("-n, --namespace NAME", 1)[1].split("-v, --verbose", 1)[0]
    assert "queue to plan for" in namespace and "context" not in namespace
    verbose = text.split("-v, --verbose", 1)[1].split("--debug", 1)[0]
    assert "kubectl" not in verbose and "-vv also how long each step took" in verbose


@pytest.mark.parametrize("args", [["nodes", "label", "gpu-0"], ["nodes", "unlabel", "gpu-0"],
                                  ["nodes", "taint", "gpu-0", "a=b:NoSchedule"], ["nodes", "list"]])
def test_node_commands_take_no_namespace(run_cli, args):
    result = run_cli(*args, "-n", "ml")
    assert result.code == 2
    assert result.err.splitlines() == [f"error: -n ml: nodes belong to no namespace; nodes {args[1]} takes no -n; "
                                       "drop -n"]
    assert "-n, --namespace" not in run_cli(*args[:2], "-h").out


def test_vv_prints_timings_and_v_does_not(run_cli):
    args = ("plan", EXPERIMENTS / "distributed-16gpu.yaml", "--snapshot", SNAPSHOTS / "three-4gpu-nodes.yaml")
    once = run_cli(*args, "-v")
    assert once.code == 0 and "timing:" not in once.err
    twice = run_cli(*args, "-vv")
    assert twice.code == 0
    timings = [line for line in twice.err.splitlines() if line.startswith("timing: ")]
    assert [line.split(":")[1].strip().split(" (")[0] for line in timings] == [
        f"reading the snapshot {SNAPSHOTS / 'three-4gpu-nodes.yaml'}", "reading the settings and experiments",
        "scheduling pass", "det-k8s plan"]
    assert re.fullmatch(r"timing: det-k8s plan: \d+\.\d\d s in all \(exit 0\)", timings[-1])


def test_a_short_s3_access_key_that_is_also_the_hosts_name_leaves_other_messages_readable(run_cli, tmp_path):
    settings = tmp_path / "minio.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage:\n  type: s3\n  bucket: b\n  accessKey: minio\n"
                        "  secretKey: minio-secret-123\n  endpointUrl: minio:9000\n")
    result = run_cli("validate", "-f", settings, "--set", "checkpointStorage.accessKey=minio")
    assert result.code == 1
    assert (f"error: checkpointStorage.endpointUrl: must be an http(s) URL, found 'minio:9000'; for example "
            f"http://minio.example.com:9000 ({settings}:7)") in result.out.splitlines()
    assert "minio-secret-123" not in result.out + result.err


def test_a_short_secret_that_is_no_settings_word_is_still_masked_everywhere():
    from det_k8s.scrub_output import Scrubber

    scrub = Scrubber(["minio", "hunter2"], plain=["http://minio:9000"])
    assert scrub("found 'minio:9000' for hunter2") == "found 'minio:9000' for ***"
    for field in ("accessKey: minio", "access_key=minio", '"secretKey": "minio"', "--set s.accessKey=minio",
                  "AWS_ACCESS_KEY_ID=minio"):
        assert "minio" not in scrub(field), field
    assert Scrubber(["minio"])("found 'minio:9000'") == "found '***:9000'"  # no settings word: masked everywhere


@pytest.mark.parametrize("key", ["db.password", "initialUserPassword", "checkpointStorage.secretKey"])
def test_secret_set_errors_keep_their_closing_parenthesis(run_cli, key):
    result = run_cli("validate", "-f", SETTINGS, "--set", f"{key}=1")
    assert result.code == 1
    (line,) = [line for line in result.out.splitlines() if line.startswith(f"error: {key}:")]
    assert line.endswith(f"(--set {key}=***)")


def test_an_escaped_set_key_is_reported_as_written(run_cli):
    result = run_cli("validate", "-f", SETTINGS, "--set", "db\\.password=x")
    assert result.code == 1
    assert "error: db\\.password: unknown key (--set db\\.password=***)" in result.out.splitlines()


def test_a_storage_type_the_release_lacks_is_the_first_and_only_storage_problem(run_cli):
    result = run_cli("validate", "-f", SETTINGS, "--set", "checkpointStorage.type=hdfs")
    assert result.code == 1
    assert result.out.splitlines() == [
        "error: checkpointStorage.type: Determined 0.38.1 has no hdfs checkpoint storage (removed in 0.23.0); set "
        "appVersion below 0.23.0, or remove it (--set checkpointStorage.type=hdfs)"]
    old = run_cli("validate", "-f", SETTINGS, "--set", "checkpointStorage.type=hdfs", "--set", "appVersion=0.17.15",
                  "--set", "initialUserPassword=null")
    assert "error: checkpointStorage.hdfsUrl: required when checkpointStorage.type is hdfs" in old.out


EFA = "vpc.amazonaws.com/efa"


def efa_cluster(tmp_path, *, efa_nodes: int, busy: int):
    """Four 4-GPU nodes; the first `efa_nodes` also offer an EFA device; the first `busy` have their GPUs taken."""
    items = []
    for i in range(4):
        allocatable = {"cpu": "31910m", "memory": "240Gi", "nvidia.com/gpu": "4", "pods": "110",
                       **({EFA: "1"} if i < efa_nodes else {})}
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"gpu-{i}"}, "spec": {},
                      "status": {"allocatable": allocatable, "capacity": allocatable,
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
    for i in range(busy):
        items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"busy-{i}", "namespace": "x"},
                      "spec": {"nodeName": f"gpu-{i}", "containers": [
                          {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]},
                      "status": {"phase": "Running"}})
    snapshot = tmp_path / "efa.yaml"
    snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    experiment = tmp_path / "efa-exp.yaml"
    experiment.write_text(yaml.safe_dump({
        "name": "efa-exp", "resources": {"slots_per_trial": 8}, "entrypoint": "python3 train.py",
        "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 100}},
        "environment": {"pod_spec": {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
            {"name": "determined-container", "resources": {"requests": {EFA: "1"}, "limits": {EFA: "1"}}}]}}}}))
    return experiment, snapshot


def test_why_pending_counts_only_nodes_with_every_requested_resource_and_names_the_missing_one(run_cli, tmp_path):
    experiment, snapshot = efa_cluster(tmp_path, efa_nodes=2, busy=2)
    data = json.loads(run_cli("plan", experiment, "--snapshot", snapshot, "--set", "maxSlotsPerPod=4", "-o",
                              "json").out)
    (record,) = data["experiments"]
    assert record["status"] == "queued"
    assert record["reason"] == ("needs 2 pods x 4 nvidia.com/gpu; no free nvidia.com/gpu on its 2 eligible nodes "
                                "(8 allocatable: 8 in use); held by pods in x 8; 2 nodes excluded: 2 no " + EFA)
    assert "gpu-2" not in record["reason"] and "gpu-3" not in record["reason"]  # free GPUs, but no EFA


def test_a_group_that_never_fits_for_want_of_an_extended_resource_says_so(run_cli, tmp_path):
    experiment, snapshot = efa_cluster(tmp_path, efa_nodes=1, busy=0)
    result = run_cli("plan", experiment, "--snapshot", snapshot, "--set", "maxSlotsPerPod=4")
    assert result.code == 0, result.err
    assert ("never fits this cluster: needs 8 nvidia.com/gpu (2 pods x 4), cluster has 4 on 1 eligible node; "
            f"3 nodes excluded: 3 no {EFA}") in result.out
