"""`det-k8s render` and `det-k8s validate` through the real entry point: output, exit codes, no tracebacks."""

from __future__ import annotations

import json
import stat

import yaml

from tests.conftest import example


def test_render_writes_the_chart_and_says_where(run_cli, tmp_path):
    result = run_cli("render", "-f", example("gpu-cluster.yaml"), "--output-dir", tmp_path / "chart")
    assert result.code == 0, result.err
    assert "Wrote chart to" in result.err and result.out == ""
    values = tmp_path / "chart" / "values.yaml"
    assert stat.S_IMODE(values.stat().st_mode) == 0o600
    assert yaml.safe_load(values.read_text())["maxSlotsPerPod"] == 4


def test_render_never_prints_secrets(run_cli, tmp_path):
    result = run_cli("render", "-f", example("cpu-azure.yaml"), "--set", "db.password=hunter2-secret",
                     "--output-dir", tmp_path / "chart", "-v")
    assert result.code == 0
    assert "hunter2-secret" not in result.out + result.err
    assert "AccountKey" not in result.out + result.err


def test_render_with_errors_lists_each_and_writes_nothing(run_cli, tmp_path):
    result = run_cli("render", "-f", example("gpu-cluster.yaml"), "--set", "maxSlotPerPod=3",
                     "--set", "checkpointStorage.bucket=null", "--output-dir", tmp_path / "chart")
    assert result.code == 1
    lines = result.err.strip().splitlines()
    assert lines == [
        "error: maxSlotPerPod: unknown key; did you mean maxSlotsPerPod? (--set maxSlotPerPod=3)",
        "error: checkpointStorage.bucket: required when checkpointStorage.type is s3 "
        "(--set checkpointStorage.bucket=null)",
    ]
    assert not (tmp_path / "chart").exists()


def test_render_sets_override_files(run_cli, tmp_path):
    result = run_cli("render", "-f", example("gpu-cluster.yaml"), "--set", "maxSlotsPerPod=8",
                     "--set-string", "clusterName=0123", "--output-dir", tmp_path / "c")
    assert result.code == 0
    values = yaml.safe_load((tmp_path / "c" / "values.yaml").read_text())
    assert (values["maxSlotsPerPod"], values["clusterName"]) == (8, "0123")


def test_render_into_a_user_chart(run_cli, tmp_path):
    chart = tmp_path / "official"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v1\nname: determined\nversion: 0.17.15\nappVersion: 0.17.15\n")
    result = run_cli("render", "-f", example("gpu-cluster.yaml"), "--set-string", "appVersion=0.38.1",
                     "--chart", chart, "--output-dir", tmp_path / "out")  # the settings' release, not the chart's
    assert result.code == 0, result.err
    assert (chart / "Chart.yaml").read_text().endswith("appVersion: 0.17.15\n")
    assert not (chart / "values.yaml").exists()


