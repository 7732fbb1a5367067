"""All or nothing under faults, through the real client against the API emulator.

Each case ends the way the issue asks: exit codes and messages true, and no pod of a failed group
alive once the next det-k8s command has run.

Emulator-only: every case injects a fault (a refused or failed call, a creation landing late) the real API server
cannot be made to do on demand.
"""

from __future__ import annotations

import json
import time

from det_k8s.kube.api import KubeApi
from det_k8s.live.queue import QueueStore
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.scheduling.model import Policy
from tests.conftest import example
from tests.live.test_live_scheduler import submit
from tests.support.k8s_emulator import node

EXP = example("experiments")


def group_pods(cluster, group: str | None = None) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.api.items("pods")
                  if group is None or p["metadata"]["labels"].get("det-k8s.io/group") == group)


def queue_entries(cluster) -> dict[str, dict]:
    out = {}
    for cm in cluster.api.items("configmaps"):
        data = cm.get("data") or {}
        if "entry.json" in data:
            out[json.loads(data["entry.json"])["id"]] = json.loads(data["status.json"])
    return out


def wait_for(condition, what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit  # a guard against hanging, not a speed assertion
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def three_nodes(cluster, tmp_path):
    for i in range(3):
        cluster.api.put(node(f"gpu-{i}", gpus=4, cpu="31910m", memory="240Gi"))
    settings = tmp_path / "settings.yaml"
    settings.write_text("maxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: b}\n")
    return settings


def test_a_rollback_whose_deletions_fail_exits_1_naming_what_remains(run_cli, cluster, tmp_path):
    settings = three_nodes(cluster, tmp_path)
    cluster.api.fail("POST", "pods", 403, "admission webhook denied the request", after=2)  # the 3rd creation
    cluster.api.fail("DELETE", "pods", 500, "etcdserver: leader changed", times=1000)  # and every deletion
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", settings)
    remaining = group_pods(cluster)
    assert result.code == 1 and len(remaining) == 2
    assert "no pod was left" not in result.err
    for name in remaining:
        assert name in result.err.splitlines()[-1]
    assert "could not remove" in result.err and "they remain" in result.err
    assert "deleted by the next det-k8s command that sees them" in result.err
    (entry_id, status), = queue_entries(cluster).items()
    assert status["state"] == "queued" and sorted(status["doomed"][0]["pods"]) == remaining
    cluster.api.faults.clear()
    listed = run_cli("experiment", "list")  # the next det-k8s command: it sees them and deletes them
    assert listed.code == 0 and group_pods(cluster) == []
    assert f"{entry_id}: deleted pod {remaining[0]}, left by a failed creation" in listed.err


def test_doctor_all_namespaces_sweeps_failed_creations_in_every_queue(run_cli, cluster, tmp_path):
    settings = three_nodes(cluster, tmp_path)
    cluster.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    cluster.api.fail("POST", "pods", 403, "admission webhook denied the request", after=2)  # the 3rd creation
    cluster.api.fail("DELETE", "pods", 500, "etcdserver: leader changed", times=1000)  # and every deletion
    created = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", settings, "-n", "team-a")
    assert created.code == 1 and len(group_pods(cluster)) == 2
    cluster.api.faults.clear()
    here = run_cli("doctor")  # namespace default: another namespace's queue is not its business
    assert here.code == 0 and len(group_pods(cluster)) == 2
    everywhere = run_cli("doctor", "-A", "-o", "json")  # was: only namespace default's queue was swept
    assert everywhere.code == 1 and group_pods(cluster) == []
    swept = json.loads(everywhere.out)["failedCreationPods"]
    assert sorted(p["namespace"] for p in swept) == ["team-a", "team-a"] and all(p["deleted"] for p in swept)


def test_a_creation_landing_after_the_timeout_is_deleted_by_the_next_command(run_cli, cluster, tmp_path):
    three_nodes(cluster, tmp_path)
    submit(cluster, "aaaa0001", 12, 1)
    late = "exp-aaaa0001-aaaa0001-1"
    cluster.api.fail("POST", "pods", 500, "slow etcd", name=late, late_write=True, delay=2.0)
    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig), timeout=(2.0, 0.5))
    report = LiveScheduler(api, "default", Policy(), "client", workers=1).run_pass()
    assert "aaaa0001" in report.uncleared and "may still appear" in report.uncleared["aaaa0001"]
    assert late in report.uncleared["aaaa0001"]
    wait_for(lambda: late in group_pods(cluster), "the late creation to land")
    assert group_pods(cluster) == [late]  # one pod of the group, alone, holding 4 GPUs
    assert QueueStore(cluster.connect(), "default").get("aaaa0001").doomed[0]["pods"] == [late]
    doctor = run_cli("doctor")  # the next det-k8s command to look: reports it and deletes it
    assert doctor.code == 1 and "1 pod(s) of failed creations" in doctor.err
    assert f"aaaa0001: deleted pod {late}, left by a failed creation" in doctor.err
    assert group_pods(cluster) == []


