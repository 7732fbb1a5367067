"""What `det-k8s plan` does: read the snapshot, settings and experiments, plan one pass, print it.

The experiments are taken as if submitted at once, in argument order, to an empty queue in the
namespace of `-n` (HELM_NAMESPACE, else `default`); one scheduling pass runs on the snapshot with
the same core the live scheduler uses, at the moment of submission (so none has waited long enough
to reserve nodes). The snapshot's pods of the Determined master that name --scheduler-name are read
and collected as `scheduler run` serves them (`plan_pass`): its ready gangs join the queue, its bound
ones run, and its trials may be preempted or reclaimed from. As in the live scheduler, only that
namespace's running det-k8s groups and the master's trials may be preempted: the live pass and this
plan decide with the one function (`scheduling.plan.pass_plan`). Nothing talks to a cluster.
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cluster.model import Snapshot
from ..cluster.sanity import require_nodes, snapshot_warnings
from ..determined.versions import Version
from ..errors import ExperimentError, Unschedulable
from ..quantity import format_milli
from ..scheduling.experiments import Experiment, parse_experiment
from ..scheduling.explain import describe, reclaiming, to_dict
from ..scheduling.groups import build_group
from ..scheduling.labels import running_groups
from ..scheduling.master import DEFAULT_SCHEDULER_NAME, MasterPod, ServedReader
from ..scheduling.model import ZONE, Plan, PodGroup, Policy, Reason, ReasonCode, RunningGroup
from ..scheduling.plan import pass_plan, running_in
from ..scheduling.queues import unnamed_workspaces
from ..scheduling.searchers import Search, trials_at_once
from ..settings.model import Settings
from . import output
from .inputs import load_settings_from_cli, load_snapshot, no_gc, read_text, stdin_once, with_policy_file
from .options import timed
from .output import OutputFormat

if TYPE_CHECKING:
    from ..scheduling.occupancy import OccupancyMap
    from .nodemap import MapRequest

SCHEDULING_KEYS = ("maxSlotsPerPod", "slotType", "slotResourceRequests", "taskContainerDefaults",
                   "defaultScheduler")


@dataclass(frozen=True)
class Entry:
    """One trial of an experiment argument (a search has several) and what became of it."""

    experiment: Experiment
    group: PodGroup | None
    rejected: Reason | None = None
    trial: int = 1
    search: Search | None = None  # set for a search running more than one trial at once

    @property
    def label(self) -> str:
        """The experiment's name, and which trial for a search: `asha (trial 2/4)`."""
        if self.search is None:
            return self.experiment.name
        return f"{self.experiment.name} (trial {self.trial}/{self.search.trials})"


def default_max_slots(snapshot: Snapshot) -> tuple[int, list[int]]:
    """The GCD of the ready GPU nodes' sizes (1 without GPU nodes), and the sizes."""
    sizes = sorted({node.gpus for node in snapshot.nodes if node.gpus > 0 and node.ready})
    return (math.gcd(*sizes) if sizes else 1), sizes


def plan_settings(values: Sequence[str | Path] | None, sets: Sequence[str] | None,
                  set_strings: Sequence[str] | None, snapshot: Snapshot) -> Settings:
    """Settings from -f/--set; with no settings file, maxSlotsPerPod defaults to the GPU nodes' GCD."""
    loaded = load_settings_from_cli(values, sets, set_strings, required=False)
    if not values and "maxSlotsPerPod" not in loaded.user_values:
        slots, sizes = default_max_slots(snapshot)
        shown = ", ".join(map(str, sizes)) or "no GPU nodes"
        output.warning(f"no settings file given: assuming maxSlotsPerPod {slots}, the greatest common "
                       f"divisor of the GPU node sizes ({shown}); pass -f with your settings to use them")
        loaded = load_settings_from_cli(values, [*(sets or ()), f"maxSlotsPerPod={slots}"], set_strings,
                                        required=False)
    settings = loaded.settings()  # raises SettingsError listing every error
    for item in loaded.warnings:
        if item.path.split(".")[0].split("[")[0] in SCHEDULING_KEYS:
            output.problem(item, stream=sys.stderr)
    return settings


