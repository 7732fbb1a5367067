"""get values, history, rollback and upgrade --diff through the real entry point: the exact helm argv (helm 3 and
4, recording fake), the live preflight against the API emulator, consent, secrets never shown."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.cli.test_install_upgrade import DETERMINED, ready_cluster
from tests.conftest import example
from tests.support.k8s_emulator import pod

NS = ["--namespace", "default"]
HISTORY = [
    {"revision": 1, "updated": "2025-01-02T10:00:00.123+00:00", "status": "superseded", "chart": "determined-0.1.0",
     "app_version": "0.17.15", "description": "Install complete"},
    {"revision": 2, "updated": "2025-02-03T11:00:00.456+00:00", "status": "superseded", "chart": "determined-0.1.0",
     "app_version": "0.17.15", "description": "Upgrade complete"},
    {"revision": 3, "updated": "2025-03-04T12:00:00.789+00:00", "status": "deployed", "chart": "determined-0.1.0",
     "app_version": "0.26.2", "description": "Upgrade complete"},
]
# The values revisions 1 and 2 (Determined 0.17.15) were installed with: that release has no initialUserPassword.
VALUES = {k: v for k, v in yaml.safe_load(example("gpu-cluster.yaml").read_text()).items() if k != "initialUserPassword"}
MANIFEST = """---
# Source: determined/templates/master-deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata: {{name: determined-master-deployment-demo}}
spec:
  template:
    spec:
      containers: [{{name: determined-master, image: "determinedai/determined-master:{version}"}}]
---
# Source: determined/templates/master-secret.yaml
apiVersion: v1
kind: Secret
metadata: {{name: determined-master-secrets-demo}}
stringData:
  db-password: "{password}"