def test_the_next_pass_deletes_a_late_pod_and_starts_the_group_whole(cluster, tmp_path):
    three_nodes(cluster, tmp_path)
    submit(cluster, "aaaa0001", 12, 1)
    late = "exp-aaaa0001-aaaa0001-2"
    cluster.api.fail("POST", "pods", 500, "slow etcd", name=late, late_write=True, delay=2.0)
    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig), timeout=(2.0, 0.5))
    LiveScheduler(api, "default", Policy(), "client", workers=1).run_pass()
    wait_for(lambda: late in group_pods(cluster), "the late creation to land")
    report = LiveScheduler(cluster.connect(), "default", Policy(), "client").run_pass()
    assert any(f"deleted pod {late}" in problem for problem in report.problems)
    assert "aaaa0001" in report.placed
    pods = cluster.api.items("pods")
    attempts = {p["metadata"]["labels"]["det-k8s.io/attempt"] for p in pods}
    assert len(pods) == 3 and len(attempts) == 1  # all three from the new attempt, none from the failed one
    assert attempts.isdisjoint(r["attempt"] for r in QueueStore(cluster.connect(), "default").get("aaaa0001").doomed)


def test_create_exits_1_and_names_a_pod_that_may_still_appear(cluster, tmp_path, run_cli):
    from det_k8s.errors import DetK8sError

    three_nodes(cluster, tmp_path)
    submit(cluster, "aaaa0001", 12, 1)
    cluster.api.fail("POST", "pods", 500, "slow etcd", name="exp-aaaa0001-aaaa0001-1", late_write=True, delay=2.0)
    api = KubeApi.connect(kubeconfig=str(cluster.kubeconfig), timeout=(2.0, 0.5))
    from det_k8s.cli.commands.experiment import _require_cleared

    report = LiveScheduler(api, "default", Policy(), "client", workers=1).run_pass()
    try:
        _require_cleared(report, "aaaa0001")
    except DetK8sError as exc:
        assert exc.exit_code == 1 and "exp-aaaa0001-aaaa0001-1" in exc.message
    else:
        raise AssertionError("an uncleared creation must end the command with an error")
    wait_for(lambda: group_pods(cluster) != [], "the late creation to land")
    run_cli("experiment", "list")
    assert group_pods(cluster) == []


def test_nothing_is_queued_when_the_lease_cannot_be_taken(run_cli, cluster, tmp_path):
    settings = three_nodes(cluster, tmp_path)
    cluster.api.fail("POST", "leases", 403, 'leases.coordination.k8s.io is forbidden: User "bob" cannot create')
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", settings)
    assert result.code == 1 and "cannot use the scheduling lease default/det-k8s-scheduler" in result.err
    assert queue_entries(cluster) == {} and group_pods(cluster) == []
    cluster.api.fail("GET", "leases", 403, "forbidden", name="det-k8s-scheduler")
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", settings)
    assert result.code == 1 and queue_entries(cluster) == {}
    result = run_cli("experiment", "create", EXP / "distributed-12gpu-a.yaml", "-f", settings)
    assert result.code == 0 and len(group_pods(cluster)) == 3
