"""What the cluster commands share: tool options, consent, the private build directory, problem reports."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import ConsentRequired, DetK8sError, InputError, Problem, Severity, ToolFailed
from ..names import check_namespace
from . import output
from .options import current

if TYPE_CHECKING:  # imported where used: every command imports this module before parsing its arguments
    from ..chart.assemble import ChartResult
    from ..kube.config import Target
    from ..settings import LoadedSettings, Settings
    from ..tools.helm import Helm, KubeFlags
    from ..tools.kubectl import Kubectl


class PreflightFailed(DetK8sError):
    """Live checks found errors (each already printed); exit 1 before helm runs."""


HelmBinaryOpt = Annotated[str | None, typer.Option(
    "--helm-binary", metavar="PATH", help="The helm binary to run (default: DET_K8S_HELM, then helm on PATH).")]
KubectlBinaryOpt = Annotated[str | None, typer.Option(
    "--kubectl-binary", metavar="PATH", help="The kubectl binary to run (default: DET_K8S_KUBECTL, then PATH).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed when not on a terminal).")]
AllNamespacesOpt = Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")]


def log(text: str) -> None:
    """Commands run and their stderr, shown with -v; how long each took (lines starting `timing: `) with -vv."""
    from ..tools.process import TIMING

    if current().verbose >= (2 if text.startswith(TIMING) else 1):
        output.message(text)


def cluster() -> Target:
    """The cluster the options name, chosen as kubectl and helm choose it, read before helm or kubectl runs: no
    kubeconfig or no such context is then the same one line as for every other command, not the tool's own."""
    from ..kube.config import resolve

    options = current()
    return resolve(options.kubeconfig, options.kube_context, options.namespace)[0]


def helm(binary: str | None, target: Target | None = None) -> Helm:
    """helm, naming `target`'s context when one of its calls fails."""
    from ..tools.helm import find_helm

    tool = find_helm(binary, log)
    return replace(tool, context=target.context) if target is not None else tool


def kubectl(binary: str | None, target: Target | None = None) -> Kubectl:
    from ..tools.kubectl import find_kubectl

    tool = find_kubectl(binary, log)
    return replace(tool, context=target.context) if target is not None else tool


def kube_flags(namespace: str | None) -> KubeFlags:
    """helm's and kubectl's cluster flags. Without a namespace, helm reads HELM_NAMESPACE itself: checked here."""
    from ..tools.helm import KubeFlags

    options = current()
    if namespace is not None:
        check_namespace(namespace)
    elif os.environ.get("HELM_NAMESPACE"):
        check_namespace(os.environ["HELM_NAMESPACE"], "HELM_NAMESPACE")
    return KubeFlags(namespace, options.kube_context, options.kubeconfig)


def offline_namespace() -> str:
    """The namespace without contacting a cluster: -n, HELM_NAMESPACE, the kubeconfig's context, default."""
    options = current()
    if options.namespace:
        return check_namespace(options.namespace)
    from ..errors import DetK8sError, UsageError
    from ..kube.config import resolve

    try:
        return resolve(options.kubeconfig, options.kube_context, None)[0].namespace
    except UsageError as exc:
        if "namespace" in exc.message:
            raise  # an invalid namespace is not a missing kubeconfig
        return check_namespace(os.environ.get("HELM_NAMESPACE") or "default", "HELM_NAMESPACE")
    except DetK8sError:
        return check_namespace(os.environ.get("HELM_NAMESPACE") or "default", "HELM_NAMESPACE")


def interactive() -> bool:
    try:
        return bool(sys.stdin.isatty()) and bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def confirm(question: str, *, yes: bool, action: str) -> None:
    """Go on with --yes or a "y" on a terminal; refuse (exit 2) when nobody can be asked."""
    if yes:
        return
    if not interactive():
        raise ConsentRequired(f"{action}: not confirmed, nothing was changed",
                              hint="run it on a terminal to be asked, or pass --yes")
    if not typer.confirm(question, default=False, err=True):
        raise typer.Abort()


def report_problems(problems: Sequence[Problem]) -> None:
    """Print every problem on stderr; errors stop the command (exit 1) before anything runs."""
    for item in problems:
        output.problem(item, stream=sys.stderr)
    errors = [p for p in problems if p.is_error]
    if errors:
        raise PreflightFailed(f"the cluster is not ready for this: {len(errors)} error{'s' * (len(errors) != 1)}; "
                              "nothing was changed")


