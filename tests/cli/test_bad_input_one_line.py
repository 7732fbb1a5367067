"""Bad input of every kind: what crashed, hung or was accepted now gets one clear line.

`internal error` stays in det-k8s only as the last resort (cli/__init__.py, and the scheduler loop
that must survive a bug): `test_no_known_input_reaches_internal_error` runs every input that once
reached it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, example
from tests.support.k8s_emulator import node

EXP = example("experiments")
SNAPSHOT = example("snapshots") / "three-4gpu-nodes.yaml"
SETTINGS = example("gpu-cluster.yaml")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def nodes_with(**fields) -> str:
    obj = {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}
    for dotted, value in fields.items():
        section, key = dotted.split("__")
        obj.setdefault(section, {})[key] = value
    return json.dumps({"kind": "List", "items": [obj]})


BAD_POD = json.dumps({"kind": "List", "items": [
    {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}},
    {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "x"}}]})

# (case, files to write, argv with {file} placeholders, exit code, expected text in stderr)
CASES = [
    ("settings nested 600 deep", {"s.yaml": "a: " + "[" * 600 + "]" * 600}, ["validate", "-f", "{s.yaml}"], 1,
     "s.yaml:1: nested more than 100 levels deep"),
    ("experiment nested 5000 deep", {"e.yaml": "name: x\nresources: " + "[" * 5000 + "]" * 5000},
     ["plan", "{e.yaml}", "--snapshot", str(SNAPSHOT)], 1, "e.yaml:2: nested more than 100 levels deep"),
    ("snapshot nested 10000 deep", {"n.json": '{"kind":"List","items":' + "[" * 10000 + "]" * 10000 + "}"},
     ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "{n.json}"], 1, "nested more than 100 levels deep"),
    ("--set 4000 levels", {}, ["validate", "-f", str(SETTINGS), "--set", ".".join(["a"] * 4000) + "=1"], 2,
     "a key more than 100 levels deep"),
    ("--set maxSlotsPerPod of 5000 digits", {}, ["validate", "-f", str(SETTINGS), "--set", "maxSlotsPerPod=" + "9" * 5000],
     1, "maxSlotsPerPod: expected an integer, found a string"),
    ("maxSlotsPerPod of 5000 digits in a file", {"m.yaml": "maxSlotsPerPod: " + "9" * 5000},
     ["validate", "-f", "{m.yaml}"], 1, "m.yaml:1: maxSlotsPerPod: a number with more than 4300 digits"),
    ("node status.conditions a string", {"c.json": nodes_with(status__conditions="ready")},
     ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "{c.json}"], 1,
     "c.json: Node n1: status.conditions: expected a list, found a string"),
    ("node spec.taints a string", {"t.json": nodes_with(spec__taints="all")},
     ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "{t.json}"], 1,
     "t.json: Node n1: spec.taints: expected a list, found a string"),
    ("pod spec.containers a string", {"p.json": BAD_POD},
     ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "{p.json}"], 1,
     "p.json: Pod p: spec.containers: expected a list, found a string"),
    ("nodes file with a wrong shape", {"v.json": nodes_with(spec__taints="all")},
     ["validate", "-f", str(SETTINGS), "--nodes", "{v.json}"], 1, "v.json: Node n1: spec.taints"),
    ("a control byte in a snapshot", {"x.yaml": "kind: List\nitems: []\nx: \x07\n"},
     ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "{x.yaml}"], 1,
     "x.yaml:3: the control character 0x07 is not allowed in YAML"),
    ("an empty snapshot", {"empty.yaml": ""}, ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "{empty.yaml}"],
     1, "empty.yaml: no Node objects in it"),
    ("a snapshot of pods only", {"pods.json": json.dumps({"kind": "List", "items": []})},
     ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "{pods.json}"], 1, "no Node objects in it"),
    ("slots_per_trial 1000000000", {"big.yaml": "name: big\nresources: {slots_per_trial: 1000000000}\n"},
     ["plan", "{big.yaml}", "--snapshot", str(SNAPSHOT)], 0,
     "slots_per_trial 1000000000 would need 250000000 pods of 4 slots; det-k8s starts at most 10000 pods as one group"),
    ("maxSlotsPerPod 1e36 as a float", {"f.yaml": "maxSlotsPerPod: 1.0e+36\n"}, ["render", "-f", "{f.yaml}", "--output-dir",
     "{out}"], 1, "maxSlotsPerPod: expected an integer, found a number"),
    ("maxSlotsPerPod beyond any node", {"g.yaml": "maxSlotsPerPod: 99999999999999999999\n"},
     ["validate", "-f", "{g.yaml}"], 1, "maxSlotsPerPod: must be at most 4096"),
    ("a file name too long", {}, ["plan", str(EXP / "distributed-16gpu.yaml"), "--snapshot", "a" * 300], 1,
     "cannot read the snapshot file: File name too long"),
    ("checkpoint --timeout 9999999999999h", {}, ["checkpoint", "check", "-f", str(SETTINGS), "--timeout",
     "9999999999999h"], 2, "--timeout '9999999999999h': at most 1h0m0s (3600s)"),
    ("a release name with a trailing newline", {}, ["install", "demo\n", "-f", str(SETTINGS), "--dry-run"], 2,
     "RELEASE 'demo\\n': not a valid release name"),
    ("uninstall of a release name with a trailing newline", {}, ["uninstall", "demo\n", "--yes"], 2,
     "RELEASE 'demo\\n': not a valid release name"),
    ("install --dry-run -n ../x", {}, ["install", "demo", "-f", str(SETTINGS), "--dry-run", "-n", "../x"], 2,
     "--namespace '../x': not a valid namespace name"),
    ("nodes label with a node name ending in a newline", {}, ["nodes", "label", "gpu-0\n"], 2,
     "NODE 'gpu-0\\n': not a Kubernetes node name"),
]


@pytest.mark.parametrize(("case", "files", "argv", "code", "expected"), CASES, ids=[c[0] for c in CASES])
def test_reproductions(run_cli, tmp_path, monkeypatch, case, files, argv, code, expected):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    paths = {name: str(write(tmp_path, name, text)) for name, text in files.items()}
    paths["out"] = str(tmp_path / "out")
    args = [paths.get(arg[1:-1], arg) if arg.startswith("{") and arg.endswith("}") else arg for arg in argv]
    result = run_cli(*args)
    assert (result.code, "internal error" not in result.err) == (code, True), result.err
    assert expected in result.err + result.out, result.err


def test_helm_env_namespace_is_checked(run_cli, monkeypatch, tmp_path, helm4):
    monkeypatch.setenv("HELM_NAMESPACE", "../../x")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    result = run_cli("install", "demo", "-f", SETTINGS, "--dry-run", "--helm-binary", helm4)
    assert result.code == 2 and "HELM_NAMESPACE '../../x': not a valid namespace name" in result.err


def test_fifos_as_inputs_never_block(run_cli, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for args in (["validate", "-f", fifo], ["plan", fifo, "--snapshot", SNAPSHOT],
                 ["plan", EXP / "distributed-16gpu.yaml", "--snapshot", fifo]):
        result = run_cli(*args)  # would block forever reading it
        assert result.code == 1 and "a named pipe, not a regular file" in result.err


def test_a_30000_deep_settings_file_is_an_error_not_a_segfault(tmp_path):
    deep = write(tmp_path, "deep.yaml", "a: " + "[" * 30000 + "]" * 30000)
    result = subprocess.run([sys.executable, "-m", "det_k8s", "validate", "-f", str(deep)], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stderr.strip().startswith("error: ") and "nested more than 100 levels deep" in result.stderr


def test_helm_json_of_another_shape_breaks_nothing(run_cli, fake_helm, kubeconfig):
    for text in ('{"releases": []}', '"text"', '[1, "x", null]', "[" * 3000 + "]" * 3000):
        fake_helm.respond("list", stdout=text)
        result = run_cli("list", "-A")
        assert result.code in (0, 1) and "internal error" not in result.err
    fake_helm.respond("list", stdout='{"releases": []}')
    assert "helm list -o json printed JSON of another shape" in run_cli("list").err


def test_malformed_cluster_objects_are_named(run_cli, cluster):
    cluster.api.put(node("gpu-0", gpus=4))
    with cluster.api._lock:
        cluster.api.objects[("nodes", None, "bad")] = {"kind": "Node", "metadata": {"name": "bad"},
                                                      "status": {"conditions": "ready"}}
    result = run_cli("experiment", "list")
    assert result.code == 1 and "cluster emulator: Node bad: status.conditions: expected a list" in result.err


def test_kubeconfig_server_credentials_are_never_printed(run_cli, tmp_path):
    kubeconfig = write(tmp_path, "kc", json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "http://admin:PLANTED-PASS-55@127.0.0.1:9"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c"}}]}))
    result = run_cli("--kubeconfig", kubeconfig, "experiment", "list")
    assert result.code == 1 and "cannot reach the Kubernetes API at http://***@127.0.0.1:9" in result.err
    assert "PLANTED" not in result.err


def test_no_known_input_reaches_internal_error():
    """`internal error` is only the last resort: in the one error mapper and the loop that outlives a bug."""
    found = []
    for path in (ROOT / "det_k8s").rglob("*.py"):
        text = path.read_text()
        if "internal error:" in text:
            found.append(path.relative_to(ROOT).as_posix())
    assert sorted(found) == ["det_k8s/cli/__init__.py", "det_k8s/cli/commands/scheduler.py"]
