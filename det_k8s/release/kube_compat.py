"""Which Kubernetes versions break which Determined setups: warnings about what is known to fail.

The Determined documents were tested on Kubernetes 1.19-1.21, but newer clusters are not a
problem in themselves: the chart and the master use GA APIs only (`apps/v1`, `batch/v1`,
`rbac.authorization.k8s.io/v1`, `scheduling.k8s.io/v1`, core `v1`; read from the official charts
at 0.17.15, 0.26.2 and v0.38.1). So det-k8s warns only about combinations known to break
(../shared/research/determined-versions.md, sections 6 and 7):

- `defaultScheduler: coscheduler` or `preemption` with `gangScheduler: plugin` (or with a chart of the
  user's own, as the official charts do for any gang scheduler) runs a second kube-scheduler built on
  Kubernetes 1.18.9 (scheduler-plugins v0.18.9, determinedai/kube-scheduler 0.16/0.17). Such a scheduler
  lists `policy/v1beta1` PodDisruptionBudgets and records `events.k8s.io/v1beta1` Events, which Kubernetes
  1.25 stopped serving (the deprecated-API migration guide), and a kube-scheduler whose informers cannot
  list does not start scheduling: on 1.25+ Determined's pods stay Pending. From 1.20 it is also outside
  Kubernetes' version-skew policy (a kube-scheduler at most one minor version older than its API server).
  With det-k8s's bundled chart and `gangScheduler: det-k8s` (the default) nothing is deployed: `det-k8s
  scheduler run` binds the pods, so no warning.
- Determined 0.34+ runs tasks as `batch/v1` Jobs with `ttlSecondsAfterFinished: 900`. The TTL
  controller is beta (on by default) from Kubernetes 1.21 and GA in 1.23; before 1.21 it is off,
  so finished Jobs and their pods are never cleaned up.

The master's own fallback covers the other known difference: it finds a Job's pods by
`batch.kubernetes.io/job-name` (Kubernetes 1.27+) or else `job-name`, so no warning is needed.
Pure: the caller fetched the version.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..determined.versions import has, parse_version
from ..errors import Problem, Severity

OLDEST_TESTED = (1, 19)  # the oldest Kubernetes the Determined documents were tested on
V1BETA1_REMOVED = (1, 25)  # policy/v1beta1 PodDisruptionBudget and events.k8s.io/v1beta1 no longer served
SKEW_LIMIT = (1, 19)  # a 1.18 kube-scheduler may talk to a 1.18 or 1.19 API server
TTL_ON_BY_DEFAULT = (1, 21)  # TTLAfterFinished beta (GA in 1.23)
OLD_SCHEDULER = "1.18.9"


def kube_minor(version: Mapping[str, Any]) -> tuple[int, int] | None:
    """(1, 31) from the API server's /version answer (`minor` may read `31+` on managed clusters)."""
    try:
        return int(str(version.get("major"))), int(re.sub(r"\D.*$", "", str(version.get("minor"))))
    except ValueError:
        text = str(version.get("gitVersion") or "")
        match = re.match(r"^v?(\d+)\.(\d+)", text)
        return (int(match[1]), int(match[2])) if match else None


def version_text(version: Mapping[str, Any]) -> str:
    return str(version.get("gitVersion") or f"v{version.get('major', '?')}.{version.get('minor', '?')}")


def check_kubernetes(version: Mapping[str, Any], *, default_scheduler: str, app_version: str,
                     plugin: bool = False, user_chart: bool = False) -> list[Problem]:
    """Warnings for what is known to break with this cluster's Kubernetes version and these settings. `plugin`:
    gangScheduler is plugin; `user_chart`: a chart of the user's own is installed (the official charts deploy the
    plugin for any defaultScheduler); without either, the bundled chart deploys no scheduler."""
    found = kube_minor(version)
    if found is None:
        return [Problem(Severity.WARNING, "", "cannot tell the cluster's Kubernetes version from its /version answer",
                        "det-k8s checks the known incompatibilities only when it knows the version")]
    shown = version_text(version)
    problems = []
    if found < OLDEST_TESTED:
        problems.append(Problem(Severity.WARNING, "", f"Kubernetes {shown} is older than any the Determined documents "
                                f"test (1.{OLDEST_TESTED[1]}-1.21)", "upgrade the cluster if the master fails to start"))
    if default_scheduler in ("coscheduler", "preemption") and (plugin or user_chart):
        path, who, instead = (
            ("defaultScheduler", f"{default_scheduler} with --chart", "leave defaultScheduler empty, or install "
             "det-k8s's bundled chart, whose gangScheduler: det-k8s needs nothing installed in the cluster")
            if user_chart else
            ("gangScheduler", f"plugin (defaultScheduler {default_scheduler})", "use gangScheduler: det-k8s (the "
             "default): `det-k8s scheduler run` binds the pods and needs nothing installed in the cluster"))
        if found >= V1BETA1_REMOVED:
            problems.append(Problem(
                Severity.WARNING, path,
                f"{who} runs a kube-scheduler {OLD_SCHEDULER}, which cannot work on Kubernetes {shown}: it "
                "lists policy/v1beta1 PodDisruptionBudgets, which Kubernetes 1.25 stopped serving, so Determined's "
                "pods would stay Pending", instead))
        elif found > SKEW_LIMIT:
            problems.append(Problem(
                Severity.WARNING, path,
                f"{who} runs a kube-scheduler {OLD_SCHEDULER}, outside Kubernetes' version-skew policy "
                f"against a {shown} API server (at most one minor version older)",
                f"watch its pod in kube-system, or {instead}"))
    determined = parse_version(app_version)
    if determined is not None and has("tasks.jobs", determined) and found < TTL_ON_BY_DEFAULT:
        problems.append(Problem(
            Severity.WARNING, "appVersion",
            f"Determined {determined} runs tasks as Jobs that delete themselves 15 minutes after they finish "
            f"(ttlSecondsAfterFinished), which Kubernetes {shown} ignores unless the TTLAfterFinished feature gate is "
            "on: finished Jobs and their pods stay", "delete them yourself, or upgrade the cluster to 1.21 or later"))
    return problems
