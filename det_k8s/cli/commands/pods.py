"""`det-k8s pods list|cleanup`: the task pods the documents' kubectl one-liners handle, done safely.

The documents delete leftovers with `kubectl get pods -l=determined | awk | xargs kubectl delete`.
Here the selector always includes `determined` (a `-l` narrows it, never widens it), the exact
objects are listed before anything is deleted, and deleting asks first. From Determined 0.34 the
master's unit is a batch/v1 Job: cleanup deletes the Job (with propagation, so its pods go too),
never one of its pods alone, and `list` names each pod's Job.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .. import output
from ..common import AllNamespacesOpt, YesOpt, confirm
from ..options import OutputOpt, current, with_global_options
from ..output import OutputFormat

app = typer.Typer(help="Task pods the Determined master started (label `determined`).", no_args_is_help=True,
                  context_settings={"help_option_names": ["-h", "--help"]}, rich_markup_mode=None)

def _checked_selector(value: str | None) -> str | None:
    """-l as kubectl reads it, before any pod is listed or deleted: a selector it would refuse is a usage error."""
    if value is not None:
        from ...cluster.selector import parse_selector
        from ...errors import UsageError

        try:
            parse_selector(value)
        except UsageError as exc:
            raise typer.BadParameter(exc.message) from exc
    return value


SelectorOpt = Annotated[str | None, typer.Option(
    "--selector", "-l", metavar="SELECTOR", callback=_checked_selector,
    help="Narrow the task pods further (always ANDed with `determined`).")]


def _row(pod: dict[str, Any]) -> dict[str, Any]:
    from ...cluster.model import GPU
    from ...cluster.read import effective_requests
    from ...labels import DETERMINED
    from ...release.tasks import age, owning_job

    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    gpus = effective_requests(spec, f"pod {meta.get('name')}").get(GPU, 0) // 1000
    return {"name": meta.get("name", ""), "namespace": meta.get("namespace", ""), "phase": status.get("phase", ""),
            "node": spec.get("nodeName") or "", "gpus": gpus, "age": age(str(meta.get("creationTimestamp") or "")),
            "allocation": (meta.get("labels") or {}).get(DETERMINED, ""), "job": owning_job(pod) or ""}


def _task_pods(selector: str | None, all_namespaces: bool) -> tuple[Any, list[dict[str, Any]]]:
    from ...kube.kinds import PODS
    from ...release.tasks import only_task_pods

    api = current().connect()
    pods = api.list(PODS, all_namespaces=all_namespaces, label_selector=only_task_pods(selector))
    return api, pods


@app.command("list")
@with_global_options
def list_pods(
    all_namespaces: AllNamespacesOpt = False,
    selector: SelectorOpt = None,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Task pods: NAME, NAMESPACE, PHASE, NODE, GPUS, AGE, JOB (the Job that owns it, from Determined 0.34)."""
    _, pods = _task_pods(selector, all_namespaces)
    rows = [_row(p) for p in pods]
    if output_format is not OutputFormat.table:
        output.data(rows, output_format)
    elif rows:
        output.table(["NAME", "NAMESPACE", "PHASE", "NODE", "GPUS", "AGE", "JOB"],
                     [[r["name"], r["namespace"], r["phase"], r["node"], r["gpus"], r["age"], r["job"]]
                      for r in rows])
    else:
        output.message("no task pods")


@app.command("cleanup")
@with_global_options
def cleanup(
    all_namespaces: AllNamespacesOpt = False,
    selector: SelectorOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be deleted; delete nothing.")] = False,
    yes: YesOpt = False,
) -> None:
    """Delete the master's task Jobs (with their pods), bare task pods and their ConfigMaps, after listing and asking."""
    from ...release.live import delete_task_units, held_lines, task_units

    api = current().connect()
    found, notes = task_units(api, api.namespace, all_namespaces=all_namespaces, selector=selector)
    for note in [*notes, *held_lines(found)]:
        output.warning(note)
    if found.empty:
        output.message("no task pods to delete")
        return
    verb = "would delete" if dry_run else "deletes"
    output.message(f"This {verb} {found.summary()}:")
    for line in found.lines():
        output.message(f"  {line}")
    if dry_run:
        return
    output.warning("running experiments lose their pods; the master may restart them from their last checkpoint")
    confirm(f"Delete {found.summary()}?", yes=yes, action="pods cleanup")
    deleted = delete_task_units(api, found)
    jobs = f"{deleted['jobs']} Job(s) with their pods, " if found.jobs else ""
    output.success(f"Deleted {jobs}{deleted['pods']} pod(s) and {deleted['configmaps']} ConfigMap(s)")
