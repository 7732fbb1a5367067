"""`det-k8s render` and `det-k8s validate`: settings in, a chart or a list of problems out."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from ...kube.api import KubeApi
    from ...settings import LoadedSettings

from ...errors import Problem, SettingsError, Severity
from .. import output
from ..common import HelmBinaryOpt, check_user_chart, helm, report_warnings
from ..inputs import SetOpt, SetStringOpt, ValuesOpt, load_settings_from_cli, load_snapshot, stdin_once
from ..options import (
    OFFLINE,
    KubeVersionOpt,
    OutputOpt,
    cluster_pod_spec_version,
    current,
    pod_spec_version,
    timed,
    with_options,
)
from ..output import OutputFormat

FORMAT_WORDS = ("table", "json", "yaml", "wide", "name", "jsonpath", "go-template", "custom-columns", "template")


def output_directory(out_dir: Path | None, old_out: str | None) -> Path:
    """--output-dir, or -o/--output DIR with a note; -o json (an output format, as everywhere else) is refused
    rather than written as a directory named json."""
    from ...errors import UsageError

    if out_dir is not None and old_out is not None:
        raise UsageError("--output-dir and -o/--output both name the chart directory", hint="give --output-dir alone")
    if out_dir is not None:
        return out_dir
    if old_out is None:
        raise UsageError("render needs the directory to write the chart into",
                         hint="add --output-dir DIR (e.g. --output-dir out/chart)")
    if old_out.split("=", 1)[0].lower() in FORMAT_WORDS:
        raise UsageError(f"-o {old_out}: render writes a chart directory, it has no output format",
                         hint=f"name the directory with --output-dir DIR (a directory named {old_out}: "
                         f"--output-dir ./{old_out})")
    output.message(f"note: -o {old_out} is --output-dir {old_out} (helm's spelling; -o is the output format "
                   "elsewhere)")
    return Path(old_out)


@with_options(*OFFLINE)
def render(
    out_dir: Annotated[Path | None, typer.Option(
        "--output-dir", metavar="DIR", show_default=False,
        help="Directory to write the chart into (helm's spelling); a det-k8s render there is replaced, files "
        "det-k8s did not write are never deleted.")] = None,
    old_out: Annotated[str | None, typer.Option(
        "--output", "-o", metavar="DIR", show_default=False,
        help="The same as --output-dir (kept for old scripts; elsewhere -o is the output format).")] = None,
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    chart: Annotated[Path | None, typer.Option(
        "--chart", metavar="PATH", help="Render into a copy of this chart (directory or .tgz) instead of the bundled one. "
        "Your copy is never modified; helm templates the result and every setting its master configuration drops "
        "is reported.")] = None,
    helm_binary: HelmBinaryOpt = None,
    kube_version: KubeVersionOpt = None,
) -> None:
    """Render values.yaml and Chart.yaml and write a complete chart directory helm can install."""
    from ...chart.assemble import write_chart
    from ...settings.podspec import checking_against

    out_dir = output_directory(out_dir, old_out)

    with checking_against(pod_spec_version(kube_version)), timed("reading and checking the settings"):
        loaded = load_settings_from_cli(values, set_, set_string, chart=chart)
        settings = loaded.settings()  # raises SettingsError listing every error
    report_warnings(loaded)
    with timed(f"writing the chart to {out_dir}"):
        result = write_chart(out_dir, loaded.values, settings.app_version, chart)
    if chart is not None:  # a chart det-k8s did not write: does helm template it, do the settings reach the master?
        with output.spinner(f"helm template {result.directory}"):
            dropped = check_user_chart(helm(helm_binary), result, chart, loaded, settings, severity=Severity.WARNING)
        for item in dropped:
            output.problem(item, stream=sys.stderr)
    output.success(f"Wrote chart to {result.directory}")
    output.message(f"  {result.values_file} (mode 0600: holds secrets)")
    output.message(f"  {result.chart_file} (appVersion {settings.app_version})")
    output.message(f"Next: helm lint {result.directory}   or   det-k8s install RELEASE -f ...")


@with_options("kube_context", "kubeconfig", "namespace", *OFFLINE,  # a context: check the live cluster's nodes
              namespace_help="With --kube-context or --kubeconfig: the namespace the task pods' dry run goes to "
              "(default: the context's, as helm chooses it).")
def validate(
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    nodes: Annotated[Path | None, typer.Option(
        "--nodes", metavar="FILE", help="Check against these nodes: a Kubernetes List as `kubectl get nodes,pods -A -o "
        "json` prints it (pods: what determined-system and DaemonSet pods take). With --kube-context or --kubeconfig "
        "instead, the live cluster's nodes and pods are read.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    upgrade: Annotated[bool, typer.Option(
        "--upgrade", help="The release is already installed: check the settings for `det-k8s upgrade`. Without it "
        "they are checked for a fresh install, which also needs initialUserPassword (Determined 0.31 and later).")
    ] = False,
    kube_version: KubeVersionOpt = None,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Report every problem in the settings at once: errors exit 1, warnings alone exit 0."""
    from ...settings.node_rules import check_nodes, without_pods
    from ...settings.podspec import checking_against, recheck_settings
    from ...settings.rules import missing_initial_password

    checked = pod_spec_version(kube_version)
    with checking_against(checked):
        stdin_once(values, nodes)
        loaded = load_settings_from_cli(values, set_, set_string)
    problems = list(loaded.problems)
    missing = None if upgrade else missing_initial_password(loaded.values, loaded.app_version)
    if missing is not None:  # what `install` refuses (release.py): the next step is a fresh install
        problems.append(replace(missing, hint=f"{missing.hint}; or --upgrade if the release is already installed",
                                location=loaded.sources.find(("initialUserPassword",))))
    options = current()
    # --kubeconfig names a cluster as --kube-context does (its current context): both check the live cluster
    live = nodes is None and (options.kube_context is not None or options.kubeconfig is not None)
    if (nodes is not None or live) and not loaded.errors:
        if nodes is not None:
            snapshot = load_snapshot(nodes)
            node_list, pod_list, origin = snapshot.nodes, snapshot.pods, str(nodes)
            view = snapshot.devices
        else:
            from ...errors import Forbidden
            from ...kube.snapshot import read_nodes, read_snapshot

            api = options.connect()
            with output.spinner(f"reading nodes and pods of {api.target.context}"):
                cluster = cluster_pod_spec_version(api)
                origin = f"cluster {api.target.context}"
                try:
                    read = read_snapshot(api)  # pods too: what determined-system and DaemonSet pods hold
                    node_list, pod_list, view = read.nodes, read.pods, read.devices
                except Forbidden:
                    node_list, pod_list, view = read_nodes(api), (), None
            problems.extend(recheck_settings(loaded.values, loaded.sources, checked, cluster))
            if not any(p.is_error for p in problems):  # ask the API server itself (admission included): a dry run
                from ...release.dryrun import dry_run_pod_specs

                with output.spinner(f"sending task pods from the pod specs to {api.target.context} (dry run)"):
                    problems.extend(dry_run_pod_specs(api, loaded.values, loaded.sources, api.namespace))
                if not any(p.is_error for p in problems):
                    with output.spinner(f"sending the chart's objects to {api.target.context} (dry run)"):
                        problems.extend(_dry_run_chart(api, loaded, upgrade))
        problems.extend(check_nodes(loaded.settings(), node_list, loaded.sources, origin, pod_list, view))
        unread = without_pods(loaded.settings(), loaded.sources, origin) if node_list and not pod_list else None
        if unread is not None:
            problems.append(unread)
    elif nodes is not None or live:
        output.message("node checks skipped: fix the errors first")
    errors = [p for p in problems if p.is_error or strict]
    if output_format is not OutputFormat.table:
        output.data({"valid": not errors, "problems": [
            {"severity": p.severity.value, "key": p.path, "message": p.message, "hint": p.hint,
             "location": str(p.location) if p.location else None} for p in problems]}, output_format)
    else:
        for item in problems:
            output.problem(item)
    if errors:
        raise SettingsError([p if p.is_error else replace(p, severity=Severity.ERROR) for p in errors],
                            reported=True)
    if output_format is OutputFormat.table:
        count = len(problems)
        output.success("settings are valid" + (" for an upgrade" if upgrade else "")
                       + (f" ({count} warning{'s' * (count != 1)})" if count else ""))


