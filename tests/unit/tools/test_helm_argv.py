"""The argv det-k8s gives helm, exactly, for helm 3 and helm 4 (pure builders, no process)."""

from __future__ import annotations

import json

import pytest

from det_k8s.errors import ToolFailed
from det_k8s.tools.helm import (
    KubeFlags,
    ReleaseSpec,
    get_values_argv,
    install_argv,
    list_argv,
    manifests_from_render,
    parse_major,
    render_argv,
    status_argv,
    uninstall_argv,
    upgrade_argv,
)

KUBE = KubeFlags("det", "prod", "/home/a/kc")
SPEC = ReleaseSpec("demo", "/tmp/b/chart", "/tmp/b/chart/values.yaml", KUBE, wait=True, timeout="10m",
                   create_namespace=True, rollback_on_failure=True)
BASE = ["demo", "/tmp/b/chart", "--values", "/tmp/b/chart/values.yaml"]
KUBE_ARGS = ["--namespace", "det", "--kube-context", "prod", "--kubeconfig", "/home/a/kc"]


def test_install_helm3_waits_with_wait_and_rolls_back_with_atomic():
    assert install_argv(3, SPEC) == ["install", *BASE, *KUBE_ARGS, "--wait", "--timeout", "10m", "--atomic",
                                     "--create-namespace"]


def test_install_helm4_waits_with_watcher_and_rolls_back_with_rollback_on_failure():
    assert install_argv(4, SPEC) == ["install", *BASE, *KUBE_ARGS, "--wait=watcher", "--timeout", "10m",
                                     "--rollback-on-failure", "--create-namespace"]


@pytest.mark.parametrize("major", [3, 4])
def test_install_without_options_is_minimal(major):
    spec = ReleaseSpec("demo", "/c", "/c/values.yaml", KubeFlags())
    assert install_argv(major, spec) == ["install", "demo", "/c", "--values", "/c/values.yaml"]


def test_upgrade_resets_values_and_waits_per_major():
    spec = ReleaseSpec("demo", "/c", "/c/v.yaml", KubeFlags("det"), wait=True, timeout="5m")
    assert upgrade_argv(3, spec) == ["upgrade", "demo", "/c", "--values", "/c/v.yaml", "--reset-values",
                                     "--namespace", "det", "--wait", "--timeout", "5m"]
    assert upgrade_argv(4, spec) == ["upgrade", "demo", "/c", "--values", "/c/v.yaml", "--reset-values",
                                     "--namespace", "det", "--wait=watcher", "--timeout", "5m"]


@pytest.mark.parametrize("major", [3, 4])
def test_uninstall(major):
    assert uninstall_argv(major, "demo", KUBE, "5m") == ["uninstall", "demo", *KUBE_ARGS, "--timeout", "5m"]
    wait = "--wait" if major == 3 else "--wait=watcher"  # helm 4's plain --wait is watcher too; said as the others
    assert uninstall_argv(major, "demo", KUBE, "5m", wait=True, keep_history=True) == [
        "uninstall", "demo", *KUBE_ARGS, wait, "--keep-history", "--timeout", "5m"]


def test_list_shows_every_status_in_both_majors():
    assert list_argv(3, KubeFlags(), all_namespaces=True) == ["list", "--output", "json", "--all-namespaces", "--all"]
    assert list_argv(4, KubeFlags(), all_namespaces=True) == ["list", "--output", "json", "--all-namespaces"]
    assert list_argv(4, KubeFlags("ml")) == ["list", "--output", "json", "--namespace", "ml"]


def test_status_and_get_values_ask_for_json():
    assert status_argv("demo", KubeFlags("ml")) == ["status", "demo", "--output", "json", "--namespace", "ml"]
    assert get_values_argv("demo", KubeFlags()) == ["get", "values", "demo", "--all", "--output", "json"]


def test_offline_render_is_template_on_helm3_and_client_dry_run_on_helm4():
    assert render_argv(3, "demo", "/c", "/c/v.yaml", "det") == ["template", "demo", "/c", "--values", "/c/v.yaml",
                                                                 "--namespace", "det"]
    assert render_argv(4, "demo", "/c", "/c/v.yaml", "det") == ["install", "demo", "/c", "--values", "/c/v.yaml",
                                                                 "--namespace", "det", "--dry-run=client",
                                                                 "--output", "json"]


def test_no_argv_ever_carries_a_set_flag():
    for argv in (install_argv(3, SPEC), install_argv(4, SPEC), upgrade_argv(3, SPEC), upgrade_argv(4, SPEC)):
        assert not any(a.startswith("--set") for a in argv)


def test_helm4_render_output_is_hooks_then_manifest():
    release = {"manifest": "---\n# Source: a.yaml\nkind: Service\n", "hooks": [{"manifest": "kind: Job\n"}],
               "config": {"db": {"password": "never-printed"}}}
    text = manifests_from_render(4, json.dumps(release))
    assert text == "kind: Job\n---\n# Source: a.yaml\nkind: Service\n"
    assert manifests_from_render(3, "kind: X\n") == "kind: X\n"


@pytest.mark.parametrize("text,major", [("v3.17.3+ge4da497", 3), ("v4.1.4+g05fa379\n", 4), ("3.2.1", 3)])
def test_parse_major(text, major):
    assert parse_major(text) == major


def test_unparseable_version_is_a_clear_error():
    with pytest.raises(ToolFailed, match="cannot tell helm's version"):
        parse_major("Client: &version.Version{SemVer:...")


def test_a_binary_that_is_not_helm_is_named():
    from det_k8s.errors import ToolFailed
    from det_k8s.tools.helm import Helm

    with pytest.raises(ToolFailed) as info:
        _ = Helm("/bin/true", "").major
    assert str(info.value).startswith("/bin/true: cannot tell helm's version from ''; is it helm?")
