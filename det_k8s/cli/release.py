"""`det-k8s install`, `upgrade`, `uninstall` and `list`: helm, wrapped in the documents' precautions.

Each command validates everything it can before running helm, says what it is about to do, and
asks before anything destructive. The decisions live in `det_k8s/release/`; this module fetches,
prints and runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import NotFound
from ..kube.api import KubeApi
from ..kube.kinds import CONFIGMAPS, NODES, PODS, PVCS, SERVICES
from ..release import live
from ..release.address import master_address
from ..release.manifests import redact_secrets, secret_values
from ..release.names import db_pvc, master_service, validate_release_name
from ..release.preflight import determined_releases
from ..release.tasks import MASTER_TASKS, group_tasks
from ..tools.duration import parse_duration
from ..tools.helm import (
    Helm,
    ReleaseSpec,
    install_argv,
    list_argv,
    manifests_from_render,
    render_argv,
    uninstall_argv,
    upgrade_argv,
)
from ..tools.process import display
from . import output
from .chart_cmds import report_warnings
from .common import (
    AllNamespacesOpt,
    HelmBinaryOpt,
    YesOpt,
    confirm,
    helm,
    kube_flags,
    offline_namespace,
    private_chart,
    report_problems,
)
from .inputs import SetOpt, SetStringOpt, ValuesOpt, load_settings_from_cli
from .options import OutputFormat, OutputOpt, current, with_global_options

ReleaseArg = Annotated[str, typer.Argument(metavar="RELEASE", help="The helm release name, e.g. determined.",
                                           show_default=False)]
ChartOpt = Annotated[Path | None, typer.Option(
    "--chart", metavar="PATH", help="Install your copy of the Determined chart (directory or .tgz) instead of the "
    "bundled one; it is copied and rendered, never modified.")]
TimeoutOpt = Annotated[str, typer.Option("--timeout", metavar="DURATION",
                                         help="How long helm waits (Go duration: 90s, 10m, 1h).")]
DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Print the helm command and the manifests (Secret values redacted); contact no cluster.")]
RollbackOpt = Annotated[bool, typer.Option(
    "--rollback-on-failure", help="Undo a failed change (helm 4 --rollback-on-failure, helm 3 --atomic).")]
SkipStorageOpt = Annotated[bool, typer.Option("--skip-storage-check", help="Do not probe the checkpoint storage.")]


def _dry_run(tool: Helm, release: str, spec_argv: list[str], built_chart: str, values_file: str,
             namespace: str, secrets: tuple[str, ...]) -> None:
    output.message(f"would run: {display([tool.path, *spec_argv])}")
    output.message(f"  ({values_file} is a private copy, removed when det-k8s exits; nothing was sent to a cluster)")
    rendered = tool.run(render_argv(tool.major, release, built_chart, values_file, namespace), secrets=secrets)
    output.text(redact_secrets(manifests_from_render(tool.major, rendered.stdout)))


def _show_address(api: KubeApi, release: str, namespace: str, tls: bool) -> None:
    service = api.get(SERVICES, master_service(release), namespace) if api.exists(
        SERVICES, master_service(release), namespace) else None
    nodes = api.list(NODES) if service and (service.get("spec") or {}).get("type") == "NodePort" else []
    address = master_address(service, nodes, tls=tls, release=release, namespace=namespace)
    output.message(f"Master: {address.url}" if address.url else f"Master: {address.note}")
    if address.url and address.note != "load balancer":
        output.message(f"  ({address.note})")
    output.message(f"Next: det-k8s status {release} -n {namespace}   (master readiness, logs, diagnosis)")


def _announce_restarts(api: KubeApi, release: str, yes: bool) -> None:
    """An upgrade restarts the master: name the running experiments, then ask (or refuse without a terminal)."""
    groups = group_tasks(live.running_tasks(api, api.namespace))
    if groups:
        output.warning(f"{len(groups)} task(s) are running in {api.namespace}; the master restarts during the "
                       "upgrade and they resume from their latest checkpoint (work since then is redone). "
                       "Consider pausing experiments first:")
        for group in groups:
            output.message(f"  {group.description} (allocation {group.allocation}): {', '.join(group.pods)}")
    else:
        output.message(f"no task pods are running in {api.namespace}")
    confirm(f"Upgrade release {release} in namespace {api.namespace}? The master restarts.", yes=yes,
            action=f"upgrade {release}")


def _lifecycle(command: str, release: str, values: ValuesOpt, set_: SetOpt, set_string: SetStringOpt,
               chart: Path | None, timeout: str, dry_run: bool, helm_bin: str | None, *, wait: bool,
               create_namespace: bool, rollback: bool, skip_storage_check: bool, yes: bool = False) -> None:
    validate_release_name(release)
    seconds = parse_duration(timeout)
    loaded = load_settings_from_cli(values, set_, set_string)
    settings = loaded.settings()  # every error listed, exit 1, nothing run
    report_warnings(loaded)
    build = install_argv if command == "install" else upgrade_argv
    tool = helm(helm_bin)
    with private_chart(loaded, settings, chart) as built:  # rendered first: a broken --chart fails before the cluster
        if dry_run:
            namespace = offline_namespace()
            spec = ReleaseSpec(release, str(built.directory), str(built.values_file), kube_flags(namespace), wait,
                               timeout, create_namespace, rollback)
            _dry_run(tool, release, build(tool.major, spec), str(built.directory), str(built.values_file), namespace,
                     secret_values(settings))
            return
        api = current().connect()
        kube = kube_flags(api.namespace)
        with output.spinner(f"checking cluster {api.target.context}"):
            problems = live.run_preflight(api, tool, loaded, settings, release, kube,
                                          create_namespace=create_namespace, upgrading=command == "upgrade",
                                          skip_storage_check=skip_storage_check)
        report_problems(problems)
        if command == "upgrade":
            _announce_restarts(api, release, yes)
        spec = ReleaseSpec(release, str(built.directory), str(built.values_file), kube, wait, timeout,
                           create_namespace, rollback)
        with output.spinner(f"helm {command} {release} (up to {timeout})" if wait else f"helm {command} {release}"):
            tool.run(build(tool.major, spec), timeout=seconds + 60, secrets=secret_values(settings),
                     timeout_hint=f"raise --timeout (now {timeout}); `det-k8s status {release}` says what is slow")
    output.success(f"{'Installed' if command == 'install' else 'Upgraded'} release {release} in namespace "
                   f"{api.namespace} (Determined {settings.app_version})")
    _show_address(api, release, api.namespace, bool(settings.tls_secret))


@with_global_options
def install(
    release: ReleaseArg,
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    chart: ChartOpt = None,
    create_namespace: Annotated[bool, typer.Option("--create-namespace", help="Create the namespace if missing.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the master and database are ready.")] = False,
    timeout: TimeoutOpt = "10m",
    dry_run: DryRunOpt = False,
    rollback_on_failure: RollbackOpt = False,
    skip_storage_check: SkipStorageOpt = False,
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """Validate the settings and the cluster, then helm install Determined and print the master's address."""
    _lifecycle("install", release, values, set_, set_string, chart, timeout, dry_run, helm_binary, wait=wait,
               create_namespace=create_namespace, rollback=rollback_on_failure, skip_storage_check=skip_storage_check)


