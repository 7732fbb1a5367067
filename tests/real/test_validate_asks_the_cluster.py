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
    from tests.k8s_emulator import node

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