def report_warnings(loaded: LoadedSettings) -> None:
    for item in loaded.warnings:
        output.problem(item, stream=sys.stderr)


@contextlib.contextmanager
def private_chart(loaded: LoadedSettings, settings: Settings, chart: Path | None) -> Iterator[ChartResult]:
    """The chart rendered into a fresh 0700 directory (values.yaml 0600), removed afterwards whatever happens."""
    from .. import stopping
    from ..chart.assemble import write_chart

    build = stopping.private_dir("det-k8s-")  # mkdtemp makes it 0700; `main` removes it last whatever stops us
    try:
        yield write_chart(build / "chart", loaded.values, settings.app_version, chart)
    finally:
        stopping.remove_private(build)


# What the check render of an upgrade gives a chart that asks for an initial password on a fresh install (the
# official charts from 0.31, through a lookup that finds nothing offline); never installed.
UPGRADE_CHECK_PASSWORD = "Upgrade-Check-0"


def upgrade_check_values(loaded: LoadedSettings, settings: Settings, upgrading: bool) -> list[str]:
    """helm flags giving an offline render of an upgrade into a user's chart the placeholder initial password its
    fresh-install check asks for (nothing when the settings have one, or for an install)."""
    from ..settings.rules import missing_initial_password

    if upgrading and missing_initial_password(loaded.values, settings.app_version):
        return ["--set-string", f"initialUserPassword={UPGRADE_CHECK_PASSWORD}"]
    return []


def check_user_chart(tool: Helm, built: ChartResult, chart: Path, loaded: LoadedSettings, settings: Settings, *,
                     severity: Severity, upgrading: bool = False) -> list[Problem]:
    """`helm template` a chart rendered into the user's `chart`, and report the settings its master configuration
    drops. A chart helm cannot template is an InputError (exit 1): nothing gets installed from it. For an upgrade
    without an initial password, the check render gets a placeholder one: the chart's fresh-install check (a lookup
    of the database Service) cannot see the installed release offline, and the upgrade needs none."""
    from ..chart.dropped import deployed_schedulers, master_config, unparsed, unreached
    from ..release.manifests import secret_values
    from ..tools.helm import manifests_from_render, render_argv

    release = "det-k8s-check"
    argv = render_argv(tool.major, release, str(built.directory), str(built.values_file), "default")
    argv += upgrade_check_values(loaded, settings, upgrading)
    try:
        rendered = tool.run(argv, secrets=secret_values(settings))
    except ToolFailed as exc:
        lines = [line.strip() for line in (exc.stderr or exc.message).strip().splitlines() if line.strip()]
        first = next((i for i, line in enumerate(lines) if line.startswith("Error:")), 0)
        detail = " ".join(lines[first:first + 3]).removeprefix("Error: ") or exc.message
        raise InputError(f"--chart {chart}: helm cannot template it with these settings: {detail}",
                         hint="fix the settings or the chart; nothing was installed") from exc
    manifests = manifests_from_render(tool.major, rendered.stdout)
    config = master_config(manifests, release)
    schedulers = [] if settings.values.get("gangScheduler") == "plugin" else deployed_schedulers(manifests)
    ours = [Problem(Severity.WARNING, "defaultScheduler", f"--chart {chart} deploys a kube-scheduler of its own for "
                    f"defaultScheduler {settings.default_scheduler} ({', '.join(schedulers)}), whatever gangScheduler "
                    "says: it binds the master's pods, so `det-k8s scheduler run` must not run as well (both would "
                    "bind the same pods), and on Kubernetes 1.25 and later it does not start",
                    "install det-k8s's bundled chart (gangScheduler: det-k8s deploys nothing), or leave "
                    "defaultScheduler empty", loaded.sources.find(("defaultScheduler",)))] if schedulers else []
    if config is None:
        return ours + [Problem(Severity.WARNING, "", f"--chart {chart}: renders no determined-master-config-<release> "
                               "with a master.yaml; cannot tell which settings reach the master")]
    return ours + unparsed(config, settings.version, f"--chart {chart}") + unreached(
        loaded.user_values, config, f"--chart {chart}", loaded.sources, severity=severity)
