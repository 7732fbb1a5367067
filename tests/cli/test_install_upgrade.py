"""install and upgrade through the real entry point: the exact helm argv (helm 3 and 4, recording fake on PATH),
the live preflight against the API emulator, and every refusal before helm runs."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.conftest import example
from tests.support.k8s_emulator import node, pod

GPU = str(example("gpu-cluster.yaml"))
# These tests are about helm and the cluster; the storage check has its own tests (test_install_storage_check.py).
SETTINGS = ("-f", GPU, "--skip-storage-check")
DETERMINED = [{"name": "demo", "namespace": "default", "revision": "1", "status": "deployed",
               "chart": "determined-0.1.0", "app_version": "0.17.15"}]


def ready_cluster(cluster, *namespaces: str) -> None:
    """Nodes, namespaces, and release demo's master Deployment rolled out in each (what install --wait, upgrade and
    rollback wait for, as the Deployment controller would report it)."""
    for ns in ("default", *namespaces):
        cluster.api.put({"kind": "Namespace", "metadata": {"name": ns}})
        cluster.api.put(master_deployment_object(ns, available=1))
    cluster.api.put(node("gpu-0", gpus=4))
    cluster.api.put(node("gpu-1", gpus=8))
    cluster.api.put(DEFAULT_STORAGE_CLASS)  # the bundled database's volume needs one (as every managed cluster has)


DEFAULT_STORAGE_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                         "metadata": {"name": "standard",
                                      "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                         "provisioner": "pd.csi.storage.gke.io"}


def master_deployment_object(namespace: str = "default", *, available: int = 1, release: str = "demo") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"determined-master-deployment-{release}", "namespace": namespace, "generation": 1},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": f"determined-master-{release}"}},
                     "template": {"metadata": {"labels": {"app": f"determined-master-{release}"}},
                                  "spec": {"containers": [{"name": "determined-master", "image": "x"}]}}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": available}}


def lifecycle_call(fake, verb: str) -> list[str]:
    (call,) = [c for c in fake.cluster_calls if c[0] == verb]
    return call


def check_private_chart(fake, call: list[str]) -> list[str]:
    """The chart dir and values file helm got: private while helm ran, gone afterwards. Returns the other args."""
    chart, values = call[2], call[4]
    assert call[3] == "--values" and values == f"{chart}/values.yaml"
    modes = fake.modes(call)
    assert modes[values] == "0o600" and modes[str(Path(chart).parent)] == "0o700"
    assert not Path(chart).parent.exists()
    return call[:2] + call[5:]


def test_install_runs_helm_install_with_the_exact_argv(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    cluster.api.put({"kind": "Service", "metadata": {"name": "determined-master-service-demo", "namespace": "default"},
                     "spec": {"type": "LoadBalancer", "ports": [{"port": 8080}]},
                     "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}})
    result = run_cli("install", "demo", *SETTINGS, "--wait", "--timeout", "15m")
    assert result.code == 0, result.err
    assert fake_helm.cluster_calls[0] == ["list", "--output", "json", "--all-namespaces"] + (
        ["--all"] if fake_helm.major == 3 else [])
    assert check_private_chart(fake_helm, lifecycle_call(fake_helm, "install")) == [
        "install", "demo", "--namespace", "default", "--timeout", "15m"]  # det-k8s waits itself: no helm --wait
    assert "Master: http://203.0.113.7:8080" in result.err
    assert "Next: det-k8s status demo -n default" in result.err
    assert "Ch4nge-me-now" not in json.dumps(fake_helm.invocations()) + result.out + result.err


def test_install_flags_map_to_each_helm_major(run_cli, cluster, fake_helm):
    ready_cluster(cluster, "ml")
    result = run_cli("install", "demo", *SETTINGS, "-n", "ml", "--create-namespace", "--rollback-on-failure",
                     "--kube-context", "emulator", "--kubeconfig", cluster.kubeconfig)
    assert result.code == 0, result.err
    # det-k8s waits and undoes itself: helm's --atomic would also wait for a load balancer's address
    assert check_private_chart(fake_helm, lifecycle_call(fake_helm, "install")) == [
        "install", "demo", "--namespace", "ml", "--kube-context", "emulator", "--kubeconfig", str(cluster.kubeconfig),
        "--timeout", "10m", "--create-namespace"]
    assert "Master: the load balancer has no address yet" not in result.err  # no Service at all here
    assert "no Service determined-master-service-demo in namespace ml" in result.err


def test_preflight_errors_stop_before_helm_install(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    result = run_cli("install", "demo", *SETTINGS, "--set", "maxSlotsPerPod=3", "--set", "imagePullSecretName=regcred",
                     "-n", "det")
    assert result.code == 1
    assert "error: maxSlotsPerPod: 3 does not divide the GPUs of 2 node(s)" in result.err
    assert "error: imagePullSecretName: Secret regcred does not exist in namespace det" in result.err
    assert "error: namespace det does not exist; pass --create-namespace" in result.err
    assert [c[0] for c in fake_helm.cluster_calls] == ["list"]


def test_a_missing_pull_secret_names_the_kubectl_command(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    result = run_cli("install", "demo", *SETTINGS, "--set", "imagePullSecretName=regcred")
    assert result.code == 1
    assert ("error: imagePullSecretName: Secret regcred does not exist in namespace default: the master image cannot "
            "be pulled; create it first: kubectl create secret docker-registry regcred -n default") in result.err
    assert not [c for c in fake_helm.cluster_calls if c[0] == "install"]


def test_another_determined_release_is_a_warning_and_a_modern_cluster_is_not(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps([{**DETERMINED[0], "name": "old", "namespace": "ml"}]))
    result = run_cli("install", "demo", *SETTINGS)
    assert result.code == 0, result.err
    assert "warning: the cluster already runs Determined (old in namespace ml)" in result.err
    assert "Kubernetes v1.31.4" not in result.err  # newer than the documents is not a problem in itself


def test_the_coscheduler_plugin_on_kubernetes_125_or_later_is_named_as_what_breaks(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    result = run_cli("install", "demo", *SETTINGS, "--set", "defaultScheduler=coscheduler", "--set",
                     "gangScheduler=plugin")
    assert result.code == 0, result.err
    (line,) = [ln for ln in result.err.splitlines() if "kube-scheduler 1.18.9, which" in ln]
    assert line.startswith("warning: gangScheduler: plugin (defaultScheduler coscheduler) runs a kube-scheduler "
                           "1.18.9, which cannot work on Kubernetes v1.31.4: it lists policy/v1beta1 "
                           "PodDisruptionBudgets")


def test_the_coscheduler_with_det_k8s_binding_the_pods_is_no_warning(run_cli, cluster, fake_helm):
    # The documented set-up (docs/determined-master.md) for gang scheduling the master's pods: the bundled chart
    # deploys no scheduler, so nothing about Kubernetes 1.25+ breaks it (it was warned about, with "leave
    # defaultScheduler empty").
    ready_cluster(cluster)
    result = run_cli("install", "demo", *SETTINGS, "--set", "defaultScheduler=coscheduler")
    assert result.code == 0, result.err
    assert "kube-scheduler 1.18.9" not in result.err and "leave defaultScheduler empty" not in result.err


def test_install_over_an_existing_release_is_refused(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    result = run_cli("install", "demo", *SETTINGS)
    assert result.code == 1 and "error: release demo already exists in namespace default" in result.err
    assert not [c for c in fake_helm.cluster_calls if c[0] == "install"]


def test_helm_failure_keeps_helms_message(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    fake_helm.respond("install", stderr="Error: INSTALLATION FAILED: context deadline exceeded\n", rc=1)
    result = run_cli("install", "demo", *SETTINGS)
    assert result.code == 1
    assert result.err.strip().splitlines()[-1] == (
        "error: helm install demo failed (exit 1): Error: INSTALLATION FAILED: context deadline exceeded")


@pytest.mark.parametrize("name", ["Demo", "demo_1", "a" * 54, "x-", "det.prod"])
def test_bad_release_names_never_reach_helm(run_cli, fake_helm, name):
    result = run_cli("install", name, *SETTINGS, "--dry-run")
    assert result.code == 2 and result.err.startswith(f"error: RELEASE {name!r}")
    assert fake_helm.all_calls == []


def test_invalid_settings_list_every_error_and_run_nothing(run_cli, fake_helm):
    result = run_cli("install", "demo", *SETTINGS, "--set", "maxSlotPerPod=3", "--set", "checkpointStorage.bucket=null")
    assert result.code == 1 and len(result.err.strip().splitlines()) == 2
    assert fake_helm.all_calls == []


def test_a_bad_timeout_is_a_usage_error(run_cli, fake_helm):
    result = run_cli("install", "demo", *SETTINGS, "--timeout", "10x")
    assert result.code == 2 and "--timeout '10x': not a duration" in result.err
    assert fake_helm.all_calls == []


def test_a_bare_number_timeout_is_seconds_and_reaches_helm_with_its_unit(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    result = run_cli("install", "demo", *SETTINGS, "--timeout", "600")
    assert result.code == 0, result.err
    call = lifecycle_call(fake_helm, "install")
    assert call[call.index("--timeout") + 1] == "600s"  # helm wants a unit; 600 alone is refused by Go


def test_an_unreachable_cluster_is_one_line(run_cli, fake_helm, tmp_path, monkeypatch):
    from tests.support.k8s_emulator import RunningEmulator

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = RunningEmulator(url=f"http://127.0.0.1:{port}").write_kubeconfig(tmp_path / "kc", context="prod")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    result = run_cli("install", "demo", *SETTINGS)
    assert result.code == 1
    assert result.err.strip().splitlines() == [
        f"error: cannot reach the Kubernetes API at http://127.0.0.1:{port} (context prod): [Errno 111] Connection "
        "refused; is the cluster up? check --kube-context and your kubeconfig"]
    assert not [c for c in fake_helm.cluster_calls if c[0] == "install"]


def test_a_missing_helm_is_one_line_saying_how_to_get_it(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("DET_K8S_HELM", raising=False)
    result = run_cli("install", "demo", *SETTINGS, "--dry-run")
    assert result.code == 1
    (line,) = result.err.strip().splitlines()
    assert line.startswith("error: helm not found on PATH; install helm 3 or 4 (https://helm.sh/docs/intro/install/)")
    assert "scripts/fetch_tools.py" in line


def test_helm_binary_flag_and_environment_variable(run_cli, kubeconfig, tmp_path, monkeypatch, fake_helm):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("DET_K8S_HELM", str(fake_helm.path))
    assert run_cli("list").code == 0
    monkeypatch.delenv("DET_K8S_HELM")
    assert run_cli("list", "--helm-binary", fake_helm.path).code == 0
    result = run_cli("list", "--helm-binary", tmp_path / "nope")
    assert result.code == 1 and f"--helm-binary {tmp_path / 'nope'}: no executable helm there" in result.err
    assert len(fake_helm.cluster_calls) == 2


def test_the_child_never_gets_det_k8s_or_unrelated_variables(run_cli, kubeconfig, fake_helm, monkeypatch):
    monkeypatch.setenv("DET_K8S_TEST_TOKEN", "x")
    monkeypatch.setenv("HELM_DRIVER", "configmap")
    run_cli("list")
    env = fake_helm.invocations()[-1]["env"]
    assert "HELM_DRIVER" in env and "PATH" in env and "DET_K8S_TEST_TOKEN" not in env


# -- upgrade ---------------------------------------------------------------------------------


def upgrade_cluster(cluster):
    ready_cluster(cluster)
    for i in range(2):
        cluster.api.put(pod(f"exp-7-trial-12-{i}-7.ab.1-cat", labels={"determined": "7.ab.1"}, node_name="gpu-1"))
    cluster.api.put(pod("exp-3-trial-4-0-3.cd.1-done", labels={"determined": "3.cd.1"}, phase="Succeeded"))


def test_upgrade_without_a_terminal_or_yes_refuses_and_runs_nothing(run_cli, cluster, fake_helm):
    upgrade_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    result = run_cli("upgrade", "demo", *SETTINGS)
    assert result.code == 2
    assert "1 task(s) are running in default" in result.err and "resume from their latest checkpoint" in result.err
    assert "experiment 7, trial 12 (allocation 7.ab.1): exp-7-trial-12-0-7.ab.1-cat, exp-7-trial-12-1-7.ab.1-cat" \
        in result.err
    assert "exp-3" not in result.err
    assert result.err.strip().splitlines()[-1] == ("error: upgrade demo: not confirmed, nothing was changed; run it on "
                                                   "a terminal to be asked, or pass --yes")
    assert not [c for c in fake_helm.cluster_calls if c[0] == "upgrade"]


def test_upgrade_with_yes_waits(run_cli, cluster, fake_helm):
    upgrade_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    result = run_cli("upgrade", "demo", *SETTINGS, "--yes", "--timeout", "20m")
    assert result.code == 0, result.err
    call = lifecycle_call(fake_helm, "upgrade")
    assert call[5] == "--reset-values"
    assert check_private_chart(fake_helm, call) == ["upgrade", "demo", "--reset-values", "--namespace", "default",
                                                    "--timeout", "20m"]
    assert "Upgraded release demo in namespace default" in result.err


def test_upgrade_of_a_missing_release_is_refused(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    result = run_cli("upgrade", "demo", *SETTINGS, "--yes")
    assert result.code == 1 and "error: no Determined release demo in namespace default" in result.err
    assert not [c for c in fake_helm.cluster_calls if c[0] == "upgrade"]


def test_helm_errors_never_show_a_password(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    fake_helm.respond("install", stderr="Error: YAML parse error: line 7: db-password: \"Sup3r-Secret-77\" bad\n", rc=1)
    result = run_cli("install", "demo", *SETTINGS, "--set", "db.password=Sup3r-Secret-77")
    assert result.code == 1 and "Sup3r-Secret-77" not in result.err and "db-password: \"***\"" in result.err


def test_a_namespace_admin_without_cluster_wide_helm_list_still_installs(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    fake_helm.respond("list", "--output", "json", "--all-namespaces", rc=1,
                      stderr='Error: list: failed to list: secrets is forbidden: User "bob" cannot list resource '
                             '"secrets" at the cluster scope\n')
    result = run_cli("install", "demo", *SETTINGS)
    assert result.code == 0, result.err
    assert ("warning: other namespaces not checked for Determined releases: helm list: Error: list: failed to list: "
            'secrets is forbidden: User "bob" cannot list resource "secrets" at the cluster scope') in result.err
    assert [c[:4] for c in fake_helm.cluster_calls[:2]] == [["list", "--output", "json", "--all-namespaces"],
                                                     ["list", "--output", "json", "--namespace"]]


def test_a_bad_chart_fails_before_the_cluster_is_contacted(run_cli, cluster, fake_helm, tmp_path):
    result = run_cli("install", "demo", *SETTINGS, "--chart", tmp_path / "missing-chart")
    assert result.code == 1 and f"{tmp_path / 'missing-chart'}: no such chart directory or archive" in result.err
    assert cluster.api.calls == [] and fake_helm.calls == []


def test_install_wait_does_not_wait_for_a_load_balancer_and_names_what_is_not_ready(run_cli, cluster, fake_helm):
    """Issue 24 (1): helm --wait waited for a LoadBalancer's address that never comes; det-k8s waits for the master
    itself, and a wait that runs out names the Deployment that is not ready, not helm's bare deadline."""
    ready_cluster(cluster)
    cluster.api.put({"kind": "Service", "metadata": {"name": "determined-master-service-demo", "namespace": "default"},
                     "spec": {"type": "LoadBalancer", "ports": [{"port": 8080}]}})  # no address: none will come
    assert run_cli("install", "demo", *SETTINGS, "--wait", "--timeout", "20s").code == 0  # ready though no address
    cluster.api.put(master_deployment_object("default", available=0))
    result = run_cli("install", "demo", *SETTINGS, "--wait", "--timeout", "3s", "--rollback-on-failure")
    assert result.code == 1
    assert ("error: release demo is not ready after 3s: Deployment determined-master-deployment-demo: 0 of 1 "
            "replica(s) available") in result.err
    assert "did not become ready: uninstalling it (--rollback-on-failure)" in result.err
    assert ["uninstall", "demo", "--namespace", "default"] in fake_helm.cluster_calls
    assert "context deadline exceeded" not in result.err