"""


@pytest.fixture
def released(cluster, fake_helm):
    """Release demo at revision 3 (Determined 0.26.2); revisions 1 and 2 ran 0.17.15."""
    ready_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    fake_helm.respond("history", "demo", stdout=json.dumps(HISTORY))
    fake_helm.respond("get", "manifest", "demo", stdout=MANIFEST.format(version="0.26.2", password="Pw-Three-333"))
    fake_helm.respond("get", "hooks", "demo", stdout="")
    for revision in (1, 2):
        fake_helm.respond("get", "manifest", "demo", *NS, "--revision", str(revision),
                          stdout=MANIFEST.format(version="0.17.15", password=f"Pw-Old-{revision}{revision}"))
        fake_helm.respond("get", "values", "demo", "--output", "json", *NS, "--revision", str(revision),
                          stdout=json.dumps(VALUES))
    return fake_helm


def rollbacks(fake) -> list[list[str]]:
    return [c for c in fake.calls if c[0] == "rollback"]


def test_rollback_without_consent_names_what_changes_and_changes_nothing(run_cli, released):
    result = run_cli("rollback", "demo", "--skip-storage-check")
    assert result.code == 2
    assert ("Rolling back release demo in namespace default from revision 3 (determined-0.1.0, Determined 0.26.2, "
            "deployed) to revision 2 (determined-0.1.0, Determined 0.17.15, superseded), recorded as revision 4."
            ) in result.err
    assert "It changes 2 objects (2 changed, 0 added, 0 removed):" in result.err
    assert "  changed  Deployment determined-master-deployment-demo" in result.err
    assert "  changed  Secret determined-master-secrets-demo" in result.err
    assert "warning: this takes Determined back from 0.26.2 to 0.17.15" in result.err
    assert result.err.strip().splitlines()[-1] == ("error: rollback demo: not confirmed, nothing was changed; run it "
                                                   "on a terminal to be asked, or pass --yes")
    assert rollbacks(released) == []
    assert ["history", "demo", "--output", "json", *NS] in released.calls
    assert ["get", "values", "demo", "--output", "json", *NS, "--revision", "2"] in released.calls
    for text in ("Pw-Three-333", "Pw-Old-22"):
        assert text not in result.out + result.err


def test_rollback_with_yes_runs_helm_rollback_with_the_exact_argv(run_cli, released):
    result = run_cli("rollback", "demo", "--skip-storage-check", "--yes", "--timeout", "15m")
    assert result.code == 0, result.err
    assert rollbacks(released) == [["rollback", "demo", "2", *NS, "--timeout", "15m"]]
    assert "Rolled back release demo in namespace default to revision 2 (Determined 0.17.15); helm recorded it as " \
           "revision 4" in result.err


def test_rollback_to_a_named_revision_and_its_diff(run_cli, released):
    result = run_cli("rollback", "demo", "1", "--skip-storage-check", "--yes", "--diff")
    assert result.code == 0, result.err
    assert rollbacks(released)[0][:3] == ["rollback", "demo", "1"]
    assert "default, determined-master-deployment-demo, Deployment (apps) has changed:" in result.out
    assert "determinedai/determined-master:0.17.15" in result.out and "Pw-Old" not in result.out


@pytest.mark.parametrize(("revision", "code", "message"), [
    ("7", 2, "error: REVISION 7: not in the history of demo (revisions 1, 2, 3); det-k8s history demo"),
    ("3", 2, "error: revision 3 is the current revision of demo"),
])
def test_rollback_to_a_revision_that_is_not_there(run_cli, released, revision, code, message):
    result = run_cli("rollback", "demo", revision, "--yes")
    assert result.code == code and result.err.strip().splitlines()[-1].startswith(message)
    assert rollbacks(released) == []


def test_rollback_with_one_revision_or_of_another_chart(run_cli, released):
    released.respond("history", "demo", stdout=json.dumps(HISTORY[:1]))
    result = run_cli("rollback", "demo", "--yes")
    assert result.code == 1 and "has only revision 1: there is nothing to roll back to" in result.err
    released.respond("history", "demo", stdout=json.dumps([{**h, "chart": "nginx-1.2.3"} for h in HISTORY]))
    result = run_cli("rollback", "demo", "--yes")
    assert result.code == 2 and "release demo in namespace default is chart nginx-1.2.3, not Determined" in result.err
    assert rollbacks(released) == []


def test_rollback_runs_the_upgrade_preflight_on_the_revisions_settings(run_cli, released):
    released.respond("get", "values", "demo", "--output", "json", *NS, "--revision", "2",
                     stdout=json.dumps({**VALUES, "imagePullSecretName": "regcred"}))
    result = run_cli("rollback", "demo", "--skip-storage-check", "--yes")
    assert result.code == 1
    assert "error: imagePullSecretName: Secret regcred does not exist in namespace default" in result.err
    assert "(the values of revision 2:" in result.err  # where the setting came from
    assert rollbacks(released) == []


def test_rollback_dry_run_checks_and_says_what_it_would_run(run_cli, released):
    result = run_cli("rollback", "demo", "--skip-storage-check", "--dry-run")
    assert result.code == 0, result.err
    (line,) = [ln for ln in result.err.splitlines() if ln.startswith("would run: ")]
    assert line.endswith("rollback demo 2 --namespace default --timeout 10m  (dry run: nothing was changed)")
    assert rollbacks(released) == []


def test_running_tasks_without_an_allocation_id_are_named_sensibly(run_cli, cluster, released):
    cluster.api.put(pod("cmd-1-0-x", labels={"determined": ""}, node_name="gpu-1"))
    result = run_cli("rollback", "demo", "--skip-storage-check")
    assert "allocation )" not in result.err
    assert "command, notebook, shell or TensorBoard (no allocation label): cmd-1-0-x" in result.err


def test_get_values_masks_secrets_and_speaks_yaml_or_json(run_cli, kubeconfig, fake_helm):
    fake_helm.respond("get", "values", "demo", stdout=json.dumps(
        {**VALUES, "db": {"password": "Db-Pass-123", "name": "determined"}, "imagePullSecretName": "regcred"}))
    result = run_cli("get", "values", "demo")
    assert result.code == 0, result.err
    assert fake_helm.calls == [["get", "values", "demo", "--output", "json", *NS]]
    shown = yaml.safe_load(result.out)
    assert shown["db"] == {"password": "<redacted>", "name": "determined"}
    assert shown["imagePullSecretName"] == "regcred" and shown["maxSlotsPerPod"] == 4
    as_json = run_cli("get", "values", "demo", "-o", "json", "--all", "--revision", "2", "--kube-context", "prod")
    assert json.loads(as_json.out)["db"]["password"] == "<redacted>" and "Db-Pass-123" not in as_json.out
    assert fake_helm.calls[-1] == ["get", "values", "demo", "--all", "--output", "json", "--namespace", "ml",
                                   "--kube-context", "prod", "--revision", "2"]


def test_get_values_of_nothing_and_of_a_missing_release(run_cli, kubeconfig, fake_helm):
    fake_helm.respond("get", "values", "demo", stdout="null\n")
    assert run_cli("get", "values", "demo").out == "{}\n"
    fake_helm.respond("get", "values", "demo", stderr="Error: release: not found\n", rc=1)
    result = run_cli("get", "values", "demo")
    assert result.code == 1 and result.err.strip() == ("error: no release demo in namespace default (context dev); "
                                                       "det-k8s list -A shows the releases")


def test_history_as_a_table_and_as_data(run_cli, kubeconfig, fake_helm):
    fake_helm.respond("history", "demo", stdout=json.dumps(HISTORY))
    result = run_cli("history", "demo", "--max", "5")
    assert result.code == 0, result.err
    assert fake_helm.calls == [["history", "demo", "--output", "json", *NS, "--max", "5"]]
    lines = result.out.splitlines()
    assert lines[0].split() == ["REVISION", "UPDATED", "STATUS", "CHART", "APP", "VERSION", "DESCRIPTION"]
    assert lines[3].split()[:5] == ["3", "2025-03-04", "12:00:00", "deployed", "determined-0.1.0"]
    rows = json.loads(run_cli("history", "demo", "-o", "json").out)
    assert [r["revision"] for r in rows] == [1, 2, 3] and rows[2]["app_version"] == "0.26.2"


def test_upgrade_diff_shows_the_changes_before_asking(run_cli, cluster, fake_helm, helm3, helm4):
    ready_cluster(cluster)
    fake_helm.delegate_to(helm3 if fake_helm.major == 3 else helm4)  # the render needs no cluster: the real helm
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    fake_helm.respond("get", "manifest", "demo", stdout=MANIFEST.format(version="0.17.15", password="x"))
    fake_helm.respond("get", "hooks", "demo", stdout="")
    result = run_cli("upgrade", "demo", "-f", example("gpu-cluster.yaml"), "--skip-storage-check", "--diff")
    assert result.code == 2  # not confirmed
    assert "has been added:" in result.out and "default, determined-master-deployment-demo, Deployment (apps) has " \
        "changed:" in result.out
    assert "upgrade of release demo (namespace default):" in result.err
    assert not [c for c in fake_helm.calls if c[0] == "upgrade"]
    dry = run_cli("upgrade", "demo", "-f", example("gpu-cluster.yaml"), "--diff", "--dry-run")
    assert dry.code == 2 and "--diff compares with the installed release, which --dry-run does not contact" in dry.err


def test_rollback_to_revision_0_is_the_previous_revision_as_in_helm(run_cli, released):
    # `helm rollback RELEASE 0` rolls back to the previous revision (helm's help: "If this argument is omitted or set
    # to 0, it will roll back to the previous release"); det-k8s refused 0 as a usage error.
    result = run_cli("rollback", "demo", "0", "--skip-storage-check", "--yes")
    assert result.code == 0, result.err
    assert rollbacks(released) == [["rollback", "demo", "2", *NS, "--timeout", "10m"]]
