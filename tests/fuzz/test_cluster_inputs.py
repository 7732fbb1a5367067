"""Fuzzing the inputs that come from a cluster and its tools: queue entries, Nodes and Pods of any shape,
kubeconfig files, helm's JSON output, credential plugins' output. No crash, no hang, no internal error;
a bad queue entry never blocks the namespace (tests/fuzz/harness.py)."""

from __future__ import annotations

import json
import sys

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from det_k8s.errors import DetK8sError
from det_k8s.kube.credentials import run_plugin
from tests.fuzz.harness import FUZZ, SPECIAL_TEXT, documents, run, time_bound, values
from tests.fuzz.test_offline_inputs import OBJECTS
from tests.support.k8s_emulator import node

CLUSTER_FUZZ = settings(FUZZ, max_examples=60)
QUEUE_KEYS = st.sampled_from(["id", "experiment", "user", "priority", "submitted_at", "sequence", "state", "attempts",
                              "rejections", "reason", "placement", "events", "doomed", "attempt", "pods", "at",
                              "metadata", "name", "spec", "containers", "slots", "size", "slots_per_pod"])
ENTRY_FILES = ["entry.json", "status.json", "group.json", "pods.json", "service.json", "experiment.yaml"]


def reset(cluster) -> None:
    with cluster.api._lock:
        cluster.api.objects.clear()
        cluster.api.faults.clear()
    cluster.api.put(node("gpu-0", gpus=4))


@CLUSTER_FUZZ
@given(st.dictionaries(st.sampled_from(ENTRY_FILES),
                       st.builds(lambda d: json.dumps(d, default=str), values(QUEUE_KEYS)) | documents(QUEUE_KEYS),
                       max_size=6))
def test_queue_entries(run_cli, cluster, data):
    reset(cluster)
    cluster.api.put({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "det-k8s-queue-fuzz0001", "namespace": "default",
                                  "labels": {"det-k8s.io/queue-entry": "true", "det-k8s.io/state": "queued"}},
                     "data": {k: v.replace("\x00", "") for k, v in data.items()}})
    for args in (("experiment", "list", "--all"), ("scheduler", "run", "--once"), ("doctor",)):
        run(run_cli, *args)


@CLUSTER_FUZZ
@given(st.lists(OBJECTS, max_size=4))
def test_nodes_and_pods_of_any_shape(run_cli, cluster, objects):
    reset(cluster)
    for i, obj in enumerate(objects):
        plural = "nodes" if obj["kind"] == "Node" else "pods"
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        with cluster.api._lock:  # stored as they are: an API server of another kind, or a broken proxy
            namespace = None if plural == "nodes" else "default"
            cluster.api.objects[(plural, namespace, f"fuzz-{i}")] = {**obj, "metadata": {**meta, "name": f"fuzz-{i}"}}
    for args in (("experiment", "list"), ("doctor",), ("nodes", "list"), ("scheduler", "run", "--once")):
        run(run_cli, *args)


def either(usual, anything=values()):  # noqa: B008 (a strategy, built once)
    """Mostly what kubectl writes there, sometimes anything at all."""
    return st.one_of(usual, usual, anything)


ENTRY = st.fixed_dictionaries
KUBECONFIGS = ENTRY({
    "current-context": either(st.just("a")),
    "contexts": either(st.lists(ENTRY({"name": either(st.just("a")), "context": either(ENTRY({
        "cluster": either(st.just("c")), "user": either(st.just("u")),
        "namespace": either(st.sampled_from(["ml", "../x", "ok\n", "A"]))}))}), max_size=2)),
    "clusters": either(st.lists(ENTRY({"name": either(st.just("c")), "cluster": either(ENTRY({
        "server": either(st.sampled_from(["http://127.0.0.1:9", "https://u:PLANTED-PW@127.0.0.1:9", "not a url",
                                          "http://[::1"])),
        "certificate-authority-data": either(st.sampled_from(["bm90IGEgY2VydA==", "%%%"]))}))}), max_size=2)),
    "users": either(st.lists(ENTRY({"name": either(st.just("u")), "user": either(ENTRY({
        "token": either(st.just("PLANTED-TOKEN-77")),
        "exec": either(ENTRY({"apiVersion": either(st.just("client.authentication.k8s.io/v1")),
                              "command": either(st.sampled_from([sys.executable, "/nonexistent/plugin", ""])),
                              "args": either(st.just(["-c", "print('{}')"]))}))}))}), max_size=2)),
})


@CLUSTER_FUZZ
@given(KUBECONFIGS)
def test_kubeconfigs_of_any_shape(run_cli, tmp_path, config):
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    result = run(run_cli, "--kubeconfig", path, "experiment", "list")
    assert "PLANTED" not in result.out + result.err


@CLUSTER_FUZZ
@given(documents(st.sampled_from(["clusters", "contexts", "users", "current-context", "cluster", "context", "user",
                                  "server", "namespace", "token", "exec", "command", "args", "name", "env"])))
def test_kubeconfig_files(run_cli, tmp_path, text):
    path = tmp_path / "kubeconfig"
    path.write_text(text, errors="surrogatepass")
    run(run_cli, "--kubeconfig", path, "experiment", "list")


@CLUSTER_FUZZ
@given(st.one_of(st.builds(lambda d: json.dumps(d, default=str), values(st.sampled_from(
    ["name", "namespace", "chart", "app_version", "status", "revision", "determined-0.17.15"]))),
    documents(), st.just("[" * 5000 + "]" * 5000)))
def test_helm_list_output(run_cli, fake_helm, text):
    fake_helm.respond("list", stdout=text)
    run(run_cli, "list", "-A")


@CLUSTER_FUZZ
@given(st.one_of(st.builds(lambda d: json.dumps(d, default=str), values(st.sampled_from(
    ["apiVersion", "kind", "ExecCredential", "status", "token", "expirationTimestamp", "clientCertificateData",
     "clientKeyData", "client.authentication.k8s.io/v1"]))), documents(), SPECIAL_TEXT), st.integers(0, 3))
def test_credential_plugin_output(tmp_path, stdout, code):
    script = tmp_path / "plugin.py"
    script.write_text(f"import sys\nsys.stdout.write({stdout!r})\nsys.stderr.write({stdout[:200]!r})\n"
                      f"sys.exit({code})\n", errors="surrogatepass")
    plugin = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(script)]}
    with time_bound():
        try:
            run_plugin(plugin, "fuzz")
        except DetK8sError as exc:
            assert exc.message.startswith("context fuzz: ") and "Traceback" not in exc.message


def test_a_kubeconfig_of_the_wrong_shape_in_every_section(run_cli, tmp_path):
    for broken in ({"contexts": "x"}, {"contexts": [{"name": "a", "context": "x"}], "current-context": "a"},
                   {"current-context": ["a"]}, {"clusters": {"a": 1}, "contexts": [{"name": "a", "context": {
                       "cluster": "a", "user": ["u"]}}], "current-context": "a"}):
        path = tmp_path / "kc"
        path.write_text(yaml.safe_dump(broken))
        result = run(run_cli, "--kubeconfig", path, "experiment", "list")
        assert result.code in (1, 2)
