"""Fuzzing every input channel that needs no cluster: settings files, stdin, --set, experiment files,
snapshots, names and durations on the command line, chart archives. No crash, no hang, no internal
error, exit codes as documented (tests/fuzz/harness.py)."""

from __future__ import annotations

import io
import json
import tarfile

from hypothesis import given
from hypothesis import strategies as st

from det_k8s.determined.expconf import levels_at
from det_k8s.settings.schema import walk
from tests.conftest import example
from tests.fuzz.harness import FUZZ, SPECIAL_TEXT, documents, nested_text, run, values

SETTING_KEYS = st.sampled_from(sorted({part for path, _ in walk() for part in path}))
_LEVELS = levels_at("v0.38.1")  # the keys det-k8s checks experiment files against, at the newest release
EXPERIMENT_KEYS = st.sampled_from(sorted(_LEVELS[""] | _LEVELS["resources"] | _LEVELS["environment"] | {
    "slots_per_trial", "pod_spec", "spec", "containers", "resources", "requests", "limits", "nvidia.com/gpu",
    "nodeSelector", "tolerations", "image", "gpu", "cpu", "environment_variables"}))
K8S_KEYS = st.sampled_from(["metadata", "name", "namespace", "labels", "spec", "status", "conditions", "type",
                            "status", "taints", "key", "effect", "value", "containers", "initContainers",
                            "resources", "requests", "limits", "allocatable", "capacity", "nvidia.com/gpu", "cpu",
                            "memory", "pods", "nodeName", "phase", "tolerations", "affinity", "nodeSelector",
                            "overhead", "unschedulable", "deletionTimestamp", "restartPolicy", "items", "kind"])
SNAPSHOT = example("snapshots") / "three-4gpu-nodes.yaml"
EXPERIMENT = example("experiments") / "distributed-16gpu.yaml"
SETTINGS = example("gpu-cluster.yaml")


@FUZZ
@given(documents(SETTING_KEYS))
def test_settings_files(run_cli, tmp_path, text):
    path = tmp_path / "settings.yaml"
    path.write_text(text, errors="surrogatepass")
    run(run_cli, "validate", "-f", path)


@FUZZ
@given(st.binary(max_size=400) | documents(SETTING_KEYS).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_settings_on_stdin(run_cli, data):
    run(run_cli, "validate", "-f", "-", stdin=data)


SET_ALPHABET = st.sampled_from(list("abcxyz019.,=[]{}\\ -_:/\n\x00\x07é") + ["maxSlotsPerPod", "db.password",
                                                                             "checkpointStorage", "[0]", "9" * 30])


@FUZZ
@given(st.lists(st.lists(SET_ALPHABET, max_size=30).map("".join)
                | st.builds(lambda k, v: f"{k}={v}", SETTING_KEYS, SPECIAL_TEXT)
                | nested_text(st.integers(90, 6000)).map(lambda t: "a" + ".a" * len(t) + "=1"),
                min_size=1, max_size=3), st.booleans())
def test_set_and_set_string(run_cli, expressions, as_string):
    flag = "--set-string" if as_string else "--set"
    args = [arg for expression in expressions for arg in (flag, expression)]
    run(run_cli, "validate", "-f", SETTINGS, *args)


@FUZZ
@given(documents(EXPERIMENT_KEYS))
def test_experiment_files(run_cli, tmp_path, text):
    path = tmp_path / "exp.yaml"
    path.write_text(text, errors="surrogatepass")
    run(run_cli, "plan", path, "--snapshot", SNAPSHOT, "-f", SETTINGS)


def kubernetes_object(kind: str, fields: dict) -> dict:
    return {"kind": kind, **fields}


OBJECTS = st.builds(kubernetes_object, st.sampled_from(["Node", "Pod", "Service", ""]),
                    st.dictionaries(st.sampled_from(["metadata", "spec", "status"]), values(K8S_KEYS), max_size=3))
GOOD_NODE = {"kind": "Node", "metadata": {"name": "gpu-0"}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}}


@FUZZ
@given(st.lists(OBJECTS, max_size=6), st.booleans(), st.sampled_from(["json", "yaml"]), st.booleans())
def test_snapshots(run_cli, tmp_path, objects, with_node, style, as_list):
    import yaml

    items = [GOOD_NODE, *objects] if with_node else objects
    document = {"apiVersion": "v1", "kind": "List", "items": items} if as_list else items
    text = json.dumps(document, default=str) if style == "json" else yaml.safe_dump(document)
    path = tmp_path / f"snapshot.{style}"
    path.write_text(text)
    run(run_cli, "plan", EXPERIMENT, "--snapshot", path)


@FUZZ
@given(documents(K8S_KEYS))
def test_snapshot_text(run_cli, tmp_path, text):
    path = tmp_path / "snapshot.yaml"
    path.write_text(text, errors="surrogatepass")
    run(run_cli, "validate", "-f", SETTINGS, "--nodes", path)


NAMES = st.one_of(st.text(max_size=70), SPECIAL_TEXT, st.from_regex(r"[a-z0-9][-a-z0-9.]{0,70}", fullmatch=True),
                  st.builds(lambda s: s + "\n", st.from_regex(r"[a-z]{1,10}", fullmatch=True)))


@FUZZ
@given(NAMES, NAMES)
def test_release_and_namespace_names(run_cli, monkeypatch, release, namespace):
    import os

    if "\x00" in release + namespace:
        return  # argv and the environment cannot carry NUL
    monkeypatch.setenv("HELM_NAMESPACE", namespace) if namespace else monkeypatch.delenv("HELM_NAMESPACE", False)
    monkeypatch.setenv("KUBECONFIG", os.devnull + "-missing")
    result = run(run_cli, "install", release, "-f", SETTINGS, "--dry-run", "--helm-binary", "/nonexistent/helm")
    if result.code == 0:
        raise AssertionError("nothing can succeed without helm")


@FUZZ
@given(st.text(max_size=40) | st.sampled_from(["9999999999999h", "1e300", "0s", "-1s", "1h" * 200, "nan", "inf",
                                                 "1.5h30m", "5m0s", "10"]))
def test_durations(run_cli, text):
    if "\x00" in text:
        return
    run(run_cli, "checkpoint", "check", "-f", SETTINGS, "--set", "checkpointStorage.type=shared_fs",
        "--set", "checkpointStorage.hostPath=/nonexistent-det-k8s-path", "--timeout", text)


MEMBER_NAMES = st.one_of(st.sampled_from(["determined/Chart.yaml", "determined/templates/x.yaml", "../x", "/etc/x",
                                          "determined/../../x", "determined", "other/x", "determined/a/../../../x"]),
                         st.text(max_size=30))
MEMBER_TYPES = st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE,
                                tarfile.CHRTYPE])


@FUZZ
@given(st.lists(st.tuples(MEMBER_NAMES, MEMBER_TYPES, st.binary(max_size=200), st.text(max_size=20)), max_size=6),
       st.booleans())
def test_chart_archives(run_cli, tmp_path, members, with_chart):
    archive = tmp_path / "chart.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        if with_chart:
            body = b"apiVersion: v1\nname: determined\nversion: 0.17.15\n"
            info = tarfile.TarInfo("determined/Chart.yaml")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
        for name, kind, data, link in members:
            if "\x00" in name or not name:
                continue
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link.replace("\x00", "")
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    out = tmp_path / "out"
    run(run_cli, "render", "-f", SETTINGS, "--chart", archive, "--output-dir", out)
    escaped = [p for p in tmp_path.rglob("*") if p.name == "x" and out not in p.parents]
    assert escaped == []
