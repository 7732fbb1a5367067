"""The in-cluster scheduler's manifests: valid for the Kubernetes API (kubernetes-validate, strict), and their RBAC
allows every request a scheduling session really makes (recorded by the API emulator)."""

from __future__ import annotations

import json
import re
import time
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from kubernetes_validate import utils as kv

from det_k8s.chart.deploy import NAME, chart_template, scheduler_manifests
from det_k8s.kube.incluster import in_cluster_target
from det_k8s.kube.kinds import PODS
from det_k8s.kube.watch import ClusterView
from det_k8s.live.rivals import rival_schedulers
from det_k8s.live.scheduler import LiveScheduler
from det_k8s.quantity import parse_quantity
from det_k8s.scheduling.model import Policy
from tests.support.k8s_emulator import node
from tests.support.master_pods import create_task, honour_preemption, master_task


@pytest.mark.parametrize("version", ["1.25", "1.31", kv.latest_version()])
def test_every_manifest_is_valid_for_the_kubernetes_api(version):
    for document in scheduler_manifests("registry.example.com/det-k8s:0.4", "det", replicas=2,
                                        image_pull_secret="regcred", preemption=True):
        assert kv.validate(document, version, strict=True)


def test_the_memory_follows_the_peak_measured_at_30000_pods():
    """The Deployment's memory comes from the benchmark on the real control plane (benchmarks/sidebyside.py at 5,000
    nodes / 30,000 pods): the request is the peak RSS of `det-k8s scheduler run` + 25 %, the limit twice the peak,
    rounded up to 128 and 256 MiB; the bundled chart's scheduler (generated from the same manifests) carries the same."""
    report = json.loads((Path(__file__).parents[2] / "benchmarks" / "sidebyside-5000.json").read_text())
    (det,) = [r for r in report["results"] if r["scheduler"] == "det-k8s"]
    assert report["args"]["nodes"] >= 5000 and det["backlog_bound_pods"] >= 30000 and det["backlog_partial"] == 0
    peak, mib = Fraction(det["peak_mib"]) * 2**20, 2**20
    (container,) = scheduler_manifests("det-k8s:1", "det")[-1]["spec"]["template"]["spec"]["containers"]
    request = parse_quantity(container["resources"]["requests"]["memory"])
    limit = parse_quantity(container["resources"]["limits"]["memory"])
    assert peak * Fraction(5, 4) <= request < peak * Fraction(5, 4) + 128 * mib
    assert peak * 2 <= limit < peak * 2 + 256 * mib
    template = chart_template()
    assert f"memory: {container['resources']['requests']['memory']}" in template
    assert f"memory: {container['resources']['limits']['memory']}" in template


def test_the_command_prints_them_and_refuses_a_bad_image(run_cli):
    result = run_cli("scheduler", "manifest", "--image", "reg/det-k8s:1", "-n", "det", "--scheduler-name", "gang")
    assert result.code == 0, result.err
    documents = list(yaml.safe_load_all(result.out))
    assert [d["kind"] for d in documents] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                              "RoleBinding", "Role", "RoleBinding", "Deployment"]
    (container,) = documents[-1]["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["scheduler", "run", "--namespace", "det", "--scheduler-name", "gang",
                                 "--health-port", "8081"]
    bad = run_cli("scheduler", "manifest", "--image", "two words")
    assert bad.code == 2 and "--image 'two words': not an image reference" in bad.err


