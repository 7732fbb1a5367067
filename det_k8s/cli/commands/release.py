"""`det-k8s install`, `upgrade`, `uninstall` and `list`: helm, wrapped in the documents' precautions.

Each command validates everything it can before running helm, says what it is about to do, and
asks before anything destructive. The decisions live in `det_k8s/release/`; this module fetches,
prints and runs.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ...errors import DetK8sError, NotFound, SettingsError, Severity, UsageError
from ...tools.duration import go_duration, parse_duration
from ...tools.process import display
from .. import output
from ..common import (
    UPGRADE_CHECK_PASSWORD,
    AllNamespacesOpt,
    HelmBinaryOpt,
    YesOpt,
    check_user_chart,
    cluster,
    confirm,
    helm,
    kube_flags,
    offline_namespace,
    private_chart,
    report_problems,
    report_warnings,
    upgrade_check_values,
)
from ..inputs import SetOpt, SetStringOpt, ValuesOpt, load_settings_from_cli
from ..options import KubeVersionOpt, OutputOpt, current, pod_spec_version, with_global_options
from ..output import OutputFormat
from ..release_options import (
    AlwaysWaitsOpt,
    ChartOpt,
    DryRunOpt,
    ReleaseArg,
    ReleaseOutputOpt,
    RollbackOpt,
    SkipStorageOpt,
    TimeoutOpt,
    VersionOpt,
)
from ..release_steps import announce_restarts, rendered_manifests, show_upgrade_diff

if TYPE_CHECKING:
    from ...kube.api import KubeApi
    from ...settings import Settings
    from ...tools.helm import Helm


def _default_passwords(command: str, settings: Settings) -> None:
    """Warn of passwords everybody knows, once det-k8s is about to install them (release/manifests.py)."""
    from ...release.manifests import default_passwords

    for warning in default_passwords(settings.values, settings.app_version, installing=command == "install"):
        output.warning(warning)


def _dry_run(tool: Helm, release: str, spec_argv: list[str], built_chart: str, values_file: str,
             namespace: str, secrets: tuple[str, ...], *, upgrading: bool = False, extra: Sequence[str] = ()) -> None:
    """What would run, and the manifests it would apply, rendered offline (an upgrade as one: helm template
    --is-upgrade, and `extra` values for a user's chart, see upgrade_check_values)."""
    from ...release.manifests import placeholder_values, redact_secrets

    output.message(f"would run: {display([tool.path, *spec_argv])}")
    output.message(f"  ({built_chart} and its {Path(values_file).name} are a private copy, removed when det-k8s exits, "
                   "whatever stops it; nothing was sent to a cluster; to run it yourself, write the same chart with "
                   "`det-k8s render ... --output-dir DIR` and name DIR)")
    # Rendered from values whose secrets are placeholders (release/manifests.py): each secret's place, whatever the
    # chart does with it (0.17.15 puts the database password in a Deployment's env), reads <redacted>, and nothing
    # else is touched (searching for the value text made `image: postgres:10.14` `<redacted>:10.14`).
    import yaml

    from ...safe_read import load_yaml

    masked, marks = placeholder_values(load_yaml(Path(values_file).read_text(encoding="utf-8"), values_file) or {})
    # in the private directory, removed with it; helm reads the chart's own values.yaml under it, every secret of
    # which this one replaces
    stand_in = Path(values_file).parent.parent / "redacted-values.yaml"
    stand_in.write_text(yaml.safe_dump(masked, sort_keys=False), encoding="utf-8")
    text = redact_secrets(rendered_manifests(tool, release, built_chart, str(stand_in), namespace, secrets,
                                             upgrading=upgrading, extra=extra))
    for mark, shown in marks.items():
        text = text.replace(mark, shown)
    output.text(text, own_words=True)  # made without the secrets: a short one it holds is another word by chance


def _show_address(api: KubeApi, release: str, namespace: str, tls: bool) -> str | None:
    from ...kube.kinds import NODES, SERVICES
    from ...release.address import master_address
    from ...release.names import master_service

    service = api.get(SERVICES, master_service(release), namespace) if api.exists(
        SERVICES, master_service(release), namespace) else None
    nodes = api.list(NODES) if service and (service.get("spec") or {}).get("type") == "NodePort" else []
    address = master_address(service, nodes, tls=tls, release=release, namespace=namespace)
    output.message(f"Master: {address.url}" if address.url else f"Master: {address.note}")
    if address.url and address.note != "load balancer":
        output.message(f"  ({address.note})")
    output.message(f"Next: det-k8s status {release} -n {namespace}   (master readiness, logs, diagnosis)")
    return address.url


def _lifecycle(command: str, release: str, values: ValuesOpt, set_: SetOpt, set_string: SetStringOpt,
               chart: Path | None, timeout: str, dry_run: bool, helm_bin: str | None, *, wait: bool,
               create_namespace: bool, rollback: bool, skip_storage_check: bool, yes: bool = False,
               kube_version: str | None = None, show_diff: bool = False,
               output_format: OutputFormat = OutputFormat.table) -> None:
    from ...release import live
    from ...release.manifests import secret_values
    from ...release.names import validate_release_name
    from ...settings.podspec import checking_against
    from ...settings.rules import missing_initial_password
    from ...tools.helm import ReleaseSpec, install_argv, upgrade_argv
    from .. import change

    validate_release_name(release)
    if dry_run and output_format is not OutputFormat.table:
        raise UsageError(f"-o {output_format.value} describes the release {command}ed; --dry-run prints the manifests "
                         "as YAML", hint="drop one of them; `det-k8s render ... --output-dir DIR` writes the manifests")
    if show_diff and dry_run:
        raise UsageError("--diff compares with the installed release, which --dry-run does not contact",
                         hint=f"det-k8s diff {release} -f ... shows the changes without upgrading")
    seconds = parse_duration(timeout)
    checked = pod_spec_version(kube_version)
    with checking_against(checked):
        loaded = load_settings_from_cli(values, set_, set_string, chart=chart)
    settings = loaded.settings()  # every error listed, exit 1, nothing run
    report_warnings(loaded)
    build = install_argv if command == "install" else upgrade_argv
    if command == "install" and (missing := missing_initial_password(loaded.values, settings.app_version)):
        raise SettingsError([missing])
    tool = helm(helm_bin)
    with private_chart(loaded, settings, chart) as built:  # rendered first: a broken --chart fails before the cluster
        if chart is not None:  # helm must template it, and every setting must reach the master's configuration
            found = check_user_chart(tool, built, chart, loaded, settings, severity=Severity.ERROR,
                                 upgrading=command == "upgrade")
            for item in found:
                if item.severity is not Severity.ERROR:
                    output.problem(item, stream=sys.stderr)
            if any(item.severity is Severity.ERROR for item in found):
                raise SettingsError([item for item in found if item.severity is Severity.ERROR])
        if dry_run:
            namespace = offline_namespace()
            spec = ReleaseSpec(release, str(built.directory), str(built.values_file), kube_flags(namespace), wait,
                               go_duration(timeout), create_namespace, rollback)
            upgrading = command == "upgrade"
            _default_passwords(command, settings)
            _dry_run(tool, release, build(tool.major, spec), str(built.directory), str(built.values_file), namespace,
                     (*secret_values(settings), UPGRADE_CHECK_PASSWORD), upgrading=upgrading,
                     extra=upgrade_check_values(loaded, settings, upgrading) if chart is not None else ())
            return
        api = current().connect()
        kube = kube_flags(api.namespace)
        tool = replace(tool, context=api.target.context)
        if (pending := live.stuck_release(api, release, api.namespace)) is not None:  # helm would refuse, less clearly
            raise DetK8sError(pending.message, hint=pending.hint)
        with output.spinner(f"checking cluster {api.target.context}"):
            upgrading = command == "upgrade"
            manifests = rendered_manifests(
                tool, release, str(built.directory), str(built.values_file), api.namespace,
                (*secret_values(settings), UPGRADE_CHECK_PASSWORD), upgrading=upgrading,
                extra=upgrade_check_values(loaded, settings, upgrading) if chart is not None else ())
            problems = live.run_preflight(api, tool, loaded, settings, release, kube,
                                          create_namespace=create_namespace, upgrading=upgrading,
                                          skip_storage_check=skip_storage_check, pod_specs_checked=checked,
                                          user_chart=chart is not None, manifests=manifests)
        report_problems(problems)
        _default_passwords(command, settings)
        if command == "upgrade":
            if show_diff:
                show_upgrade_diff(tool, release, kube, api.namespace, str(built.directory), str(built.values_file),
                                  secret_values(settings))
            announce_restarts(api, "upgrade", f"Upgrade release {release} in namespace {api.namespace}? The master "
                              "restarts.", f"upgrade {release}", yes)
        # det-k8s waits for the master itself (release/observe.py:wait_until_ready), not with helm's --wait, which also
        # waits for a load balancer's address that never comes on clusters without one; and so it also undoes a
        # release that did not become ready itself (helm's --atomic implies helm's wait).
        spec = ReleaseSpec(release, str(built.directory), str(built.values_file), kube, False, go_duration(timeout),
                           create_namespace, False)
        started = time.monotonic()
        # helm's record then tells what det-k8s saw: a revision that did not become ready is marked failed (and
        # undone with --rollback-on-failure), one that did is labelled seen ready; stopped, the last line says where
        # the release stands and what restores service (cli/change.py)
        with change.helm_changing(api, tool, command, release, api.namespace, kube, rollback=rollback) as phase:
            with output.spinner(f"helm {command} {release}"):
                tool.run(build(tool.major, spec), timeout=seconds + 60, secrets=secret_values(settings),
                         timeout_hint=f"raise --timeout (now {go_duration(timeout)}); `det-k8s status {release}` "
                         "says what is slow")
            if wait or rollback:  # as with helm's --atomic, undoing a release that did not become ready means waiting
                left = max(1.0, seconds - (time.monotonic() - started))
                change.wait_and_record(api, tool, command, release, api.namespace, kube, left, go_duration(timeout),
                                       rollback=rollback, phase=phase)
            output.success(f"{'Installed' if command == 'install' else 'Upgraded'} release {release} in namespace "
                           f"{api.namespace} (Determined {settings.app_version})")
            url = _show_address(api, release, api.namespace, bool(settings.tls_secret))
    if output_format is not OutputFormat.table:  # as helm's -o: the release, on stdout
        output.data({"name": release, "namespace": api.namespace, "status": "deployed",
                     "app_version": settings.app_version, "ready": bool(wait or rollback), "master_url": url},
                    output_format)


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
    kube_version: KubeVersionOpt = None,
    output_format: ReleaseOutputOpt = OutputFormat.table,
    helm_binary: HelmBinaryOpt = None,
    version: VersionOpt = None,
) -> None:
    """Validate the settings and the cluster, then helm install Determined and print the master's address."""
    _lifecycle("install", release, values, set_, set_string, chart, timeout, dry_run, helm_binary, wait=wait,
               create_namespace=create_namespace, rollback=rollback_on_failure, skip_storage_check=skip_storage_check,
               kube_version=kube_version, output_format=output_format)


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
    kube_version: KubeVersionOpt = None,
    show_diff: Annotated[bool, typer.Option(
        "--diff", help="Before asking, show what the upgrade changes (det-k8s diff: manifests and master "
        "configuration, secrets as hashes).")] = False,
    wait: AlwaysWaitsOpt = False,
    output_format: ReleaseOutputOpt = OutputFormat.table,
    reset_values: Annotated[bool, typer.Option(
        "--reset-values", help="Accepted as helm takes it: det-k8s always upgrades to exactly the settings "
        "passed.")] = False,
    yes: YesOpt = False,
    helm_binary: HelmBinaryOpt = None,
    version: VersionOpt = None,
) -> None:
    """Validate, warn which experiments restart from their latest checkpoint, ask, then helm upgrade and wait until
    the master and database are ready."""
    del wait, reset_values  # what det-k8s's upgrade always does
    _lifecycle("upgrade", release, values, set_, set_string, chart, timeout, dry_run, helm_binary, wait=True,
               create_namespace=False, rollback=rollback_on_failure, skip_storage_check=skip_storage_check, yes=yes,
               kube_version=kube_version, show_diff=show_diff, output_format=output_format)


