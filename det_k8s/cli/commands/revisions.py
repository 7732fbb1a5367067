"""`det-k8s diff`, `history` and `rollback`: helm's release habits, with det-k8s's safety.

`diff` renders the chart from the settings (as `upgrade` would) and compares it with the installed
revision (`helm get manifest` and `helm get hooks`), object by object, secrets as hashes
(`release/diff.py`); it exits 0 when nothing would change and 2 when something would, as
`helm diff --detailed-exitcode` does (the flag is accepted, for scripts written for helm-diff; a usage error also
exits 2, with an `error:` line and no diff). `rollback` names what it changes the same way, runs the
preflight `upgrade` runs (against the settings the target revision was installed with), names the
running experiments and asks. Reads go through helm; only `rollback` changes anything.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import DetK8sError, NotFound, ToolFailed, UsageError
from .. import output
from ..common import HelmBinaryOpt, YesOpt, cluster, helm, kube_flags, private_chart
from ..inputs import SetOpt, SetStringOpt, ValuesOpt, load_settings_from_cli
from ..options import KubeVersionOpt, OutputOpt, current, pod_spec_version, with_global_options
from ..output import OutputFormat
from ..release_options import AlwaysWaitsOpt, ReleaseArg, SkipStorageOpt, TimeoutOpt
from ..release_steps import announce_restarts, installed_manifests, installed_secrets, show_changes, show_upgrade_diff

if TYPE_CHECKING:
    from ...tools.helm import Helm, KubeFlags

CHANGES = 2  # `diff` exits 2 when the release would change, as helm diff --detailed-exitcode does
DiffChartOpt = Annotated[Path | None, typer.Option(
    "--chart", metavar="PATH", help="Render your copy of the Determined chart (directory or .tgz), as upgrade --chart "
    "would, instead of the bundled one; it is copied, never modified.")]
UnifiedOpt = Annotated[int, typer.Option("--unified", "-U", metavar="N", min=0,
                                         help="Lines of context around each change, as diff -U.")]


@with_global_options
def diff(
    release: ReleaseArg,
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    chart: DiffChartOpt = None,
    unified: UnifiedOpt = 3,
    detailed_exitcode: Annotated[bool, typer.Option(
        "--detailed-exitcode", help="Accepted for scripts written for helm diff: det-k8s diff always exits 2 when the "
        "upgrade would change something and 0 when not (a usage error also exits 2, with an error: line).")] = False,
    kube_version: KubeVersionOpt = None,
    helm_binary: HelmBinaryOpt = None,
) -> int:
    """Show what an upgrade with these settings would change; exit 0 when nothing, 2 when something would."""
    from ...release.manifests import secret_values
    from ...release.names import validate_release_name
    from ...settings.podspec import checking_against
    from ..common import report_warnings

    validate_release_name(release)
    with checking_against(pod_spec_version(kube_version)):
        loaded = load_settings_from_cli(values, set_, set_string, chart=chart)
    settings = loaded.settings()
    report_warnings(loaded)
    target = cluster()
    tool = helm(helm_binary, target)
    kube = kube_flags(target.namespace)
    with private_chart(loaded, settings, chart) as built:
        changes = show_upgrade_diff(tool, release, kube, target.namespace, str(built.directory),
                                    str(built.values_file), secret_values(settings), unified)
    del detailed_exitcode  # always on (README, "diff")
    return CHANGES if changes else 0


_HISTORY_FIELDS = ("updated", "status", "chart", "app_version", "description")


def _history(tool: Helm, release: str, kube: KubeFlags, max_revisions: int | None = None) -> list[dict[str, Any]]:
    """helm history's entries by revision, each {revision: int, and the text fields as strings}; helm printing JSON
    of another shape (no list, an entry without a revision number) is one error line, never a crash."""
    from ...tools.helm import history_argv

    entries = tool.json(history_argv(release, kube, max_revisions))
    if entries is None or entries == []:
        raise NotFound(f"no release {release} in namespace {kube.namespace}", hint="det-k8s list -A shows the releases")
    if not isinstance(entries, list):
        raise ToolFailed("helm history -o json printed JSON of another shape (expected a list of revisions)",
                         returncode=0, hint="is --helm-binary / DET_K8S_HELM really helm 3 or 4?")
    out = []
    for index, entry in enumerate(entries):
        revision = entry.get("revision") if isinstance(entry, dict) else None
        if isinstance(revision, str) and revision.isdigit() and len(revision) < 10:
            revision = int(revision)
        if not isinstance(revision, int) or isinstance(revision, bool) or not 0 < revision < 2**31:
            raise ToolFailed(f"helm history -o json printed JSON of another shape (entry {index + 1} has no revision "
                             "number)", returncode=0, hint="is --helm-binary / DET_K8S_HELM really helm 3 or 4?")
        fields = {key: entry.get(key) for key in _HISTORY_FIELDS}
        out.append({"revision": revision, **{k: v if isinstance(v, str) else "" for k, v in fields.items()}})
    return sorted(out, key=lambda e: e["revision"])


def _when(entry: dict[str, Any]) -> str:
    text = str(entry.get("updated") or "")
    return text[:19].replace("T", " ") if len(text) >= 19 else text


@with_global_options
def history(
    release: ReleaseArg,
    max_revisions: Annotated[int, typer.Option("--max", metavar="N", min=1, max=2**31 - 1,
                                               help="Show at most the N latest revisions.")] = 256,
    output_format: OutputOpt = OutputFormat.table,
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """The revisions of a release: when, status, chart and Determined version, and what happened (helm history)."""
    from ...release.names import validate_release_name

    validate_release_name(release)
    target = cluster()
    tool = helm(helm_binary, target)
    entries = _history(tool, release, kube_flags(target.namespace), max_revisions)
    rows = [{"revision": int(e.get("revision") or 0), "updated": str(e.get("updated") or ""),
             "status": str(e.get("status") or ""), "chart": str(e.get("chart") or ""),
             "app_version": str(e.get("app_version") or ""), "description": str(e.get("description") or "")}
            for e in entries]
    if output_format is not OutputFormat.table:
        output.data(rows, output_format)
        return
    output.table(["revision", "updated", "status", "chart", "app version", "description"],
                 [[r["revision"], _when(r), r["status"], r["chart"], r["app_version"], r["description"]] for r in rows])


def _describe(entry: dict[str, Any]) -> str:
    parts = [str(entry.get("chart") or "?")]
    if entry.get("app_version"):
        parts.append(f"Determined {entry['app_version']}")
    if entry.get("status"):
        parts.append(str(entry["status"]))
    return f"revision {entry.get('revision')} ({', '.join(parts)})"


def _downgrade_warning(current: str, target: str) -> None:
    from ...determined.versions import parse_version

    now, then = parse_version(current), parse_version(target)
    if now is not None and then is not None and then < now:
        output.warning(f"this takes Determined back from {now} to {then}: the {now} master migrated the database "
                       "forward when it started, and det-k8s knows no supported way back; back up the database "
                       "before going on")


@with_global_options
def rollback(
    release: ReleaseArg,
    revision: Annotated[int | None, typer.Argument(
        metavar="[REVISION]", min=0, max=2**31 - 1, show_default=False,
        help="The revision to go back to (default, or 0: the last one det-k8s saw ready, else the one before the "
        "current, as helm's 0). See det-k8s "
        "history.")] = None,
    timeout: TimeoutOpt = "10m",
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Say what the rollback changes and run the preflight; roll nothing back.")] = False,
    show_diff: Annotated[bool, typer.Option("--diff", help="Also show the changes as a unified diff.")] = False,
    skip_storage_check: SkipStorageOpt = False,
    wait: AlwaysWaitsOpt = False,
    yes: YesOpt = False,
    helm_binary: HelmBinaryOpt = None,
) -> None:
    """Name what rolling back changes, check the cluster as upgrade does, ask, then helm rollback and wait."""
    from ...release.diff import diff_manifests, parse_manifests, summary
    from ...release.names import validate_release_name

    del wait  # det-k8s's rollback always waits
    import yaml

    from ...release import live
    from ...release.preflight import CHART_PREFIX
    from ...settings import Document, load_settings
    from ...tools.duration import go_duration, parse_duration
    from ...tools.helm import get_values_argv, rollback_argv
    from .. import change as changing
    from ..common import report_problems

    validate_release_name(release)
    seconds = parse_duration(timeout)
    api = current().connect()
    tool = helm(helm_binary, api.target)
    namespace = api.namespace
    kube = kube_flags(namespace)
    entries = _history(tool, release, kube)
    now = entries[-1]
    found = live.stuck_release(api, release, namespace)
    if found is not None and found.back_to is None:  # nothing to go back to: only an uninstall recovers
        raise DetK8sError(found.message, hint=found.hint)
    chart = str(now.get("chart") or "")
    if not chart.startswith(CHART_PREFIX):
        raise UsageError(f"release {release} in namespace {namespace} is chart {chart or '?'}, not Determined",
                         hint="det-k8s rolls back Determined releases only; use helm rollback for others")
    revisions = [int(e.get("revision") or 0) for e in entries]
    current_revision = revisions[-1]
    wanted = revision if revision else None
    if wanted is None:  # the last revision det-k8s saw ready (its label on helm's record), else the one before
        from ...release.record import last_seen_ready

        seen = last_seen_ready(live.release_revisions(api, release, namespace), current_revision)
        wanted = seen.revision if seen is not None and seen.revision in revisions else next(
            (r for r in reversed(revisions) if r < current_revision), None)
        if wanted is not None:
            output.message(f"Going back to revision {wanted}: " + (
                "the last revision det-k8s saw ready" if seen is not None and seen.revision == wanted else
                "the one before the current (det-k8s saw no earlier revision ready; name REVISION to choose)"))
    if wanted is None:
        raise DetK8sError(f"release {release} has only revision {current_revision}: there is nothing to roll back to")
    if wanted == current_revision:
        raise UsageError(f"revision {wanted} is the current revision of {release}",
                         hint=f"det-k8s history {release} lists the others")
    if wanted not in revisions:
        shown = ", ".join(map(str, revisions))
        raise UsageError(f"REVISION {wanted}: not in the history of {release} (revisions {shown})",
                         hint=f"det-k8s history {release}; helm keeps the last 10 by default")
    target = entries[revisions.index(wanted)]
    known = (*installed_secrets(tool, release, kube), *installed_secrets(tool, release, kube, wanted))
    old = installed_manifests(tool, release, kube)
    new = installed_manifests(tool, release, kube, wanted)
    user_values = tool.json(get_values_argv(release, kube, all_values=False, revision=wanted)) or {}
    app = str(target.get("app_version") or "")
    loaded = load_settings([Document(f"the values of revision {wanted}", yaml.safe_dump(user_values))],
                           set_strings=[f"appVersion={app}"] if app else [])
    from ...release.manifests import secret_values

    secrets = (*(secret_values(loaded.settings()) if not loaded.errors else ()), *known)
    changes = diff_manifests(parse_manifests(old, namespace, secrets), parse_manifests(new, namespace, secrets))
    if found is not None:
        output.warning(f"{found.message}; rolling back to revision {wanted} recovers it")
    output.message(f"Rolling back release {release} in namespace {namespace} from {_describe(now)} to "
                   f"{_describe(target)}, recorded as revision {current_revision + 1}.")
    if changes:
        count = len(changes)
        output.message(f"It changes {count} object{'s' * (count != 1)} ({summary(changes)}):")
        for change in changes:
            output.message(f"  {change.action:8} {change.kind} {change.name}")
    else:
        output.message(f"Revision {wanted} has the same manifests as revision {current_revision}.")
    if show_diff:
        show_changes(changes, f"rollback of release {release} (namespace {namespace})")
    _downgrade_warning(str(now.get("app_version") or ""), app)
    if loaded.errors:
        output.message(f"the values of revision {wanted} are not valid settings for this det-k8s:")
        for item in loaded.errors:
            output.problem(item, stream=sys.stderr)
        raise DetK8sError(f"cannot check the cluster for revision {wanted}: its settings are invalid; nothing was "
                          "changed", hint=f"helm rollback {release} {wanted} does it without det-k8s's checks")
    settings = loaded.settings()
    with output.spinner(f"checking cluster {api.target.context}"):
        problems = live.run_preflight(api, tool, loaded, settings, release, kube, create_namespace=False,
                                      upgrading=True, skip_storage_check=skip_storage_check)
    report_problems(problems)
    argv = rollback_argv(tool.major, release, wanted, kube, timeout=go_duration(timeout))
    if dry_run:
        from ...tools.process import display

        output.message(f"would run: {display([tool.path, *argv])}  (dry run: nothing was changed)")
        return
    announce_restarts(api, "rollback", f"Roll back release {release} in namespace {namespace} to revision {wanted}? "
                      "The master restarts.", f"rollback {release}", yes)
    started = time.monotonic()
    with changing.helm_changing(api, tool, "rollback", release, namespace, kube, rollback=False) as phase:
        with output.spinner(f"helm rollback {release} {wanted}"):
            tool.run(argv, timeout=seconds + 60, secrets=secrets)
        changing.wait_and_record(api, tool, "rollback", release, namespace, kube,
                                 max(1.0, seconds - (time.monotonic() - started)), go_duration(timeout), rollback=False,
                                 phase=phase)
        output.success(f"Rolled back release {release} in namespace {namespace} to revision {wanted}"
                       + (f" (Determined {app})" if app else "") + f"; helm recorded it as revision "
                       f"{current_revision + 1}")
