"""`det-k8s diff` with the real helm 3 and helm 4 rendering both sides: the installed revision is a chart the
real helm rendered from one set of settings (what `helm get manifest` would return), the new side is rendered by
the real helm from the settings given. Only `helm get` needs a cluster: the recording fake answers those and hands
every other call to the real binary."""

from __future__ import annotations

import json
import subprocess

import pytest

from det_k8s.chart.assemble import write_chart
from det_k8s.settings import Document, load_settings
from det_k8s.tools.helm import manifests_from_render, render_argv
from det_k8s.tools.locate import forget_versions
from tests.conftest import example

pytestmark = pytest.mark.helm
GPU = example("gpu-cluster.yaml")
OLD_PASSWORD, NEW_PASSWORD = "Old-Passw0rd-2024", "New-Passw0rd-2025"


def render(real_helm, tmp_path, major: int, *sets: str) -> str:
    """The manifests the real helm renders for gpu-cluster.yaml plus `sets`, secrets and all (as helm stores them)."""
    loaded = load_settings([Document(str(GPU), GPU.read_text())], sets)
    built = write_chart(tmp_path / f"installed-{len(sets)}", loaded.values, loaded.settings().app_version, None)
    argv = render_argv(major, "demo", str(built.directory), str(built.values_file), "default")
    result = subprocess.run([str(real_helm), *argv], capture_output=True, text=True, timeout=120, check=True)
    return manifests_from_render(major, result.stdout)


@pytest.fixture
def installed(fake_helm, kubeconfig, tmp_path, helm3, helm4):
    """Release demo installed from gpu-cluster.yaml with db.password OLD_PASSWORD (helm get answered by the fake)."""
    real = helm3 if fake_helm.major == 3 else helm4
    fake_helm.delegate_to(real)
    manifest = render(real, tmp_path, fake_helm.major, f"db.password={OLD_PASSWORD}")
    assert OLD_PASSWORD in manifest  # the stored release holds the real secret
    fake_helm.respond("get", "manifest", "demo", stdout=manifest)
    fake_helm.respond("get", "hooks", "demo", stdout="")
    fake_helm.respond("get", "values", "demo", stdout=json.dumps({"db": {"password": OLD_PASSWORD}}))
    forget_versions()
    return fake_helm


def test_the_same_settings_change_nothing_and_exit_0(run_cli, installed):
    result = run_cli("diff", "demo", "-f", GPU, "--set", f"db.password={OLD_PASSWORD}")
    assert result.code == 0, result.err
    assert result.out == "" and "upgrade of release demo (namespace default): no changes" in result.err
    gets = [c for c in installed.calls if c[0] == "get"]
    assert gets == [["get", "manifest", "demo", "--namespace", "default"], ["get", "hooks", "demo", "--namespace",
                                                                             "default"],
                    ["get", "values", "demo", "--output", "json", "--namespace", "default"]]  # its secrets, to hide
    (render_call,) = [c for c in installed.calls if c[0] in ("template", "install")]  # run by the real helm
    assert render_call[0] == "template" and render_call[-1] == "--is-upgrade"  # an upgrade, helm 3 and 4 alike


def test_a_changed_setting_shows_in_the_master_configuration_and_exits_2_with_detailed_exitcode(run_cli, installed):
    result = run_cli("diff", "demo", "-f", GPU, "--set", f"db.password={OLD_PASSWORD}", "--set", "maxSlotsPerPod=8",
                     "--detailed-exitcode")
    assert result.code == 2, result.err
    out = result.out.splitlines()
    # From 0.26.2 (the default release is newer) the master configuration is a Secret; its master.yaml still
    # shows line by line, as a ConfigMap's would.
    assert "default, determined-master-config-demo, Secret (v1) has changed:" in out
    assert "-      max_slots_per_pod: 4" in out and "+      max_slots_per_pod: 8" in out
    # The master restarts for it: its Deployment's secret fingerprint changes too, and nothing else does.
    assert "default, determined-master-deployment-demo, Deployment (apps) has changed:" in out
    assert [ln.split(":")[0] for ln in out if ln.startswith(("+ ", "- ")) and "fingerprint/" in ln] == \
        ["-        fingerprint/secret", "+        fingerprint/secret"]
    assert "upgrade of release demo (namespace default): 2 changed, 0 added, 0 removed" in result.err


def test_changes_exit_2_with_or_without_helm_diffs_flag_and_a_usage_error_prints_no_diff(run_cli, installed):
    # as helm diff --detailed-exitcode: 2 on changes; the flag is accepted for helm-diff's scripts
    changed = run_cli("diff", "demo", "-f", GPU, "--set", f"db.password={OLD_PASSWORD}", "--set", "maxSlotsPerPod=8")
    assert changed.code == 2, changed.err
    assert "+      max_slots_per_pod: 8" in changed.out.splitlines()
    usage = run_cli("diff", "demo", "-f", GPU, "--unified", "-1", "--detailed-exitcode")
    assert usage.code == 2 and usage.out == "" and "--unified" in usage.err
    same = run_cli("diff", "demo", "-f", GPU, "--set", f"db.password={OLD_PASSWORD}", "--detailed-exitcode")
    assert same.code == 0, same.err


def test_a_changed_password_shows_as_a_changed_hash_never_as_itself(run_cli, installed):
    result = run_cli("diff", "demo", "-f", GPU, "--set", f"db.password={NEW_PASSWORD}")
    assert result.code == 2, result.err
    assert OLD_PASSWORD not in result.out + result.err and NEW_PASSWORD not in result.out + result.err
    for name, key in (("determined-master-secrets-demo", "db-password"), ("determined-master-config-demo", "password")):
        secret = result.out.split(f"{name}, Secret (v1) has changed:")[1].split("\n\n")[0]
        removed = [ln for ln in secret.splitlines() if ln.startswith("-") and f"{key}:" in ln]
        added = [ln for ln in secret.splitlines() if ln.startswith("+") and f"{key}:" in ln]
        assert len(removed) == len(added) == 1, secret
        assert "<secret 17 bytes, hash " in removed[0] and "<secret 17 bytes, hash " in added[0]
        assert removed[0][1:] != added[0][1:]
        changed = [ln for ln in secret.splitlines() if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))]
        assert len(changed) == 2, secret  # the other values of the Secret hash the same: unchanged


def test_diff_needs_the_release(run_cli, fake_helm, kubeconfig, helm3, helm4):
    fake_helm.delegate_to(helm3 if fake_helm.major == 3 else helm4)
    fake_helm.respond("get", "manifest", "demo", stderr="Error: release: not found\n", rc=1)
    result = run_cli("diff", "demo", "-f", GPU, "--kube-context", "prod")
    assert result.code == 1
    assert result.err.strip().splitlines()[-1] == ("error: no release demo in namespace ml (context prod); "
                                                   "det-k8s list -A shows the releases")


def test_diff_of_an_upgrade_without_the_initial_password(run_cli, installed):
    # An upgrade needs no initialUserPassword (the chart asks for one only on a fresh install: no database Service
    # yet, found by helm's lookup), and `upgrade` accepts settings without it; diff renders offline, where lookup
    # finds nothing, so it failed with "An initial password ... is required" for the settings upgrade would take.
    result = run_cli("diff", "demo", "-f", GPU, "--set", f"db.password={OLD_PASSWORD}", "--set",
                     "initialUserPassword=null")
    assert "initial password" not in result.err, result.err
    assert result.code == 2, result.err  # the password left the master configuration: that is a change
    assert "default, determined-master-config-demo, Secret (v1) has changed:" in result.out
