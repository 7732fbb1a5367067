"""`install --dry-run` and `upgrade --dry-run` with the real helm 3 and helm 4: manifests, no cluster contacted,
no secret printed."""

from __future__ import annotations

import pytest
import yaml

from det_k8s.tools.locate import forget_versions
from tests.conftest import ROOT, example
from tests.support.needs import need

pytestmark = pytest.mark.helm


@pytest.fixture(autouse=True)
def _fresh_versions():
    forget_versions()


def docs(text: str) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text) if d}


@pytest.mark.parametrize("command", ["install", "upgrade"])
def test_dry_run_prints_the_command_and_redacted_manifests_without_a_cluster(run_cli, helm, cluster, command,
                                                                              isolated_home, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))  # a cluster is there; it must not be asked anything
    result = run_cli(command, "demo", "-f", example("gpu-cluster.yaml"), "--set", "db.password=Sup3r-Secret-77",
                     "-n", "det", "--dry-run", "--helm-binary", helm)
    assert result.code == 0, result.err
    assert cluster.api.calls == [] and cluster.api.count("GET") == 0
    (line,) = [ln for ln in result.err.splitlines() if ln.startswith("would run: ")]
    argv = line.removeprefix("would run: ").split()
    assert argv[:3] == [str(helm), command, "demo"] and argv[4] == "--values"
    assert argv[4:] == ["--values", f"{argv[3]}/values.yaml", *(["--reset-values"] if command == "upgrade" else []),
                        "--namespace", "det", *(["--wait" if "helm3" in str(helm) else "--wait=watcher"]
                                                if command == "upgrade" else []), "--timeout", "10m"]
    objs = docs(result.out)
    assert objs[("Deployment", "determined-master-deployment-demo")]["metadata"]["namespace"] == "det"
    assert ("PriorityClass", "determined-system-priority") in objs
    scheduler = objs[("Deployment", "det-k8s-scheduler-demo")]  # one install gives gang scheduling
    assert scheduler["spec"]["template"]["spec"]["containers"][0]["args"][:4] == ["scheduler", "run", "--namespace",
                                                                                 "det"]
    assert ("ClusterRole", "det-k8s-scheduler-det-demo") in objs and ("ServiceAccount", "det-k8s-scheduler-demo") in objs
    secret = objs[("Secret", "determined-master-secrets-demo")]
    assert set(secret["stringData"].values()) == {"<redacted>"} and "db-password" in secret["stringData"]
    config = objs[("Secret", "determined-master-config-demo")]  # the whole master config from 0.26.2, shown
    master = yaml.safe_load(config["stringData"]["master.yaml"])  # with only its secrets masked
    assert master["db"] == {"user": "postgres", "password": "<redacted>", "host": "determined-db-service-demo",
                            "port": 5432, "name": "determined"}
    assert master["security"]["initial_user_password"] == "<redacted>"
    assert master["checkpoint_storage"]["bucket"] == "det-checkpoints"
    assert master["resource_manager"]["max_slots_per_pod"] == 4
    toleration = master["task_container_defaults"]["gpu_pod_spec"]["spec"]["tolerations"][0]
    assert toleration["key"] == "accelerator"  # a pod spec's `key` is Kubernetes's, no secret
    for secret_text in ("Sup3r-Secret-77", "Ch4nge-me-now"):
        assert secret_text not in result.out + result.err


def test_dry_run_reports_a_chart_error_with_helms_message(run_cli, helm, isolated_home, tmp_path):
    chart = tmp_path / "broken"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: determined\nversion: 0.1.0\nappVersion: 0.17.15\n")
    (chart / "templates" / "bad.yaml").write_text("kind: ConfigMap\nmetadata:\n  name: {{ .Values.nope.deeper }}\n")
    result = run_cli("install", "demo", "-f", example("gpu-cluster.yaml"), "--set-string", "appVersion=0.38.1",
                     "--chart", chart, "--dry-run", "--helm-binary", helm)  # the settings' release, not the chart's
    assert result.code == 1
    assert "helm cannot template it with these settings" in result.err and "nil pointer" in result.err
    assert "would run" not in result.out + result.err


def test_dry_run_of_a_chart_that_puts_the_password_outside_a_secret_never_prints_it(run_cli, helm, isolated_home,
                                                                                    tmp_path):
    """The official 0.17.15 chart writes db.password into the master's ConfigMap and a Job's env."""
    official = ROOT.parent / "shared" / "determined" / "charts" / "0.17.15"
    need(official.is_dir(), f"{official} is absent")
    settings = tmp_path / "site-0.17.yaml"  # what that chart's release takes: no initial password, no s3 prefix
    settings.write_text("appVersion: 0.17.15\nmaxSlotsPerPod: 4\ncheckpointStorage: {type: s3, bucket: det-checkpoints}\n")
    result = run_cli("install", "demo", "-f", settings, "--set", "db.password=Leaky-Pass-42",
                     "--chart", official, "--dry-run", "--helm-binary", helm)
    assert result.code == 0, result.err
    assert "Leaky-Pass-42" not in result.out + result.err
    assert 'password: "<redacted>"' in result.out


@pytest.mark.parametrize("explicit", [False, True], ids=["default", "set"])
def test_the_default_database_password_redacts_its_place_only_and_is_warned_about(run_cli, helm, isolated_home,
                                                                                   explicit):
    """Issue 38, item 5: the dry run replaced every `postgres` (the default db.password) in the manifests, so it
    printed `image: "<redacted>:10.14"` and `- name: <redacted>`, breaking them and telling every reader the
    password. Now each secret's place is redacted (rendered from placeholders), and the default is warned about.
    No cluster: the dry run contacts none (with the real helm 3 and 4)."""
    extra = ["--set", "db.password=postgres"] if explicit else []
    result = run_cli("install", "demo", "-f", example("gpu-cluster.yaml"), *extra, "--dry-run", "--helm-binary", helm)
    assert result.code == 0, result.err
    assert "<redacted>:" not in result.out and "name: <redacted>" not in result.out and "***" not in result.out
    objs = docs(result.out)
    db = objs[("Deployment", "determined-db-deployment-demo")]["spec"]["template"]["spec"]["containers"][0]
    assert db["image"] == "postgres:10.14" and db["ports"][0]["name"] == "postgres"
    assert {"name": "POSTGRES_USER", "value": "postgres"} in db["env"]
    assert objs[("Secret", "determined-master-secrets-demo")]["stringData"]["db-password"] == "<redacted>"
    master = yaml.safe_load(objs[("Secret", "determined-master-config-demo")]["stringData"]["master.yaml"])
    assert master["db"]["password"] == "<redacted>"
    assert ("warning: db.password is the chart's default, which every reader of the chart knows, and it protects the "
            "bundled database; set db.password (it is kept in a Secret)") in result.err
    chosen = run_cli("install", "demo", "-f", example("gpu-cluster.yaml"), "--set", "db.password=Other-Pass-9",
                     "--dry-run", "--helm-binary", helm)
    assert chosen.code == 0 and "db.password is the chart's default" not in chosen.err
    assert "Other-Pass-9" not in chosen.out + chosen.err