def test_chart_objects_the_credentials_may_not_apply_are_one_warning(run_cli, cluster, fake_helm):
    """A namespace admin may not apply the chart's cluster-wide objects even as a dry run: one warning names them
    all, and the install goes on (helm is the judge of its own permissions)."""
    ready_cluster(cluster)
    cluster.api.serve_discovery()
    for plural in ("clusterroles", "clusterrolebindings", "priorityclasses"):
        cluster.api.fail("PATCH", plural, 403, f'{plural} is forbidden: User "alice" cannot patch resource', times=20)
    result = run_cli("install", "demo", *SETTINGS)
    assert result.code == 0, result.err
    # (the emulator's discovery lists no RBAC kinds, and it applies nothing in a namespace: those are their own
    # single warnings)
    lines = [ln for ln in result.err.splitlines() if "no permission to apply them" in ln]
    assert lines == ["warning: the chart's objects: 2 not checked by the API server (no permission to apply them, "
                     "even as a dry run): PriorityClass determined-system-priority, PriorityClass "
                     "determined-medium-priority; helm needs the same permissions to install them"], result.err
    assert len([ln for ln in result.err.splitlines() if "not checked by the API server" in ln]) <= 3
    assert [c[0] for c in fake_helm.cluster_calls].count("install") == 1