def test_validate_reports_all_problems_on_stdout_and_exits_1(run_cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("maxSlotPerPod: 4\ncheckpointStorage:\n  type: s3\nslotType: gpus\n")
    result = run_cli("validate", "--upgrade", "-f", bad, "--set", "detK8sScheduler.image=registry.example.com/d:1")
    assert result.code == 1
    assert result.out.splitlines() == [
        f"error: maxSlotPerPod: unknown key; did you mean maxSlotsPerPod? ({bad}:1)",
        f"error: slotType: must be one of gpu, cuda, cpu, rocm; found 'gpus'; did you mean gpu? ({bad}:4)",
        "error: maxSlotsPerPod: required; set it to the GPUs per node (the greatest common divisor of the node sizes)",
        f"error: checkpointStorage.bucket: required when checkpointStorage.type is s3 ({bad}:2)",
    ]
    assert result.err.strip() == "error: settings are invalid: 4 errors"


def test_validate_says_when_the_charts_scheduler_would_run_the_placeholder_image(run_cli):
    """The bundled chart deploys det-k8s's scheduler (gangScheduler: det-k8s): an image nobody built is said plainly,
    with how to provide one (issue 37: its pod sat in ImagePullBackOff and nothing said so)."""
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set", "detK8sScheduler.image=null")
    assert result.code == 0, result.err
    (line,) = [line for line in result.out.splitlines() if line.startswith("warning:")]
    assert line.startswith("warning: detK8sScheduler.image: unset: the chart's scheduler would run det-k8s:")
    assert "ImagePullBackOff" in line and "scripts/image" in line and "detK8sScheduler.enabled: false" in line
    dry = run_cli("install", "demo", "-f", example("gpu-cluster.yaml"), "--set", "detK8sScheduler.image=null",
                  "--skip-storage-check", "--dry-run")
    assert "warning: detK8sScheduler.image: unset: the chart's scheduler would run det-k8s:" in dry.out + dry.err
    quiet = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set", "detK8sScheduler.enabled=false")
    assert "detK8sScheduler" not in quiet.out + quiet.err


def test_validate_warnings_alone_exit_0_and_strict_makes_them_errors(run_cli, tmp_path):
    warn = tmp_path / "w.yaml"
    warn.write_text("maxSlotsPerPod: 1\n")  # shared_fs: a warning
    ok = run_cli("validate", "--upgrade", "-f", warn)
    assert ok.code == 0 and ok.out.startswith("warning: checkpointStorage.type: shared_fs is for testing only")
    strict = run_cli("validate", "--upgrade", "-f", warn, "--strict")
    assert strict.code == 1


def test_validate_against_nodes(run_cli):
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--nodes", example("nodes-mixed-gpu.yaml"),
                     "--set", "maxSlotsPerPod=8")
    assert result.code == 1
    assert "set maxSlotsPerPod to 4, the greatest common divisor" in result.out
    fine = run_cli("validate", "-f", example("cpu-azure.yaml"), "--nodes", example("nodes-cpu.yaml"))
    assert fine.code == 0, fine.out


def test_validate_json_output(run_cli, tmp_path):
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set", "slotType=tpu", "-o", "json")
    assert result.code == 1
    doc = json.loads(result.out)
    assert doc["valid"] is False
    assert doc["problems"][0]["key"] == "slotType"


def test_yaml_syntax_errors_name_the_file_and_line(run_cli, tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("maxSlotsPerPod: 4\ndb:\n  name: [unclosed\n")
    result = run_cli("validate", "-f", bad)
    assert result.code == 1
    assert result.err.startswith(f"error: {bad}:")
    assert "YAML syntax error" in result.err and "Traceback" not in result.err


def test_missing_file_is_one_line(run_cli, tmp_path):
    result = run_cli("validate", "-f", tmp_path / "nope.yaml")
    assert (result.code, result.err.strip()) == (1, f"error: {tmp_path / 'nope.yaml'}: no such settings file")


def test_no_settings_is_a_usage_error(run_cli):
    result = run_cli("validate")
    assert result.code == 2
    assert "no settings given" in result.err


def test_bad_set_expression_is_a_usage_error(run_cli):
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set", "novalue")
    assert result.code == 2
    assert "--set 'novalue'" in result.err


def test_unknown_option_is_a_usage_error(run_cli):
    result = run_cli("render", "--bogus")
    assert result.code == 2
    assert result.err == "error: det-k8s render: unknown option --bogus; did you mean --verbose? `det-k8s render -h` " \
                         "lists the options\n"


def test_global_options_work_before_and_after_the_command(run_cli, tmp_path):
    before = run_cli("-n", "ml", "--kube-context", "c", "-v", "render", "-f", example("cpu-azure.yaml"), "--output-dir",
                     tmp_path / "a")
    after = run_cli("render", "-f", example("cpu-azure.yaml"), "--output-dir", tmp_path / "b", "-v", "--debug")
    assert before.code == after.code == 0


def test_an_offline_command_takes_no_cluster_options_after_it(run_cli, tmp_path):
    result = run_cli("render", "-f", example("cpu-azure.yaml"), "--output-dir", tmp_path / "b", "--kube-context", "c")
    assert result.code == 2 and "det-k8s render contacts no cluster: it takes no --kube-context" in result.err


def test_version(run_cli):
    from det_k8s import __version__

    result = run_cli("--version")
    assert (result.code, result.out.strip()) == (0, f"det-k8s {__version__}")


def test_help_lists_the_commands(run_cli):
    result = run_cli("--help")
    assert result.code == 0
    assert "render" in result.out and "validate" in result.out


def test_validate_reads_the_live_clusters_nodes_when_a_context_is_given(run_cli, cluster):
    from tests.support.k8s_emulator import node

    cluster.api.put(node("gpu-0", gpus=4))
    cluster.api.put(node("gpu-1", gpus=6))
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--set", "checkpointStorage.bucket=b",
                     "--kube-context", "emulator")
    assert result.code == 1
    assert ("error: maxSlotsPerPod: 4 does not divide the GPUs of 1 node(s): gpu-1 (6); set maxSlotsPerPod to 2, the "
            "greatest common divisor of the node sizes (4, 6)") in result.out
    assert cluster.api.count("GET", "nodes") == 1


