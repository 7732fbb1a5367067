"""The Kubernetes adapter through the real `kubernetes` client, over HTTP, against the API emulator."""

from __future__ import annotations

import re
import socket
import threading

import pytest

from det_k8s.errors import ClusterError, ClusterUnreachable, Conflict, Forbidden, NotFound, OperationTimeout
from det_k8s.kube.api import PAGE_SIZE, KubeApi
from det_k8s.kube.kinds import CONFIGMAPS, LEASES, NODES, PODS
from tests.support.k8s_emulator import node, pod


def test_lists_pods_in_the_contexts_namespace_or_everywhere(cluster):
    cluster.api.put(pod("a", namespace="default"))
    cluster.api.put(pod("b", namespace="ml"))
    api = cluster.connect()
    assert [p["metadata"]["name"] for p in api.list(PODS)] == ["a"]
    assert [p["metadata"]["name"] for p in api.list(PODS, all_namespaces=True)] == ["a", "b"]
    assert [p["metadata"]["name"] for p in cluster.connect(namespace="ml").list(PODS)] == ["b"]
    assert all(p["kind"] == "Pod" for p in api.list(PODS, all_namespaces=True))


def test_label_and_field_selectors_reach_the_server(cluster):
    cluster.api.put(pod("task-1", labels={"determined": "g1"}, node_name="n1", phase="Running"))
    cluster.api.put(pod("task-2", labels={"determined": "g2"}, phase="Pending"))
    cluster.api.put(pod("master", labels={"app": "determined-master-x"}))
    api = cluster.connect()
    assert [p["metadata"]["name"] for p in api.list(PODS, label_selector="determined")] == ["task-1", "task-2"]
    assert [p["metadata"]["name"] for p in api.list(PODS, label_selector="determined in (g2)")] == ["task-2"]
    assert [p["metadata"]["name"] for p in api.list(PODS, label_selector="!determined")] == ["master"]
    assert [p["metadata"]["name"] for p in api.list(PODS, field_selector="status.phase=Running")] == ["master",
                                                                                                       "task-1"]
    assert ("GET", "/api/v1/namespaces/default/pods", {"labelSelector": "determined", "limit": str(PAGE_SIZE)}) in \
        cluster.api.calls


def test_long_lists_are_paged(cluster):
    for i in range(PAGE_SIZE * 2 + 7):
        cluster.api.put({"kind": "ConfigMap", "metadata": {"name": f"cm-{i:04d}", "namespace": "default"}})
    names = [c["metadata"]["name"] for c in cluster.connect().list(CONFIGMAPS)]
    assert len(names) == PAGE_SIZE * 2 + 7 and len(set(names)) == len(names)
    assert cluster.api.count("GET", "configmaps") == 3