def read_experiments(paths: Sequence[Path], version: Version | None = None) -> list[Experiment]:
    """Every experiment file, its keys checked against Determined `version`; all problems reported at once."""
    parsed = [parse_experiment(read_text(path, "experiment file"), "stdin" if str(path) == "-" else str(path),
                               default_name="experiment" if str(path) == "-" else path.stem, version=version)
              for path in paths]
    errors = [p for item in parsed for p in item.errors]
    for item in parsed:
        for warning in item.warnings:
            output.problem(warning, stream=sys.stderr)
    if errors:
        raise ExperimentError(errors)
    return [item.get() for item in parsed]


def build_entries(experiments: Sequence[Experiment], settings: Settings, user: str,
                  submitted: datetime, namespace: str = "default") -> list[Entry]:
    """The experiments as groups submitted together at `submitted`, in argument order; a search that runs N
    trials at once is N groups, one per trial (each trial's pods start together, trials independently)."""
    now = submitted.strftime("%Y-%m-%dT%H:%M:%SZ")
    entries: list[Entry] = []
    for index, experiment in enumerate(experiments):
        search = trials_at_once(experiment.config, str(settings.app_version))
        trials = search.trials if search.trials > 1 else 1
        for trial in range(1, trials + 1):
            sequence = len(entries)
            seed = f"{index}\0{experiment.name}" + (f"\0{trial}" if trials > 1 else "")  # stable whatever the file name
            group_id = hashlib.sha256(seed.encode()).hexdigest()[:12]
            member = replace(experiment, name=f"{experiment.name}-trial-{trial}") if trials > 1 else experiment
            shown = search if trials > 1 else None
            try:
                group = build_group(member, settings, group_id=group_id, user=user, submitted_at=now,
                                    sequence=sequence, namespace=namespace)
            except Unschedulable as exc:
                detail = exc.message + (f"; {exc.hint}" if exc.hint else "")
                entries.append(Entry(experiment, None, Reason(ReasonCode.NOT_DIVISIBLE, detail=detail), trial, shown))
                continue
            entries.append(Entry(experiment, group, None, trial, shown))
    return entries


@dataclass(frozen=True)
class Planned:
    """`plan_pass`'s answer: the plan, what was planned, every running group by id, the master's groups' namespaces
    and what the pass that serves the master's pods would repair first (one line each)."""

    plan: Plan
    queue: tuple[PodGroup, ...]
    running: dict[str, RunningGroup]
    where: dict[str, str]
    repairs: tuple[str, ...] = ()