@with_global_options
def uninstall(
    release: ReleaseArg,
    yes: YesOpt = False,
    keep_pods: Annotated[bool, typer.Option("--keep-pods", help="Leave the task pods, Jobs and ConfigMaps.")] = False,
    delete_data: Annotated[bool, typer.Option(
        "--delete-data", help="Also delete the kept database volume: every experiment record, permanently.")] = False,
    timeout: TimeoutOpt = "5m",
    wait: Annotated[bool, typer.Option(
        "--wait", help="Have helm wait until the release's objects are gone (up to --timeout).")] = False,
    keep_history: Annotated[bool, typer.Option(
        "--keep-history", help="Keep helm's records of the release, marked uninstalled (helm's flag).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Say what would be deleted and kept; delete nothing.")] = False,
    ignore_not_found: Annotated[bool, typer.Option(
        "--ignore-not-found", help="A release that is not there is not an error (exit 0), as with helm.")] = False,
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """Say exactly what will be lost, ask, then helm uninstall and delete the leftover task pods."""
    from ...kube.kinds import PVCS
    from ...release import live
    from ...release.names import db_pvc, validate_release_name
    from ...tools.helm import uninstall_argv

    validate_release_name(release)
    seconds = parse_duration(timeout)
    api = current().connect()
    namespace = api.namespace
    if not live.release_exists(api, release, namespace):
        if ignore_not_found:
            output.message(f"no release {release} in namespace {namespace}: nothing to uninstall")
            return
        raise NotFound(f"no release {release} in namespace {namespace}", hint="det-k8s list -A shows the releases")
    summary, pvc, notes = live.uninstall_summary(api, release, namespace, delete_data=delete_data,
                                                 keep_pods=keep_pods)
    for note in notes:
        output.warning(note)
    output.message(f"Uninstalling release {release} from namespace {namespace} deletes:")
    for line in summary.deleted:
        output.message(f"  - {line}")
    if summary.kept:
        output.message("and keeps:")
        for line in summary.kept:
            output.message(f"  - {line}")
    if summary.permanent_loss:
        output.warning("this permanently deletes every experiment record of this Determined installation")
    if dry_run:
        output.message(f"dry run: nothing was deleted (det-k8s uninstall {release} -n {namespace} does it)")
        return
    confirm(f"Uninstall {release}{' and DELETE ALL EXPERIMENT RECORDS' if summary.permanent_loss else ''}?",
            yes=yes, action=f"uninstall {release}")
    tool = helm(helm_binary, api.target)
    with output.spinner(f"helm uninstall {release}"):
        tool.run(uninstall_argv(tool.major, release, kube_flags(namespace), go_duration(timeout), wait=wait,
                                keep_history=keep_history),
                 timeout=seconds + 60, timeout_hint=f"raise --timeout (now {go_duration(timeout)})")
    output.success(f"Uninstalled release {release} from namespace {namespace}")
    if not keep_pods:
        tasks, _ = live.task_units(api, namespace)  # read again: helm's uninstall took its time
        deleted = live.delete_task_units(api, tasks)
        jobs = (f"{deleted['jobs']} task Job(s) with their pods, " if deleted["jobs"] else "")
        output.message(f"Deleted {jobs}{deleted['pods']} leftover task pod(s) and {deleted['configmaps']} task "
                       "ConfigMap(s)")
        for line in live.held_lines(tasks):
            output.warning(line)
    if delete_data and pvc is not None:
        api.delete(PVCS, db_pvc(release), namespace, missing_ok=True)
        if summary.volume_fate:  # a Retain PersistentVolume keeps the data: named, with what deletes it
            output.message(f"Deleted the database volume claim {db_pvc(release)}; {summary.volume_fate}")
        else:
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
    from ...release.preflight import determined_releases
    from ...tools.helm import list_argv

    tool = helm(helm_binary, cluster())
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
