"""What the cluster commands share: tool options, consent, the private build directory, problem reports."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated

import typer

from ..chart.assemble import ChartResult, write_chart
from ..errors import ConsentRequired, DetK8sError, Problem
from ..names import check_namespace
from ..settings import LoadedSettings, Settings
from ..tools.helm import Helm, KubeFlags, find_helm
from ..tools.kubectl import Kubectl, find_kubectl
from . import output
from .options import current


class PreflightFailed(DetK8sError):
    """Live checks found errors (each already printed); exit 1 before helm runs."""


HelmBinaryOpt = Annotated[str | None, typer.Option(
    "--helm-binary", metavar="PATH", help="The helm binary to run (default: DET_K8S_HELM, then helm on PATH).")]
KubectlBinaryOpt = Annotated[str | None, typer.Option(
    "--kubectl-binary", metavar="PATH", help="The kubectl binary to run (default: DET_K8S_KUBECTL, then PATH).")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (needed when not on a terminal).")]
AllNamespacesOpt = Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")]


def log(text: str) -> None:
    """Commands run, shown with -v."""
    if current().verbose:
        output.message(text)


def helm(binary: str | None) -> Helm:
    return find_helm(binary, log)


def kubectl(binary: str | None) -> Kubectl:
    return find_kubectl(binary, log)


def kube_flags(namespace: str | None) -> KubeFlags:
    """helm's and kubectl's cluster flags. Without a namespace, helm reads HELM_NAMESPACE itself: checked here."""
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


@contextlib.contextmanager
def private_chart(loaded: LoadedSettings, settings: Settings, chart: Path | None) -> Iterator[ChartResult]:
    """The chart rendered into a fresh 0700 directory (values.yaml 0600), removed afterwards whatever happens."""
    build = Path(tempfile.mkdtemp(prefix="det-k8s-"))  # mkdtemp makes it 0700
    try:
        yield write_chart(build / "chart", loaded.values, settings.app_version, chart)
    finally:
        shutil.rmtree(build, ignore_errors=True)