def plan_pass(snapshot: Snapshot, served: Sequence[MasterPod], queue: Sequence[PodGroup], policy: Policy,
              namespace: str, *, now: datetime, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Planned:
    """The pass `scheduler run` in `namespace` would make on `snapshot` with `queue` submitted: the master's pods that
    name `scheduler_name` (`served`, read by `ServedReader`) are collected as its pass collects them (ready groups
    queued, bound ones running and preemptible if trials, partly bound or orphaned ones left to its repair), and the
    one decision is `pass_plan`'s, as the live pass's (`live/decide.py`)."""
    master_queue: tuple[PodGroup, ...] = ()
    master_running: tuple[RunningGroup, ...] = ()
    where: dict[str, str] = {}
    repairs: list[str] = []
    if served:
        from ..live.master_actions import Repair, collect, seen_in_snapshot
        from ..live.scheduler import PREEMPTION_GRACE
        from ..scheduling.master import master_groups

        groups = master_groups(served, scheduler_name)
        found = collect(seen_in_snapshot(groups, snapshot.nodes_by_name), now=now, grace=PREEMPTION_GRACE)
        master_queue, master_running = found.queue, found.running
        where = {gid: group.namespace for gid, group in found.groups.items()}
        for repair in found.repairs:
            why = ((f"bound to node(s) {', '.join(repair.lost)} not in the snapshot" if repair.lost else "partly bound")
                   if isinstance(repair, Repair) else "preempted and still there past the preemption grace")
            repairs.append(f"the master's {repair.group.id} is {why}: the pass that serves it deletes its pods first "
                           "(Determined restarts it), so it is left out of this plan")
    planned, plan = pass_plan(snapshot, queue, policy, namespace, master_queue=master_queue,
                              master_running=master_running, now=now)
    running = {g.id: g for g in running_groups(snapshot.pods)}
    running.update((g.id, g) for g in master_running)
    return Planned(plan, planned, running, where, tuple(repairs))


def announce_searches(entries: Sequence[Entry]) -> None:
    """One line per search: how many trials it runs at once and that each is planned as its own gang."""
    for entry in entries:
        if entry.search is not None and entry.trial == 1:
            search = entry.search
            output.message(f"{entry.experiment.name}: {search.searcher} search, {search.trials} trials at once "
                           f"({search.why}); each trial is its own gang")


def report(entries: Sequence[Entry], plan: Plan, running: dict[str, RunningGroup]) -> list[dict[str, Any]]:
    """The `-o json` records, in argument order: the line, and `why` with the reason as data."""
    records: list[dict[str, Any]] = []
    for entry in entries:
        group = entry.group
        trial = {"trial": entry.trial, "trials": entry.search.trials} if entry.search is not None else {}
        if group is None:
            assert entry.rejected is not None
            records.append({"name": entry.experiment.name, **trial, "status": "rejected",
                            "reason": describe(entry.rejected), "why": to_dict(entry.rejected), "pods": []})
            continue
        status = plan.status(group.id)
        reason = plan.reason(group.id)
        text = describe(reason) if reason is not None else ""
        waits = plan.preempting.get(group.id, ())
        if waits:
            evicted = [_name(running, v) for v in waits if v in plan.victims]
            leaving = [_name(running, v) for v in waits if v not in plan.victims]
            text = "; ".join(([reclaiming(plan.reclaims[group.id])] if plan.reclaims.get(group.id) else [])
                             + ([f"after preempting {', '.join(evicted)}"] if evicted else [])
                             + ([f"once terminating {', '.join(leaving)} have left"] if leaving else []))
        pods = [{"name": pod, "node": node, "slots": group.slots_per_pod}
                for pod, node in plan.placements.get(group.id, ())]
        record: dict[str, Any] = {"name": entry.experiment.name, **trial, "status": status, "reason": text,
                                  "pods": pods}
        if reason is not None:
            record["why"] = to_dict(reason)
        if plan.reclaims.get(group.id):
            record["reclaims"] = [{"from": item.lender, "resource": item.resource,
                                   "amount": format_milli(item.resource, item.amount)}
                                  for item in plan.reclaims[group.id]]
        if waits:
            record["waits_for"] = [{"group": v, "experiment": running[v].experiment if v in running else v,
                                    "victim": v in plan.victims} for v in waits]
        records.append(record)
    return records


def _label(record: dict[str, Any]) -> str:
    return f"{record['name']} (trial {record['trial']}/{record['trials']})" if "trial" in record else record["name"]


def _name(running: dict[str, RunningGroup], gid: str) -> str:
    group = running.get(gid)
    return f"{group.experiment} (priority {group.priority})" if group is not None else gid


def print_table(records: Sequence[dict[str, Any]], plan: Plan, victims: Sequence[tuple[str, ...]]) -> None:
    placed = [r for r in records if r["status"] == "placed"]
    if placed:
        rows = []
        for record in placed:
            for i, pod in enumerate(record["pods"]):
                rows.append([_label(record) if i == 0 else "", pod["name"], pod["node"], pod["slots"]])
        output.table(["experiment", "pod", "node", "slots"], rows, title="Placed (all pods start together)")
    others = [r for r in records if r["status"] != "placed"]
    if others:
        if placed:
            print()
        output.table(["experiment", "status", "reason"],
                     [[_label(r), r["status"], r["reason"]] for r in others], title="Not placed")
    if victims:
        print()
        output.table(["group", "experiment", "namespace", "user", "priority", "pods", "for"], victims,
                     title="Preempted (whole groups, returned to the queue)")
    output.message(outcome(records, plan))


def outcome(records: Sequence[dict[str, Any]], plan: Plan) -> str:
    """`2 placed, 1 queued, 0 rejected; 1 running group(s) preempted`."""
    counts = {status: sum(r["status"] == status for r in records)
              for status in ("placed", "queued", "rejected")}
    return (", ".join(f"{n} {status}" for status, n in counts.items())
            + (f"; {len(plan.victims)} running group(s) preempted" if plan.victims else ""))


def plan_namespace() -> str:
    """The queue `plan` plans for: -n, else HELM_NAMESPACE, else default (no kubeconfig is read)."""
    from .options import current

    return current().namespace or os.environ.get("HELM_NAMESPACE") or "default"



def run(experiments: Sequence[Path], snapshot_file: Path, values: Sequence[str | Path] | None,
        sets: Sequence[str] | None, set_strings: Sequence[str] | None, *, preemption: bool, autoscaling: bool,
        user: str | None, output_format: OutputFormat, map_request: MapRequest | None = None,
        show_map: bool = False, topology_key: str = ZONE, require_topology: bool = False,
        extended_resource_toleration: bool | None = None, policy_file: Path | None = None,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> None:
    """Load everything, plan one pass, print the answer (with `map_request`: the map after the plan)."""
    stdin_once(experiments, snapshot_file, values, policy_file)
    namespace = plan_namespace()
    with no_gc():
        reader = ServedReader(scheduler_name or None)  # the master's pods read as a pass reads them
        with timed(f"reading the snapshot {snapshot_file}"):
            snapshot = load_snapshot(snapshot_file, read_pod=reader)
        require_nodes(snapshot, str(snapshot_file))
        for warning in snapshot_warnings(snapshot, str(snapshot_file)):
            output.warning(warning)
        with timed("reading the settings and experiments"):
            settings = plan_settings(values, sets, set_strings, snapshot)
            submitter = user or os.environ.get("USER") or "unknown"
            now = datetime.now(UTC).replace(microsecond=0)
            entries = build_entries(read_experiments(experiments, settings.version), settings, submitter, now,
                                    namespace)
        announce_searches(entries)
        policy = Policy(preemption=preemption or settings.default_scheduler == "preemption",
                        autoscaling=autoscaling, topology_key=topology_key, topology_required=require_topology,
                        extended_resource_toleration=extended_resource_toleration)
        if policy_file is not None:
            policy = with_policy_file(policy, policy_file)
        for line in unnamed_workspaces(policy.queues, (e.experiment.workspace for e in entries)):
            output.warning(line)
        queue = [e.group for e in entries if e.group is not None]
        with timed(f"scheduling pass ({len(snapshot.nodes)} nodes, {len(queue)} groups)"):
            # just submitted: no reservation for these; the master's groups have waited since their pods were made
            planned = plan_pass(snapshot, reader.served, queue, policy, namespace, now=now,
                                scheduler_name=scheduler_name)
        result = planned.plan
        running = planned.running
        omap = None
        if map_request is not None:
            from .nodemap import occupancy

            with timed("the map"):
                omap = occupancy(snapshot, settings, map_request, plan=result, queue=planned.queue,
                                 extended_resource_toleration=extended_resource_toleration)
    for warning in (*planned.repairs, *result.warnings):
        output.warning(warning)
    if policy.preemption:
        elsewhere = victims_elsewhere(snapshot, namespace, result, entries)
        if elsewhere:
            output.warning(elsewhere)
    show(entries, result, running, output_format, namespace, omap if show_map else None,
         summary=map_request.summary if map_request is not None else None, where=planned.where)
    if omap is not None and map_request is not None:
        from .mapview import write_pictures

        write_pictures(omap, svg=map_request.svg, html=map_request.html, summary=map_request.summary,
                       after_plan=True, notes=notes(report(entries, result, running)), title_text="det-k8s plan")


def victims_elsewhere(snapshot: Snapshot, namespace: str, result: Plan, entries: Sequence[Entry]) -> str | None:
    """When a waiting group found nothing to evict in the queue planned but lower-priority det-k8s groups run in
    other namespaces: one line naming the queue planned, those groups and the `-n` that would consider them."""
    waiting = [e.group for e in entries if e.group is not None and e.group.id in result.waiting
               and result.waiting[e.group.id].preemption in ("none-lower", "not-enough")]
    if not waiting:
        return None
    top = max(g.priority for g in waiting)
    found: dict[str, list[RunningGroup]] = {}
    for ns in sorted({pod.namespace for pod in snapshot.pods if pod.namespace != namespace}):
        lower = [g for g in running_in(snapshot, ns) if g.priority < top and not g.terminating and g.preemptible]
        if lower:
            found[ns] = lower
    if not found:
        return None
    where = "; ".join(f"namespace {ns}: " + ", ".join(f"{g.experiment} (priority {g.priority})" for g in groups)
                      for ns, groups in found.items())
    hint = " or ".join(f"-n {ns}" for ns in found)
    return (f"planned for the queue of namespace {namespace} (-n, HELM_NAMESPACE, else default), whose groups alone "
            f"may be preempted; lower-priority det-k8s groups run in other namespaces ({where}): plan with {hint} "
            "to plan for their queue")


def notes(records: Sequence[dict[str, Any]]) -> list[Any]:
    """The lines under a plan's map: every group not placed, and every placement that preempts."""
    from .mapview import Note

    return [Note(_label(r), r["status"], r["reason"]) for r in records if r["status"] != "placed" or r["reason"]]


def show(entries: Sequence[Entry], result: Plan, running: dict[str, RunningGroup],
         output_format: OutputFormat, namespace: str = "default", omap: OccupancyMap | None = None,
         summary: bool | None = None, where: Mapping[str, str] | None = None) -> None:
    """JSON/YAML records, or the tables a person reads: who runs where, who waits and why, who is evicted.

    With `omap`, the map after the plan replaces the tables (and joins the records under `map`). `where`: the
    namespace of each of the master's groups (a victim of the master's may be of another namespace)."""
    where = where or {}
    records = report(entries, result, running)
    by_group = {e.group.id: e.label for e in entries if e.group is not None}
    preemptor: dict[str, list[str]] = {}
    for g, waits in result.preempting.items():
        for victim in waits:
            if victim in result.victims:
                preemptor.setdefault(victim, []).append(by_group.get(g, g))
    if output_format is not OutputFormat.table:
        output.data({"namespace": namespace, "experiments": records,
                     "victims": [{"group": v, "experiment": running[v].experiment if v in running else v,
                                  "namespace": where.get(v, namespace),
                                  "user": running[v].user if v in running else "",
                                  "priority": running[v].priority if v in running else None,
                                  "pods": len(running[v].pods) if v in running else 0,
                                  "for": preemptor.get(v, [])} for v in result.victims],
                     "warnings": list(result.warnings),
                     **({"map": omap.to_dict()} if omap is not None else {})}, output_format)
        return
    if omap is not None:
        from .mapview import show as show_map

        show_map(omap, summary=summary, after_plan=True, notes=notes(records))
        output.message(outcome(records, result))
        return
    victims = [(v, running[v].experiment, where.get(v, namespace), running[v].user, str(running[v].priority),
                str(len(running[v].pods)), ", ".join(preemptor.get(v, []))) for v in result.victims if v in running]
    print_table(records, result, victims)