def test_get_and_missing_objects(cluster):
    cluster.api.put(node("gpu-0", gpus=4))
    api = cluster.connect()
    assert api.get(NODES, "gpu-0")["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    with pytest.raises(NotFound, match="node gpu-0x not found"):
        api.get(NODES, "gpu-0x")
    assert api.exists(NODES, "gpu-0") and not api.exists(NODES, "nope")


def test_create_twice_is_a_conflict(cluster):
    api = cluster.connect()
    api.create(CONFIGMAPS, {"metadata": {"name": "q"}, "data": {"a": "1"}})
    with pytest.raises(Conflict, match="already exists"):
        api.create(CONFIGMAPS, {"metadata": {"name": "q"}})


def test_replace_with_a_stale_resource_version_is_a_conflict(cluster):
    api = cluster.connect()
    lease = api.create(LEASES, {"metadata": {"name": "det-k8s"}, "spec": {"holderIdentity": "me"}})
    newer = api.replace(LEASES, "det-k8s", {**lease, "spec": {"holderIdentity": "you"}})
    assert newer["metadata"]["resourceVersion"] != lease["metadata"]["resourceVersion"]
    with pytest.raises(Conflict) as info:
        api.replace(LEASES, "det-k8s", {**lease, "spec": {"holderIdentity": "me again"}})
    assert "run the command again" in (info.value.hint or "")
    assert cluster.api.get("leases", "det-k8s")["spec"]["holderIdentity"] == "you"


def test_merge_patch_adds_changes_and_removes_keys(cluster):
    cluster.api.put(node("n", labels={"a": "1", "b": "2"}))
    api = cluster.connect()
    api.patch(NODES, "n", {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert cluster.api.get("nodes", "n")["metadata"]["labels"] == {"b": "2", "c": "3"}


def test_delete_and_missing_ok(cluster):
    cluster.api.put(pod("p"))
    api = cluster.connect()
    assert api.delete(PODS, "p") is True
    assert api.delete(PODS, "p", missing_ok=True) is False
    with pytest.raises(NotFound):
        api.delete(PODS, "p")


def test_forbidden_keeps_the_servers_reason_and_names_the_context(cluster):
    cluster.api.fail("GET", "nodes", 403, 'nodes is forbidden: User "bob" cannot list resource "nodes" at the '
                                          "cluster scope")
    with pytest.raises(Forbidden) as info:
        cluster.connect().list(NODES)
    assert str(info.value) == ('nodes is forbidden: User "bob" cannot list resource "nodes" at the cluster scope '
                               "(context emulator)")
    assert "RBAC" in (info.value.hint or "")


def test_server_errors_are_cluster_errors(cluster):
    cluster.api.fail("POST", "pods", 500, "etcdserver: request timed out")
    with pytest.raises(ClusterError, match="500: etcdserver: request timed out"):
        cluster.connect().create(PODS, pod("p"))
    assert cluster.api.get("pods", "p") is None


def test_logs(cluster):
    cluster.api.put(pod("master-0"))
    cluster.api.pod_logs[("default", "master-0")] = "line 1\nfailed to connect to database\n"
    assert "failed to connect" in cluster.connect().logs("master-0")


def test_unreachable_cluster_is_one_clear_error(tmp_path):
    from tests.support.k8s_emulator import RunningEmulator

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    running = RunningEmulator(url=f"http://127.0.0.1:{port}")
    kubeconfig = running.write_kubeconfig(tmp_path / "kc", context="prod")
    api = KubeApi.connect(kubeconfig=str(kubeconfig))
    with pytest.raises(ClusterUnreachable) as info:
        api.list(PODS)
    assert str(info.value) == f"cannot reach the Kubernetes API at http://127.0.0.1:{port} (context prod): " \
                              "[Errno 111] Connection refused"


def test_a_silent_server_times_out_once_without_retrying(tmp_path):
    from tests.support.k8s_emulator import RunningEmulator

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(5)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])  # accept, never answer
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        running = RunningEmulator(url=f"http://127.0.0.1:{listener.getsockname()[1]}")
        kubeconfig = running.write_kubeconfig(tmp_path / "kc")
        api = KubeApi.connect(kubeconfig=str(kubeconfig), timeout=(1.0, 0.5))
        with pytest.raises(OperationTimeout) as info:
            api.list(PODS)
        assert re.search(r"did not answer in \d+\.\ds \(pods\)", str(info.value)), str(info.value)
        assert len(accepted) == 1  # a request that may have been received is never sent again
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_a_tls_server_that_never_answers_is_reported_with_the_time_really_waited(tmp_path, tarpit):
    """The TLS handshake is bounded by the connect limit: the message must not claim the (longer) read limit."""
    from tests.conftest import write_kubeconfig

    kubeconfig = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{tarpit.port}", "pit", insecure=True)
    api = KubeApi.connect(kubeconfig=str(kubeconfig), timeout=(0.5, 30.0))
    with pytest.raises(OperationTimeout) as info:
        api.server_version()
    waited = float(re.search(r"did not answer in (\d+\.\d)s", str(info.value)).group(1))
    assert waited < 30.0 and "context pit" in str(info.value)
def test_every_path_segment_is_escaped():
    from det_k8s.errors import UsageError
    from det_k8s.kube.kinds import CONFIGMAPS, PODS

    assert CONFIGMAPS.path("team a", "x/../y") == "/api/v1/namespaces/team%20a/configmaps/x%2F..%2Fy"
    assert PODS.path("ml", "p", "log") == "/api/v1/namespaces/ml/pods/p/log"
    for bad in ("..", ".", ""):
        with pytest.raises(UsageError, match="cannot be used in a Kubernetes API path"):
            CONFIGMAPS.path(bad)


def test_a_namespace_never_reaches_another_path(cluster, run_cli):
    result = run_cli("experiment", "list", "-n", "../x")
    assert result.code == 2 and "--namespace '../x': not a valid namespace name" in result.err
    assert cluster.api.calls == []


def test_a_huge_error_message_is_bounded(cluster):
    from det_k8s.errors import ClusterError
    from det_k8s.kube.api import _status_message
    from det_k8s.kube.kinds import CONFIGMAPS

    cluster.api.fail("GET", "configmaps", 500, "[" * 100_000 + "]" * 100_000, name="x")
    with pytest.raises(ClusterError, match="API server answered 500") as info:
        cluster.connect().get(CONFIGMAPS, "x")
    assert len(info.value.message) < 2500
    assert _status_message(b"[" * 100_000 + b"]" * 100_000).startswith("[[[")  # nested too deep: shown as text