def test_validate_without_a_context_never_touches_the_cluster(run_cli, cluster):
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"))
    assert result.code == 0
    assert cluster.api.calls == []


def test_validate_against_an_unreachable_cluster_is_one_line(run_cli, tmp_path):
    from tests.support.k8s_emulator import RunningEmulator

    kc = RunningEmulator(url="http://127.0.0.1:9").write_kubeconfig(tmp_path / "kc", context="dead")
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--kubeconfig", kc, "--kube-context", "dead")
    assert result.code == 1
    assert result.err.strip().splitlines() == [
        "error: cannot reach the Kubernetes API at http://127.0.0.1:9 (context dead): [Errno 111] Connection refused; "
        "is the cluster up? check --kube-context and your kubeconfig"]


def test_a_device_or_binary_file_is_refused_at_its_first_nul_byte(run_cli, tmp_path):
    result = run_cli("validate", "-f", "/dev/zero")  # never opened: a device is not a regular file
    assert (result.code, result.err.strip()) == (
        1, "error: /dev/zero: a device, not a regular file; det-k8s reads only regular files and stdin; save it "
           "to a file, or pipe it in and pass -")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"maxSlotsPerPod: 4\n\0\0")
    assert run_cli("validate", "-f", binary).err.strip() == (
        "error: " + str(binary) + ": binary data (a NUL byte), not text; is this the right settings file?")
    late = tmp_path / "late.yaml"
    late.write_bytes(b"maxSlotsPerPod: 4\n" + b" " * (3 * 2**20) + b"\0")  # the NUL sits past the first chunks
    assert "binary data (a NUL byte)" in run_cli("validate", "-f", late).err


def test_a_huge_text_file_is_refused_cleanly(run_cli, tmp_path):
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"#" * (16 * 2**20 + 1))
    result = run_cli("validate", "-f", huge)
    assert (result.code, result.err.strip()) == (1, f"error: {huge}: larger than 16 MiB; is this the right settings file?")
    huge.write_bytes(b"maxSlotsPerPod: 4\n" + b"#" * (16 * 2**20 - 18))  # exactly the limit is still read
    assert "larger than" not in run_cli("validate", "-f", huge).err


def test_a_utf16_file_is_named_as_such_with_the_way_out(run_cli, tmp_path):
    windows = tmp_path / "values.yaml"
    windows.write_bytes("maxSlotsPerPod: 4\n".encode("utf-16"))  # what PowerShell's `>` writes
    result = run_cli("validate", "-f", windows)
    assert (result.code, result.err.strip()) == (1, f"error: {windows}: UTF-16 text; det-k8s reads UTF-8; "
                                                     "save it as UTF-8 (in PowerShell: ... | Out-File -Encoding utf8)")


