"""helm's flags on install, upgrade, rollback and uninstall, where det-k8s has the behaviour: accepted, with the exact
helm argv each gives (helm 3 and 4, recording fake; the live checks against the API emulator)."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_install_upgrade import DETERMINED, SETTINGS, check_private_chart, lifecycle_call, ready_cluster
from tests.cli.test_release_ops import NS, released, rollbacks  # noqa: F401 (a fixture)
from tests.cli.test_uninstall_list import installed

pytestmark = pytest.mark.emulator


def test_upgrade_takes_helms_wait_atomic_and_reset_values(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    fake_helm.respond("list", stdout=json.dumps(DETERMINED))
    result = run_cli("upgrade", "demo", *SETTINGS, "--yes", "--wait", "--atomic", "--reset-values", "--timeout", "20m")
    assert result.code == 0, result.err
    # det-k8s waits for the master itself and undoes a failed upgrade itself: helm gets neither --wait nor --atomic
    assert check_private_chart(fake_helm, lifecycle_call(fake_helm, "upgrade")) == [
        "upgrade", "demo", "--reset-values", "--namespace", "default", "--timeout", "20m"]
    assert "Upgraded release demo in namespace default" in result.err


def test_upgrade_help_says_it_always_waits(run_cli):
    result = run_cli("upgrade", "--help")
    assert "det-k8s always" in result.out and "waits until the master and database are" in result.out
    assert "--rollback-on-failure, --atomic" in result.out


def test_install_takes_atomic_as_helm_3_spells_rollback_on_failure(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    result = run_cli("install", "demo", *SETTINGS, "--atomic")
    assert result.code == 0, result.err
    assert check_private_chart(fake_helm, lifecycle_call(fake_helm, "install")) == [
        "install", "demo", "--namespace", "default", "--timeout", "10m"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_install_dash_o_prints_the_release_on_stdout_as_helm_does(run_cli, cluster, fake_helm, fmt):
    import yaml

    ready_cluster(cluster)
    result = run_cli("install", "demo", *SETTINGS, "--wait", "-o", fmt)
    assert result.code == 0, result.err
    data = json.loads(result.out) if fmt == "json" else yaml.safe_load(result.out)
    assert data == {"name": "demo", "namespace": "default", "status": "deployed", "app_version": "0.38.1",
                    "ready": True, "master_url": None}
    assert "Installed release demo" in result.err  # the messages stay on stderr


def test_install_dry_run_with_dash_o_json_says_what_each_does(run_cli, fake_helm):
    result = run_cli("install", "demo", *SETTINGS, "--dry-run", "-o", "json")
    assert result.code == 2 and result.out == ""
    assert result.err == ("error: -o json describes the release installed; --dry-run prints the manifests as YAML; "
                          "drop one of them; `det-k8s render ... --output-dir DIR` writes the manifests\n")


def test_rollback_takes_helms_wait(run_cli, released):  # noqa: F811
    result = run_cli("rollback", "demo", "--skip-storage-check", "--yes", "--wait", "--timeout", "15m")
    assert result.code == 0, result.err
    assert rollbacks(released) == [["rollback", "demo", "2", *NS, "--timeout", "15m"]]


def test_uninstall_passes_wait_and_keep_history_to_helm(run_cli, cluster, fake_helm):
    installed(cluster)
    result = run_cli("uninstall", "demo", "--yes", "--wait", "--keep-history", "--timeout", "2m")
    assert result.code == 0, result.err
    wait = ["--wait"] if fake_helm.major == 3 else ["--wait=watcher"]
    assert fake_helm.calls == [["uninstall", "demo", "--namespace", "default", *wait, "--keep-history",
                                "--timeout", "2m"]]


def test_uninstall_dry_run_says_what_goes_and_deletes_nothing(run_cli, cluster, fake_helm):
    installed(cluster)
    result = run_cli("uninstall", "demo", "--dry-run")
    assert result.code == 0, result.err
    assert "Uninstalling release demo from namespace default deletes:" in result.err
    assert result.err.strip().splitlines()[-1] == ("dry run: nothing was deleted (det-k8s uninstall demo -n default "
                                                   "does it)")
    assert fake_helm.all_calls == [] and cluster.api.count("DELETE") == 0


def test_uninstall_ignore_not_found_is_not_an_error(run_cli, cluster, fake_helm):
    ready_cluster(cluster)
    missing = run_cli("uninstall", "ghost", "--yes")
    assert missing.code == 1 and "error: no release ghost in namespace default" in missing.err
    ignored = run_cli("uninstall", "ghost", "--yes", "--ignore-not-found")
    assert ignored.code == 0 and ignored.err == "no release ghost in namespace default: nothing to uninstall\n"
    assert fake_helm.all_calls == []
