"""Preflight decisions over what the cluster said: namespace, secrets, other releases."""

from __future__ import annotations

from det_k8s.errors import Severity
from det_k8s.release.preflight import (
    ReleaseRef,
    check_namespace,
    check_other_releases,
    check_secrets,
    determined_releases,
    merge_releases,
    releases_from_deployments,
)
from det_k8s.settings import Document, load_settings


def settings(*sets: str):
    return load_settings([Document("s.yaml", "maxSlotsPerPod: 4\n")], sets).settings()


def test_missing_namespace_is_an_error_unless_created():
    (problem,) = check_namespace("det", exists=False, create_namespace=False)
    assert problem.is_error and "--create-namespace" in (problem.hint or "")
    assert check_namespace("det", exists=False, create_namespace=True) == []


def test_missing_secrets_are_errors_with_the_kubectl_command():
    s = settings("imagePullSecretName=regcred", "tlsSecret=det-tls", "useNodePortForMaster=true")
    problems = check_secrets(s, "det", {"det-tls"})
    assert [p.path for p in problems] == ["imagePullSecretName"]
    assert problems[0].message == "Secret regcred does not exist in namespace det: the master image cannot be pulled"
    assert "kubectl create secret docker-registry regcred -n det" in (problems[0].hint or "")
    tls = check_secrets(s, "det", {"regcred"})
    assert "kubectl create secret tls det-tls -n det" in (tls[0].hint or "")
    assert check_secrets(settings(), "det", set()) == []


def test_only_determined_charts_count_as_releases():
    listed = [{"name": "demo", "namespace": "det", "chart": "determined-0.1.0", "app_version": "0.17.15",
               "status": "deployed", "revision": "2"},
              {"name": "nginx", "namespace": "web", "chart": "ingress-nginx-4.0.0"}]
    assert determined_releases(listed) == [ReleaseRef("demo", "det", "determined-0.1.0", "0.17.15", "deployed", "2")]
    assert determined_releases(None) == []


def test_releases_from_labelled_master_deployments_merge_with_helms():
    deployment = {"metadata": {"name": "determined-master-deployment-old", "namespace": "ml",
                               "labels": {"app.kubernetes.io/instance": "old"}}}
    refs = merge_releases([ReleaseRef("demo", "det")], releases_from_deployments([deployment]),
                          [ReleaseRef("demo", "det", "determined-0.1.0")])
    assert [(r.name, r.namespace) for r in refs] == [("demo", "det"), ("old", "ml")]


def test_install_refuses_an_existing_name_and_warns_about_other_releases():
    refs = [ReleaseRef("demo", "det"), ReleaseRef("old", "ml")]
    problems = check_other_releases("demo", "det", refs, upgrading=False)
    assert [p.severity for p in problems] == [Severity.ERROR, Severity.WARNING]
    assert "det-k8s upgrade demo" in (problems[0].hint or "")
    assert "old in namespace ml" in problems[1].message and "one instance per cluster" in problems[1].message
    assert check_other_releases("new", "det", [], upgrading=False) == []


def test_upgrade_needs_the_release():
    (problem,) = check_other_releases("demo", "det", [], upgrading=True)
    assert problem.is_error and "no Determined release demo in namespace det" in problem.message
    assert check_other_releases("demo", "det", [ReleaseRef("demo", "det")], upgrading=True) == []


def _pc(name, release=None, namespace="det"):
    annotations = {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace} if release else {}
    return {"metadata": {"name": name, "annotations": annotations}}


def test_an_existing_priority_class_of_another_owner_is_reported_before_helm_fails():
    from det_k8s.release.preflight import check_priority_classes

    theirs = [_pc("determined-system-priority", "other", "ml"), _pc("determined-medium-priority")]
    found = check_priority_classes(theirs, "demo", "det", create=True, upgrading=False)
    assert [p.message for p in found] == [
        "PriorityClass determined-system-priority already exists, owned by release other in namespace ml: helm would "
        "refuse to install over it",
        "PriorityClass determined-medium-priority already exists, owned by no helm release (created by hand or by "
        "another tool): helm would refuse to install over it"]
    assert all(p.hint and "createNonNamespacedObjects: false" in p.hint for p in found)
    mine = [_pc("determined-system-priority", "demo"), _pc("determined-medium-priority", "demo")]
    assert check_priority_classes(mine, "demo", "det", create=True, upgrading=True) == []
    assert check_priority_classes(theirs, "demo", "det", create=False, upgrading=False) == []
    (missing,) = check_priority_classes(theirs[:1], "demo", "det", create=False, upgrading=False)
    assert "determined-medium-priority does not exist" in missing.message


def test_the_masters_and_databases_pods_must_fit_a_node_and_the_quota():
    """Issue 38, item 3 (on the real control plane: tests/real/test_release_lifecycle.py)."""
    from det_k8s.cluster.model import Node
    from det_k8s.cluster.quota import ResourceQuota
    from det_k8s.release.preflight import check_system_pods, system_pods

    nodes = [Node("cpu-0", {"cpu": 8000, "memory": 32 * 2**30 * 1000, "pods": 110_000})]
    values = {"masterCpuRequest": "9", "masterMemRequest": "8Gi", "db": {"cpuRequest": "2", "memRequest": "8Gi"}}
    (big,) = check_system_pods(system_pods(values, upgrading=False), nodes, (), "det")
    assert big.path == "masterCpuRequest" and big.is_error
    assert big.message.startswith("9: the master's pod asks more cpu than any node of the cluster can give")
    values["masterCpuRequest"] = "2"
    assert check_system_pods(system_pods(values, upgrading=False), nodes, (), "det") == []
    quota = ResourceQuota("det", "small", hard={"requests.cpu": 3000}, used={"requests.cpu": 0})
    (refused,) = check_system_pods(system_pods(values, upgrading=False), nodes, [quota], "det")
    assert refused.message.startswith("ResourceQuota small in namespace det would refuse the master's pod and the "
                                      "database's pod: requests.cpu 0 used of 3")
    assert check_system_pods(system_pods(values, upgrading=True), nodes, [quota], "det") == []  # the master alone