VALIDATE_RELEASE = "det-k8s-validate"  # the release name the chart's objects are rendered with by `validate`


def _dry_run_chart(api: KubeApi, loaded: LoadedSettings, upgrading: bool) -> list[Problem]:
    """The bundled chart's objects (release VALIDATE_RELEASE) judged by the API server as a dry run; without helm
    or where helm cannot render them, one warning."""
    from ...errors import DetK8sError
    from ...release.dryrun import dry_run_chart_objects
    from ...release.manifests import secret_values
    from ..common import UPGRADE_CHECK_PASSWORD, private_chart
    from ..release_steps import rendered_manifests

    settings = loaded.settings()
    try:
        tool = helm(None)
        with private_chart(loaded, settings, None) as built:
            manifests = rendered_manifests(tool, VALIDATE_RELEASE, str(built.directory), str(built.values_file),
                                           api.namespace, (*secret_values(settings), UPGRADE_CHECK_PASSWORD),
                                           upgrading=upgrading)
    except DetK8sError as exc:
        return [Problem(Severity.WARNING, "", f"the chart's objects are not checked by the API server: {exc.message}",
                        exc.hint)]
    return dry_run_chart_objects(api, manifests, api.namespace, loaded.sources,
                                 namespace_exists=api.namespace_exists(api.namespace))
