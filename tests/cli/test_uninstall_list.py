"""uninstall and list through the real entry point: what uninstall says before deleting, consent, the exact helm
argv, leftover task pods; list filtered to the Determined chart."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.k8s_emulator import pod


def installed(cluster, *, keep_pvc: bool = True, bundled: bool = True) -> None:
    api = cluster.api
    api.put({"kind": "Secret", "metadata": {"name": "sh.helm.release.v1.demo.v1", "namespace": "default",
                                            "labels": {"owner": "helm", "name": "demo"}}})
    labels = {"release": "demo", "app": "determined-master-demo"}
    api.put({"kind": "Deployment", "metadata": {"name": "determined-master-deployment-demo", "namespace": "default",
                                                "labels": labels}})
    api.put({"kind": "Service", "metadata": {"name": "determined-master-service-demo", "namespace": "default",
                                             "labels": labels}})
    if bundled:
        api.put({"kind": "Deployment", "metadata": {"name": "determined-db-deployment-demo", "namespace": "default",
                                                    "labels": {"release": "demo"}}})
        annotations = {"helm.sh/resource-policy": "keep"} if keep_pvc else {}
        api.put({"kind": "PersistentVolumeClaim", "metadata": {"name": "determined-db-pvc-demo", "namespace": "default",
                                                               "labels": {"release": "demo"},
                                                               "annotations": annotations}})
    for name in ("exp-1-trial-1-0-1.a.1-cat", "cmd-0-b-dog"):
        api.put(pod(name, labels={"determined": name[-5:]}))
        api.put({"kind": "ConfigMap", "metadata": {"name": name, "namespace": "default",
                                                   "labels": {"determined": name[-5:]}}})
    api.put(pod("somebody-elses-pod"))
    api.put(pod("exp-9-trial-9-0-other-ns", namespace="ml", labels={"determined": "x"}))


def test_uninstall_without_consent_says_what_goes_and_never_calls_helm(run_cli, cluster, fake_helm):
    installed(cluster)
    result = run_cli("uninstall", "demo")
    assert result.code == 2
    assert "Uninstalling release demo from namespace default deletes:" in result.err
    assert "  - Deployment determined-master-deployment-demo" in result.err
    assert "2 task pod(s) labelled determined and 2 task ConfigMap(s): running experiments stop" in result.err
    assert "the database volume determined-db-pvc-demo with every experiment record" in result.err
    assert "kubectl delete pvc determined-db-pvc-demo -n default, or uninstall with --delete-data" in result.err
    assert result.err.strip().splitlines()[-1].startswith("error: uninstall demo: not confirmed, nothing was changed")
    assert fake_helm.all_calls == []
    assert cluster.api.count("DELETE") == 0


def test_uninstall_with_yes_runs_helm_then_deletes_leftover_task_pods(run_cli, cluster, fake_helm):
    installed(cluster)
    result = run_cli("uninstall", "demo", "--yes", "--timeout", "2m")
    assert result.code == 0, result.err
    assert fake_helm.calls == [["uninstall", "demo", "--namespace", "default", "--timeout", "2m"]]
    assert [p["metadata"]["name"] for p in cluster.api.items("pods")] == ["exp-9-trial-9-0-other-ns",
                                                                          "somebody-elses-pod"]
    assert cluster.api.items("configmaps", "default") == []
    assert cluster.api.get("persistentvolumeclaims", "determined-db-pvc-demo") is not None
    assert "Deleted 2 leftover task pod(s) and 2 task ConfigMap(s)" in result.err
    assert "Kept the database volume determined-db-pvc-demo" in result.err


def test_keep_pods_keeps_them(run_cli, cluster, fake_helm):
    installed(cluster)
    assert run_cli("uninstall", "demo", "-y", "--keep-pods").code == 0
    assert len(cluster.api.items("pods", "default")) == 3


def test_delete_data_warns_of_the_permanent_loss_and_deletes_the_volume(run_cli, cluster, fake_helm):
    installed(cluster)
    refused = run_cli("uninstall", "demo", "--delete-data")
    assert refused.code == 2 and "warning: this permanently deletes every experiment record" in refused.err
    assert cluster.api.get("persistentvolumeclaims", "determined-db-pvc-demo") is not None
    result = run_cli("uninstall", "demo", "--delete-data", "--yes")
    assert result.code == 0
    assert cluster.api.get("persistentvolumeclaims", "determined-db-pvc-demo") is None


def test_a_chart_that_does_not_keep_the_volume_says_records_go_for_good(run_cli, cluster, fake_helm):
    installed(cluster, keep_pvc=False)
    result = run_cli("uninstall", "demo")
    assert "ALL EXPERIMENT RECORDS in the bundled Postgres, permanently" in result.err
    assert "warning: this permanently deletes every experiment record" in result.err


def test_an_external_database_keeps_the_records(run_cli, cluster, fake_helm):
    installed(cluster, bundled=False)
    result = run_cli("uninstall", "demo")
    assert "experiment records: they live in your external database" in result.err
    assert "permanently" not in result.err


def test_uninstall_of_a_missing_release(run_cli, cluster, fake_helm):
    result = run_cli("uninstall", "ghost", "--yes")
    assert result.code == 1 and "error: no release ghost in namespace default" in result.err
    assert fake_helm.all_calls == []


def test_uninstall_bad_name_is_a_usage_error(run_cli, fake_helm):
    assert run_cli("uninstall", "Ghost", "--yes").code == 2
    assert fake_helm.all_calls == []


LISTED = [
    {"name": "demo", "namespace": "det", "revision": "3", "status": "deployed", "chart": "determined-0.1.0",
     "app_version": "0.17.15"},
    {"name": "web", "namespace": "det", "revision": "1", "status": "deployed", "chart": "ingress-nginx-4.1.0",
     "app_version": "1.1"},
    {"name": "old", "namespace": "ml", "revision": "9", "status": "failed", "chart": "determined-0.17.0",
     "app_version": "0.17.0"},
]


def test_list_filters_to_determined_and_warns_about_two(run_cli, kubeconfig, fake_helm):
    fake_helm.respond("list", stdout=json.dumps(LISTED))
    result = run_cli("list", "-A")
    assert result.code == 0
    assert fake_helm.calls == [["list", "--output", "json", "--all-namespaces"] + (
        ["--all"] if fake_helm.major == 3 else [])]
    lines = result.out.splitlines()
    assert lines[0].split() == ["NAME", "NAMESPACE", "REVISION", "STATUS", "CHART", "APP", "VERSION"]
    assert [ln.split()[0] for ln in lines[1:]] == ["demo", "old"]
    assert "warning: 2 Determined releases; the documents recommend one per cluster" in result.err


@pytest.mark.parametrize("fmt,load", [("json", json.loads), ("yaml", yaml.safe_load)])
def test_list_as_data(run_cli, kubeconfig, fake_helm, fmt, load):
    fake_helm.respond("list", stdout=json.dumps(LISTED[:1]))
    result = run_cli("list", "-n", "det", "-o", fmt)
    assert load(result.out) == [{"name": "demo", "namespace": "det", "revision": "3", "status": "deployed",
                                 "chart": "determined-0.1.0", "app_version": "0.17.15"}]
    assert fake_helm.calls[0][3:5] == ["--namespace", "det"]
    assert result.err == ""


def test_list_nothing(run_cli, kubeconfig, fake_helm):
    result = run_cli("list")
    assert result.code == 0 and result.out == "" and "no Determined release in this namespace (-A for all)" in result.err
