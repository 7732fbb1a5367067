"""`validate --kube-context` asks the real API server: a task pod from each pod spec, as a server-side dry run, so
admission (here Pod Security's `restricted` level on the namespace) refuses what no offline check can know."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.real

SETTINGS = """maxSlotsPerPod: 4
initialUserPassword: Ch4nge-me-now-1
checkpointStorage: {type: s3, bucket: b}
taskContainerDefaults:
  gpuPodSpec:
    spec:
      tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
"""


def test_admission_refusals_are_errors_naming_the_key_and_nothing_is_created(run_cli, real_cluster, tmp_path):
    from tests.support.k8s_emulator import node

    real_cluster.api.put(node("gpu-0", gpus=4))
    for name, level in (("strict", "restricted"), ("open", "privileged")):
        real_cluster.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": name, "labels": {"pod-security.kubernetes.io/enforce": level}}})
    real_cluster.wait_for("the namespaces' default ServiceAccounts", lambda: all(
        real_cluster.api.get("serviceaccounts", "default", ns) for ns in ("strict", "open")))
    settings = tmp_path / "site.yaml"
    settings.write_text(SETTINGS)
    ok = run_cli("validate", "-f", settings, "--kube-context", "real", "-n", "open")
    assert ok.code == 0, ok.err
    refused = run_cli("validate", "-f", settings, "--kube-context", "real", "-n", "strict")
    assert refused.code == 1
    (line,) = [ln for ln in (refused.out + refused.err).splitlines()
               if ln.startswith("error: taskContainerDefaults.gpuPodSpec")]
    assert "refuses a task pod built from it" in line and 'violates PodSecurity "restricted' in line
    assert line.endswith("site.yaml:5)")
    assert real_cluster.api.items("pods", "strict") == [] and real_cluster.api.items("pods", "open") == []


GOOD = """maxSlotsPerPod: 4
initialUserPassword: Ch4nge-me-now-1
checkpointStorage: {type: s3, bucket: b}
"""

ONLY_LIMITED = {  # an admin's policy: every Deployment's containers set a memory limit (the chart's master does not)
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "memory-limits"},
    "spec": {"failurePolicy": "Fail",
             "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                     "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
             "validations": [{"expression": "object.spec.template.spec.containers.all(c, has(c.resources.limits) "
                                            "&& 'memory' in c.resources.limits)",
                              "message": "every container needs a memory limit"}]}}


def _namespace(real_cluster, name):
    real_cluster.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    real_cluster.wait_for(f"namespace {name}'s default ServiceAccount",
                          lambda: real_cluster.api.get("serviceaccounts", "default", name))


def test_the_charts_objects_are_judged_by_the_api_server_quota_names_the_key(run_cli, real_cluster, tmp_path):
    """A ResourceQuota on storage refuses the chart's database volume: no offline check can know; `validate` and
    the install preflight say so naming db.storageSize, and nothing is created."""
    from tests.support.k8s_emulator import node

    real_cluster.api.put(node("gpu-0", gpus=4))
    _namespace(real_cluster, "fits")
    _namespace(real_cluster, "small")
    real_cluster.api.put({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "storage",
                          "namespace": "small"}, "spec": {"hard": {"requests.storage": "10Gi"}}})
    real_cluster.wait_for("the quota's status", lambda: (real_cluster.api.get(
        "resourcequotas", "storage", "small") or {}).get("status", {}).get("hard"))
    settings = tmp_path / "site.yaml"
    settings.write_text(GOOD)
    ok = run_cli("validate", "-f", settings, "--kube-context", "real", "-n", "fits")
    assert ok.code == 0, ok.out + ok.err  # every object of the bundled chart is accepted by the real API server
    assert "not checked" not in ok.out + ok.err
    refused = run_cli("validate", "-f", settings, "--kube-context", "real", "-n", "small")
    assert refused.code == 1, refused.out + refused.err
    (line,) = [ln for ln in (refused.out + refused.err).splitlines() if ln.startswith("error: db.storageSize:")]
    assert "PersistentVolumeClaim determined-db-pvc-det-k8s-validate" in line and "exceeded quota" in line
    fits = run_cli("validate", "-f", settings, "--set", "db.storageSize=5Gi", "--kube-context", "real", "-n", "small")
    assert fits.code == 0, fits.out + fits.err
    install = run_cli("install", "det", "-f", settings, "--kube-context", "real", "-n", "small",
                      "--skip-storage-check")
    assert install.code == 1, install.out + install.err
    assert any(ln.startswith("error: db.storageSize:") and "PersistentVolumeClaim determined-db-pvc-det" in ln
               for ln in (install.out + install.err).splitlines()), install.out + install.err
    for kind in ("persistentvolumeclaims", "deployments", "secrets", "services"):
        assert [o["metadata"]["name"] for o in real_cluster.api.items(kind, "small")
                if "det" in o["metadata"]["name"] and o["metadata"]["name"] != "default-token"] == [], kind
    assert not [pc for pc in real_cluster.api.items("priorityclasses")
                if pc["metadata"]["name"].startswith("determined-")]


def test_an_admission_policy_refusing_the_charts_master_names_the_object(run_cli, real_cluster, tmp_path):
    from tests.support.k8s_emulator import node

    real_cluster.api.put(node("gpu-0", gpus=4))
    _namespace(real_cluster, "policed")
    real_cluster.api.put(ONLY_LIMITED)
    real_cluster.api.put({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                          "metadata": {"name": "memory-limits"},
                          "spec": {"policyName": "memory-limits", "validationActions": ["Deny"],
                                   "matchResources": {"namespaceSelector": {"matchLabels": {
                                       "kubernetes.io/metadata.name": "policed"}}}}})
    settings = tmp_path / "site.yaml"
    settings.write_text(GOOD)
    try:
        def refused_now():  # the policy reaches admission through an informer: a moment after it is created
            result = run_cli("validate", "-f", settings, "--kube-context", "real", "-n", "policed")
            return result if result.code == 1 else None

        refused = real_cluster.wait_for("the admission policy to refuse the chart's Deployments", refused_now)
        lines = [ln for ln in (refused.out + refused.err).splitlines() if ln.startswith("error:")]
        master = [ln for ln in lines if "Deployment determined-master-deployment-det-k8s-validate" in ln]
        assert master and "every container needs a memory limit" in master[0], lines
        limited = run_cli("validate", "-f", settings, "--set", "masterMemLimit=8Gi", "--set", "db.memLimit=8Gi",
                          "--kube-context", "real", "-n", "policed")
        lines = [ln for ln in (limited.out + limited.err).splitlines() if ln.startswith("error:")]
        assert not [ln for ln in lines if "determined-master-deployment" in ln or "determined-db-deployment" in ln], \
            lines
    finally:
        real_cluster.api.remove("validatingadmissionpolicybindings", "memory-limits")
        real_cluster.api.remove("validatingadmissionpolicies", "memory-limits")


def test_kubeconfig_alone_checks_the_live_cluster_as_kube_context_does(run_cli, real_cluster, tmp_path, monkeypatch):
    """Issue 38, item 7: `validate --kubeconfig FILE` said `settings are valid` without reading the cluster; it now
    checks the live nodes (and sends the dry runs) exactly as `--kube-context` does."""
    from tests.support.k8s_emulator import node

    real_cluster.api.put(node("gpu-0", gpus=4))
    settings = tmp_path / "site.yaml"
    settings.write_text(GOOD.replace("maxSlotsPerPod: 4", "maxSlotsPerPod: 3"))
    by_context = run_cli("validate", "-f", settings, "--kube-context", "real", "-o", "json")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))  # only the flag names the cluster
    by_file = run_cli("validate", "-f", settings, "--kubeconfig", real_cluster.kubeconfig, "-o", "json")
    assert by_context.code == by_file.code == 1, by_file.out + by_file.err
    import json

    problems = json.loads(by_file.out)["problems"]
    assert json.loads(by_context.out)["problems"] == problems
    assert any(p["key"] == "maxSlotsPerPod" and "does not divide the GPUs of" in p["message"] for p in problems), \
        problems
    table = run_cli("validate", "-f", settings, "--kubeconfig", real_cluster.kubeconfig)
    assert table.code == 1 and "settings are valid" not in table.out + table.err
    assert "error: maxSlotsPerPod: 3 does not divide the GPUs of" in table.out + table.err