@with_global_options
def upgrade(
    release: ReleaseArg,
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    chart: ChartOpt = None,
    timeout: TimeoutOpt = "10m",
    dry_run: DryRunOpt = False,
    rollback_on_failure: RollbackOpt = False,
    skip_storage_check: SkipStorageOpt = False,
    yes: YesOpt = False,
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """Validate, warn which experiments restart from their latest checkpoint, ask, then helm upgrade --wait."""
    _lifecycle("upgrade", release, values, set_, set_string, chart, timeout, dry_run, helm_binary, wait=True,
               create_namespace=False, rollback=rollback_on_failure, skip_storage_check=skip_storage_check, yes=yes)


@with_global_options
def uninstall(
    release: ReleaseArg,
    yes: YesOpt = False,
    keep_pods: Annotated[bool, typer.Option("--keep-pods", help="Leave the task pods and their ConfigMaps.")] = False,
    delete_data: Annotated[bool, typer.Option(
        "--delete-data", help="Also delete the kept database volume: every experiment record, permanently.")] = False,
    timeout: TimeoutOpt = "5m",
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """Say exactly what will be lost, ask, then helm uninstall and delete the leftover task pods."""
    validate_release_name(release)
    seconds = parse_duration(timeout)
    api = current().connect()
    namespace = api.namespace
    if not live.release_exists(api, release, namespace):
        raise NotFound(f"no release {release} in namespace {namespace}", hint="det-k8s list -A shows the releases")
    summary, pvc = live.uninstall_summary(api, release, namespace, delete_data=delete_data, keep_pods=keep_pods)
    output.message(f"Uninstalling release {release} from namespace {namespace} deletes:")
    for line in summary.deleted:
        output.message(f"  - {line}")
    if summary.kept:
        output.message("and keeps:")
        for line in summary.kept:
            output.message(f"  - {line}")
    if summary.permanent_loss:
        output.warning("this permanently deletes every experiment record of this Determined installation")
    confirm(f"Uninstall {release}{' and DELETE ALL EXPERIMENT RECORDS' if summary.permanent_loss else ''}?",
            yes=yes, action=f"uninstall {release}")
    tool = helm(helm_binary)
    with output.spinner(f"helm uninstall {release}"):
        tool.run(uninstall_argv(tool.major, release, kube_flags(namespace), timeout), timeout=seconds + 60,
                 timeout_hint=f"raise --timeout (now {timeout})")
    output.success(f"Uninstalled release {release} from namespace {namespace}")
    if not keep_pods:
        pods = sum(api.delete(PODS, (p.get("metadata") or {}).get("name", ""), namespace, missing_ok=True)
                   for p in api.list(PODS, namespace, label_selector=MASTER_TASKS))
        maps = sum(api.delete(CONFIGMAPS, (c.get("metadata") or {}).get("name", ""), namespace, missing_ok=True)
                   for c in api.list(CONFIGMAPS, namespace, label_selector=MASTER_TASKS))
        output.message(f"Deleted {pods} leftover task pod(s) and {maps} task ConfigMap(s)")
    if delete_data and pvc is not None:
        api.delete(PVCS, db_pvc(release), namespace, missing_ok=True)
        output.message(f"Deleted the database volume {db_pvc(release)}")
    elif summary.pvc_kept:
        output.message(f"Kept the database volume {db_pvc(release)}; delete it with: kubectl delete pvc "
                       f"{db_pvc(release)} -n {namespace}")


@with_global_options
def list_releases(
    all_namespaces: AllNamespacesOpt = False,
    output_format: OutputOpt = OutputFormat.table,
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """The Determined releases (helm list, filtered to the Determined chart)."""
    tool = helm(helm_binary)
    options = current()
    refs = determined_releases(tool.json(list_argv(tool.major, kube_flags(options.namespace), all_namespaces)))
    if output_format is not OutputFormat.table:
        output.data([{"name": r.name, "namespace": r.namespace, "revision": r.revision, "status": r.status,
                      "chart": r.chart, "app_version": r.app_version} for r in refs], output_format)
    elif refs:
        output.table(["NAME", "NAMESPACE", "REVISION", "STATUS", "CHART", "APP VERSION"],
                     [[r.name, r.namespace, r.revision, r.status, r.chart, r.app_version] for r in refs])
    else:
        where = "any namespace" if all_namespaces else "this namespace (-A for all)"
        output.message(f"no Determined release in {where}")
    if len(refs) > 1:
        output.warning(f"{len(refs)} Determined releases; the documents recommend one per cluster")
