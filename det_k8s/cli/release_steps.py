"""Steps the release commands share: rendering the chart without a cluster, diffing it against the installed
revision, and naming the running experiments before the master restarts.

The commands (commands/release.py, revisions.py, chart.py) never import each other: what two of them run is here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import output
from .common import confirm

if TYPE_CHECKING:
    from ..kube.api import KubeApi
    from ..release.diff import Change
    from ..tools.helm import Helm, KubeFlags


def rendered_manifests(tool: Helm, release: str, built_chart: str, values_file: str, namespace: str,
                       secrets: Sequence[str], *, upgrading: bool = False, extra: Sequence[str] = ()) -> str:
    """The YAML stream of the objects helm would apply, rendered without a cluster (an upgrade as one)."""
    from ..tools.helm import manifests_from_render, render_argv, upgrade_render_argv

    if upgrading:
        argv = upgrade_render_argv(release, built_chart, values_file, namespace) + list(extra)
        return tool.run(argv, secrets=tuple(secrets)).stdout
    rendered = tool.run(render_argv(tool.major, release, built_chart, values_file, namespace), secrets=tuple(secrets))
    return manifests_from_render(tool.major, rendered.stdout)



def installed_secrets(tool: Helm, release: str, kube: KubeFlags, revision: int | None = None) -> tuple[str, ...]:
    """Every secret a revision was installed with (`helm get values`), registered with the scrubber at once: the
    revision's manifests may hold them where no Secret does (an official chart's database password in a
    Deployment's env, the default password in a Job's args), and the new settings do not know old passwords."""
    from ..errors import DetK8sError
    from ..scrub_output import register
    from ..settings.secret_settings import secrets_in
    from ..tools.helm import get_values_argv

    try:
        values = tool.json(get_values_argv(release, kube, all_values=False, revision=revision))
    except DetK8sError:  # the manifests alone are still shown, secret-looking values hashed (release/diff.py)
        return ()
    found = tuple(dict.fromkeys(secrets_in(values))) if isinstance(values, dict) else ()
    register(*found)
    return found



def installed_manifests(tool: Helm, release: str, kube: KubeFlags, revision: int | None = None) -> str:
    """A revision's manifests and hooks as one stream (the latest revision by default)."""
    from ..tools.helm import get_hooks_argv, get_manifest_argv

    manifest = tool.run(get_manifest_argv(release, kube, revision)).stdout
    hooks = tool.run(get_hooks_argv(release, kube, revision)).stdout
    return manifest.rstrip("\n") + "\n---\n" + hooks



def show_changes(changes: list[Change], where: str) -> None:
    """Each changed object's unified diff on stdout, then one summary line on stderr."""
    from ..release.diff import summary

    for change in changes:
        output.diff_lines(change.title, change.lines)
    output.message(f"{where}: {summary(changes)}" if changes else f"{where}: no changes")



def show_upgrade_diff(tool: Helm, release: str, kube: KubeFlags, namespace: str, chart: str, values_file: str,
                      secrets: tuple[str, ...], context: int = 3) -> list[Change]:
    """The changes an upgrade of `release` to this rendered chart makes, shown; returned for the exit code."""
    from ..release.diff import diff_manifests, parse_manifests

    new = rendered_manifests(tool, release, chart, values_file, namespace, secrets, upgrading=True)
    old = installed_manifests(tool, release, kube)
    secrets = (*secrets, *installed_secrets(tool, release, kube))
    changes = diff_manifests(parse_manifests(old, namespace, secrets), parse_manifests(new, namespace, secrets), context)
    show_changes(changes, f"upgrade of release {release} (namespace {namespace})")
    return changes



def announce_restarts(api: KubeApi, what: str, question: str, action: str, yes: bool) -> None:
    """`what` (an upgrade, a rollback) restarts the master: name the running experiments, then ask (or refuse
    without a terminal)."""
    from ..release import live
    from ..release.tasks import group_tasks

    groups = group_tasks(live.running_tasks(api, api.namespace))
    if groups:
        output.warning(f"{len(groups)} task(s) are running in {api.namespace}; the master restarts during the "
                       f"{what} and they resume from their latest checkpoint (work since then is redone). "
                       "Consider pausing experiments first:")
        for group in groups:
            allocation = f" (allocation {group.allocation})" if group.allocation else " (no allocation label)"
            output.message(f"  {group.description}{allocation}: {', '.join(group.pods)}")
    else:
        output.message(f"no task pods are running in {api.namespace}")
    confirm(question, yes=yes, action=action)
