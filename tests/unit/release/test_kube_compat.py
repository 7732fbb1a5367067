"""Kubernetes version warnings: only what is known to break for the supported Determined versions."""

from __future__ import annotations

import pytest

from det_k8s.errors import Severity
from det_k8s.release.kube_compat import check_kubernetes, kube_minor


def version(minor: str, git: str | None = None) -> dict[str, str]:
    return {"major": "1", "minor": minor, "gitVersion": git or f"v1.{minor.rstrip('+')}.2"}


@pytest.mark.parametrize("minor", ["21", "25", "31", "31+", "35"])
def test_a_newer_cluster_than_the_documents_is_no_warning_by_itself(minor):
    for app in ("0.17.15", "0.26.2", "0.38.1"):
        assert check_kubernetes(version(minor), default_scheduler="", app_version=app) == []


def test_managed_clusters_minor_versions_with_a_plus_are_read():
    assert kube_minor(version("31+", "v1.31.4-eks-1234")) == (1, 31)
    assert kube_minor({"gitVersion": "v1.29.0"}) == (1, 29)
    assert kube_minor({"major": "", "minor": ""}) is None


@pytest.mark.parametrize("scheduler", ["coscheduler", "preemption"])
def test_the_118_scheduler_plugin_is_named_on_125_and_later(scheduler):
    (problem,) = check_kubernetes(version("25"), default_scheduler=scheduler, app_version="0.26.2", plugin=True)
    assert problem.severity is Severity.WARNING and problem.path == "gangScheduler"
    assert f"plugin (defaultScheduler {scheduler}) runs a kube-scheduler 1.18.9, which cannot work on Kubernetes " \
           "v1.25.2" in problem.message
    assert "policy/v1beta1" in problem.message
    assert "use gangScheduler: det-k8s" in (problem.hint or "")
    (chart,) = check_kubernetes(version("25"), default_scheduler=scheduler, app_version="0.26.2", user_chart=True)
    assert chart.path == "defaultScheduler" and chart.message.startswith(f"{scheduler} with --chart runs a kube-")


@pytest.mark.parametrize("minor", ["22", "25", "31"])
def test_det_k8s_as_the_gang_scheduler_deploys_nothing_so_nothing_breaks(minor):
    # The documented set-up (docs/determined-master.md: defaultScheduler: coscheduler, gangScheduler: det-k8s,
    # `det-k8s scheduler run`) was warned about as if the bundled chart ran the 1.18 plugin, with "leave
    # defaultScheduler empty".
    for scheduler in ("coscheduler", "preemption"):
        assert check_kubernetes(version(minor), default_scheduler=scheduler, app_version="0.26.2") == []


def test_the_118_scheduler_plugin_between_120_and_124_is_outside_the_skew_policy():
    (problem,) = check_kubernetes(version("22"), default_scheduler="coscheduler", app_version="0.17.15", plugin=True)
    assert "version-skew policy" in problem.message
    assert check_kubernetes(version("19"), default_scheduler="coscheduler", app_version="0.17.15", plugin=True) == []


def test_jobs_ttl_on_clusters_before_121_only_for_determined_with_jobs():
    (problem,) = check_kubernetes(version("20"), default_scheduler="", app_version="0.34.0")
    assert problem.path == "appVersion" and "ttlSecondsAfterFinished" in problem.message
    assert check_kubernetes(version("20"), default_scheduler="", app_version="0.33.0") == []
    assert check_kubernetes(version("21"), default_scheduler="", app_version="0.38.1") == []


def test_older_than_any_tested_and_an_unreadable_version_are_warnings():
    (old,) = check_kubernetes(version("18"), default_scheduler="", app_version="0.17.15")
    assert "older than any the Determined documents test (1.19-1.21)" in old.message
    (unknown,) = check_kubernetes({"major": "x"}, default_scheduler="", app_version="0.17.15")
    assert "cannot tell" in unknown.message