def test_a_utf8_byte_order_mark_is_accepted_and_bad_bytes_are_located(run_cli, tmp_path):
    marked = tmp_path / "marked.yaml"
    marked.write_bytes(b"\xef\xbb\xbfmaxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    assert run_cli("validate", "--upgrade", "-f", marked).code == 0
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"\xef\xbb\xbfclusterName: caf\xe9\n")
    result = run_cli("validate", "-f", latin1)
    assert (result.code, result.err.strip()) == (  # the BOM's 3 bytes + "clusterName: caf" come first
        1, f"error: {latin1}: not UTF-8 text (byte 20 is not valid UTF-8); save it as UTF-8")


def test_validate_against_an_empty_node_list_fails(run_cli, tmp_path):
    empty = tmp_path / "nodes.yaml"
    empty.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    result = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--nodes", empty)
    assert result.code == 1 and f"error: {empty}: no Node objects in it; nothing can be checked" in result.err


CLOUDS = example("gpu-cluster.yaml").parents[1] / "tests" / "data" / "clouds"


def test_validate_against_a_clouds_gpu_nodes_counts_the_toleration_admission_adds(run_cli, tmp_path):
    """GKE and EKS taint GPU nodes with `nvidia.com/gpu` and their admission gives GPU pods the toleration (issue
    12's detection, as plan and the map decide it): the GPU checks run on those nodes, they are not 'no usable
    node offers nvidia.com/gpu'. A maxSlotsPerPod that does not divide their 8 GPUs is the error it is."""
    settings = tmp_path / "s.yaml"
    settings.write_text("maxSlotsPerPod: 3\ncheckpointStorage: {type: s3, bucket: b}\n")
    for cloud in ("gke", "eks"):
        result = run_cli("validate", "--upgrade", "-f", settings, "--nodes", CLOUDS / f"{cloud}.yaml")
        assert result.code == 1 and "maxSlotsPerPod: 3 does not divide the GPUs of" in result.out, result.out
        assert "no usable node" not in result.out + result.err
        settings.write_text("maxSlotsPerPod: 8\ncheckpointStorage: {type: s3, bucket: b}\n")
        assert run_cli("validate", "--upgrade", "-f", settings, "--nodes", CLOUDS / f"{cloud}.yaml").code == 0
        settings.write_text("maxSlotsPerPod: 3\ncheckpointStorage: {type: s3, bucket: b}\n")


def test_validate_warns_that_a_nodes_only_file_overstates_the_room_for_cpu_slots(run_cli, tmp_path):
    """On a CPU-slot cluster the slot check subtracts DaemonSet and determined-system pods' CPU: a file without pods
    (`kubectl get nodes`) makes every node look roomier than it is, so validate says so. GPU checks do not depend
    on pods (the GPUs per node), so a nodes-only file is all they need and nothing is said."""
    cpu = run_cli("validate", "-f", example("cpu-azure.yaml"), "--nodes", example("nodes-cpu.yaml"))
    assert cpu.code == 0 and "no pods were read" in cpu.out and "kubectl get nodes,pods -A -o json" in cpu.out
    gpu = run_cli("validate", "-f", example("gpu-cluster.yaml"), "--nodes", example("nodes-mixed-gpu.yaml"))
    assert gpu.code == 0 and "no pods" not in gpu.out + gpu.err
    with_pods = tmp_path / "cluster.yaml"
    nodes = yaml.safe_load(example("nodes-cpu.yaml").read_text())
    nodes["items"].append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kube-proxy-x", "namespace":
                           "kube-system", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name":
                                                               "kube-proxy", "uid": "1", "controller": True}]},
                           "spec": {"containers": [{"name": "p", "image": "x", "resources": {"requests": {"cpu":
                                                                                                           "100m"}}}]},
                           "status": {"phase": "Running"}})
    with_pods.write_text(yaml.safe_dump(nodes))
    listed = run_cli("validate", "-f", example("cpu-azure.yaml"), "--nodes", with_pods)
    assert listed.code == 0 and "no pods were read" not in listed.out