def _verb(method: str, path: str, params: dict[str, str]) -> tuple[str, str, str | None]:
    """(verb, resource[/subresource], namespace) of an API request, as the API server's authorizer sees it."""
    match = re.match(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/([^/]+))?/([^/]+)(?:/([^/]+))?(?:/([^/]+))?$", path)
    assert match, path
    namespace, resource, name, sub = match.groups()
    resource = f"{resource}/{sub}" if sub else resource
    if method == "GET":
        verb = "watch" if params.get("watch") in ("true", "1") else ("get" if name else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return verb, resource, namespace


def allowed(documents, verb: str, resource: str, namespace: str | None) -> bool:
    rules = []
    for doc in documents:
        if doc["kind"] == "ClusterRole" or (doc["kind"] == "Role" and namespace == doc["metadata"]["namespace"]):
            rules += doc["rules"]
    return any(resource in rule["resources"] and verb in rule["verbs"] for rule in rules)


def test_the_rbac_allows_every_request_of_a_scheduling_session(cluster, monkeypatch):
    from tests.live.test_live_scheduler import submit as submit_experiment

    monkeypatch.setenv("DET_K8S_LEASE_NAMESPACE", "leases")
    cluster.api.bookmark_interval = 0.1
    for i in range(2):
        cluster.api.put(node(f"gpu-{i}", gpus=4))
    api = cluster.connect("det")
    made: list = []  # the scheduler's own requests (the test's set-up requests are left out)

    def scheduler_does(action):
        start = len(cluster.api.calls)
        action()
        made.extend(cluster.api.calls[start:])

    def until(condition):
        deadline = time.monotonic() + 10  # a guard, not a speed assertion
        while not condition():
            assert time.monotonic() < deadline
            time.sleep(0.05)

    def served(namespace):
        return [p for p in view.state().served if p.namespace == namespace]

    view = ClusterView(api.clone(), "coscheduler", queue_namespace="det")
    scheduler_does(lambda: rival_schedulers(api, "coscheduler"))  # what `scheduler run` checks at start-up
    scheduler_does(lambda: (view.start(), view.wait_synced()))
    scheduler = LiveScheduler(api, "det", Policy(preemption=True), "rbac", serve="coscheduler", view=view)
    submit_experiment(cluster, "aaaa0001", 4, 1)  # a det-k8s experiment (its queue is the test's "default")
    low = create_task(api, master_task("0.38.1", experiment=1, slots_per_trial=4, priority=10, namespace="team-a"))
    until(lambda: len(served("team-a")) == 1)
    scheduler_does(scheduler.run_pass)  # binds, Scheduled events
    create_task(api, master_task("0.26.2", experiment=2, slots_per_trial=8, priority=90, namespace="team-b"))
    until(lambda: len(served("team-b")) == 2 and all(p.bound for p in served("team-a")))
    scheduler_does(scheduler.run_pass)  # preempts (label; outside its namespace no notice: the pods are deleted)
    honour_preemption(cluster.api, "team-a")
    until(lambda: not served("team-a"))
    scheduler_does(scheduler.run_pass)  # binds the preemptor
    partial = create_task(api, master_task("0.38.1", experiment=3, slots_per_trial=8, namespace="team-a"))
    first = cluster.api.get("pods", partial.names[0], "team-a")
    api.create_subresource(PODS, partial.names[0], "binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": partial.names[0], "uid": first["metadata"]["uid"]},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}}, "team-a")
    until(lambda: len(served("team-a")) == 2 and any(p.bound for p in served("team-a")))
    scheduler_does(scheduler.run_pass)  # repairs a partly bound group (reads its pods afresh, deletes, events)
    time.sleep(0.3)
    view.stop()
    made.extend(c for c in cluster.api.calls if c[2].get("watch") == "true")  # watches restarted meanwhile
    requests = {_verb(method, path, params) for method, path, params in made if path.startswith(("/api", "/apis"))}
    documents = scheduler_manifests("img", "det", lease_namespace="leases")
    assert sorted(r for r in requests if not allowed(documents, *r)) == []
    for expected in [("create", "pods/binding", "team-a"), ("create", "pods/binding", "team-b"),
                     ("patch", "pods/status", "team-b"), ("patch", "pods", "team-a"), ("delete", "pods", "team-a"),
                     ("list", "pods", "team-a"), ("create", "events", "team-b"), ("watch", "pods", None),
                     ("patch", "nodes", None),  # the binding fence (live/fence.py)
                     ("list", "nodes", None), ("update", "leases", "leases"), ("list", "deployments", None)]:
        assert expected in requests  # the session really exercised it
    del low


def test_in_a_pod_the_service_account_is_the_kubeconfig(tmp_path):
    account = tmp_path / "sa"
    account.mkdir()
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster_target(env, None, account) is None  # no token: not in a pod
    (account / "token").write_text("t")
    (account / "namespace").write_text("det\n")
    target = in_cluster_target(env, None, account)
    assert target is not None and (target.server, target.namespace, target.context) == (
        "https://10.0.0.1:443", "det", "in-cluster")
    assert in_cluster_target(env, "other", account).namespace == "other"
    assert in_cluster_target({**env, "KUBERNETES_SERVICE_HOST": "fd00::1"}, None, account).server == "https://[fd00::1]:443"
    assert NAME == "det-k8s-scheduler"
