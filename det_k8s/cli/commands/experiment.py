"""`det-k8s experiment create|list|describe|kill|pause|resume`: the gang-scheduled queue in the cluster.

`create` submits an experiment and runs one scheduling pass at once, so a group that fits starts
right away (all its pods together) without a separate scheduler loop; a group that does not fit
waits in the queue, and `list`/`describe` say why.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import OperationTimeout, Unschedulable, UsageError
from ...tools.duration import HELP as DURATION_HELP
from .. import output
from ..inputs import SetOpt, SetStringOpt, ValuesOpt, read_text, stdin_once
from ..options import OutputOpt, cluster_pod_spec_version, current, with_global_options
from ..output import OutputFormat

if TYPE_CHECKING:
    from ...kube.api import KubeApi
    from ...live.queue import QueueEntry
    from ...live.scheduler import DryCluster, PassReport
    from ...scheduling.model import Plan

app = typer.Typer(name="experiment", no_args_is_help=True,
                  help="Submit experiments to det-k8s's gang scheduler and follow them in its queue.")

IdArg = Annotated[str, typer.Argument(metavar="ID", help="Experiment id (or a unique prefix of it).",
                                      show_default=False)]
TimeoutOpt = Annotated[str, typer.Option("--timeout", metavar="DURATION",
                                         help=f"With --wait: how long to wait, {DURATION_HELP}.")]


def _print_pass(report: PassReport, focus: str | None = None) -> None:
    """One line per thing a pass did; with `focus`, only what concerns that group and its victims."""
    for gid, placement in report.placed.items():
        if focus in (None, gid):
            nodes = ", ".join(sorted({node for _, node in placement}))
            if gid in report.native:
                output.success(f"{gid}: released, {len(placement)} pod(s) handed to kube-scheduler together as pod "
                               f"group {report.native[gid].partition('/')[2]} (gang of {len(placement)}; room "
                               f"planned on {nodes})")
            else:
                output.success(f"{gid}: placed, {len(placement)} pod(s) started together on {nodes}")
    for victim, by in report.preempted.items():
        if focus in (None, by, victim):
            output.warning(f"{victim}: preempted by {by}: its pods are deleted and it is back in the queue")
    for victim, by in report.marked.items():
        if focus in (None, by, victim):
            output.warning(f"{victim}: preempted by {by}: marked determined-preemption; Determined checkpoints and "
                           "stops it")
    for gid, why in report.repaired.items():
        if focus in (None, gid):
            output.warning(f"{gid}: {why}")
    for gid, why in report.requeued.items():
        if focus in (None, gid):
            output.warning(f"{gid}: {why}")
    for gid in report.completed:
        if focus in (None, gid):
            output.message(f"{gid}: completed")
    for gid, why in report.failed.items():
        if focus in (None, gid):
            output.warning(f"{gid}: failed: {why}")
    if focus is None:
        for gid, why in report.waiting.items():
            output.message(f"{gid}: waiting: {why}")
    for problem in report.problems:
        output.warning(problem)


def _queue_positions(plan: Plan) -> dict[str, int]:
    waiting = [gid for gid in plan.order if gid in plan.waiting or gid in plan.rejected]
    return {gid: i + 1 for i, gid in enumerate(waiting)}


def _scheduler(api: KubeApi, policy: Any, user: str) -> Any:
    from ...live.scheduler import LiveScheduler
    from ..live import holder_id

    return LiveScheduler(api, api.namespace, policy, holder_id(user))


EXPERIMENT_KEYS = frozenset(("entrypoint", "searcher", "hyperparameters", "resources", "environment",
                             "max_restarts", "checkpoint_storage", "min_validation_period", "records_per_epoch",
                             "bind_mounts", "data", "scheduling_unit", "workspace", "project"))


def experiment_argument(file: Path | None, values: list[str] | None) -> tuple[Path, list[str] | None]:
    """FILE, or (kubectl's habit) the `-f` file that is an experiment rather than settings, with a note."""
    from ...errors import DetK8sError
    from ...safe_read import load_yaml
    from ...settings.schema import SCHEMA

    if file is not None:
        return file, values
    usage = "experiment create FILE [-f SETTINGS]: -f names settings files here, as for install"
    for given in reversed(values or []):
        if given == "-" or "://" in given:
            continue
        try:
            data = load_yaml(read_text(Path(given), "experiment file"), given)
        except DetK8sError:
            continue
        keys = set(data) if isinstance(data, dict) else set()
        if keys & EXPERIMENT_KEYS and not keys & set(SCHEMA):
            output.message(f"note: -f {given} is an experiment, taken as FILE ({usage})")
            rest = [v for v in values or [] if v != given]
            return Path(given), rest or None
    raise UsageError("missing the experiment file", hint=f"det-k8s {usage}")


@app.command("create")
@with_global_options
def create(
    file: Annotated[Path | None, typer.Argument(
        metavar="FILE", show_default=False,
        help="Experiment config (Determined's keys); - reads stdin. kubectl's `-f FILE` works too when FILE is an "
        "experiment (not settings).")] = None,
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    priority: Annotated[int | None, typer.Option("--priority", min=1, max=99, metavar="N",
                                                 help="Override resources.priority (higher runs first).")] = None,
    user: Annotated[str | None, typer.Option("--user", metavar="NAME",
                                             help="Submit as this user (fair share; default: you).")]
    = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the experiment's pods are placed.")] = False,
    timeout: TimeoutOpt = "10m",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would happen now; change nothing.")] = False,
    autoscaling: Annotated[bool, typer.Option(
        "--autoscaling", help="Nodes will be added (by you, or a node-pool schedule): queue a group larger than the "
        "cluster instead of rejecting it. det-k8s creates no pod until all fit, so it does not itself trigger a "
        "pod-driven cluster autoscaler.")]
    = False,
    placement: Annotated[str | None, typer.Option(
        "--placement", metavar="auto|native|det-k8s",
        help="Who places the pods once det-k8s releases the group: kube-scheduler's own gang scheduling (native: a "
             "PodGroup of all its pods; needs the cluster's PodGroup API), det-k8s (pods pinned to the planned "
             "nodes), or native where the cluster serves it (auto). Default: the policy's (scheduler policy "
             "--placement).")] = None,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Submit an experiment: its pods start all together when they all fit, otherwise it waits in the queue."""
    from ...errors import ExperimentError
    from ...kube.snapshot import read_snapshot
    from ...live.lease import LeaseHeld, utcnow
    from ...live.queue import QUEUED, RUNNING, QueueStore
    from ...live.scheduler import dry_cluster, dry_plan
    from ...scheduling.experiments import parse_experiment
    from ...scheduling.explain import describe
    from ...scheduling.groups import build_group
    from ...scheduling.model import PLACEMENTS
    from ...scheduling.queues import unnamed_workspaces
    from ...settings.podspec import DEFAULT, checking_against
    from ...tools.duration import format_duration, parse_duration
    from ..live import current_user, effective_policy, entry_for, new_group_id, now, scheduling_settings

    if placement is not None and placement not in PLACEMENTS:
        raise UsageError(f"--placement {placement!r}: expected {', '.join(PLACEMENTS)}")
    seconds = parse_duration(timeout)
    file, values = experiment_argument(file, values)
    stdin_once(file, values)
    text = read_text(file, "experiment file")
    source, default_name = ("stdin", "experiment") if str(file) == "-" else (str(file), file.stem)
    api = current().connect()
    cluster = cluster_pod_spec_version(api) or DEFAULT
    with checking_against(cluster):  # pod specs against the cluster's own Kubernetes version
        settings = scheduling_settings(api, values, set_, set_string)  # -f, or the installed master's: its release
        parsed = parse_experiment(text, source, default_name=default_name, version=settings.version)
    for warning in parsed.warnings:
        output.problem(warning, stream=sys.stderr)
    if parsed.errors:
        raise ExperimentError(parsed.errors)
    experiment = parsed.get()
    if priority is not None:
        experiment = replace(experiment, priority=priority)
    refuse_searches(experiment.config, str(settings.app_version), source)
    who = current_user(user)
    submitted, sequence = now()
    group = build_group(experiment, settings, group_id=new_group_id(), user=who, submitted_at=submitted,
                        sequence=sequence, namespace=api.namespace)  # raises Unschedulable: nothing written
    store = QueueStore(api, api.namespace)
    policy = effective_policy(api, settings)
    for line in unnamed_workspaces(policy.queues, [experiment.workspace]):
        output.warning(line)
    if autoscaling:
        policy = replace(policy, autoscaling=True)
    with output.spinner("reading the cluster"):
        # whether it can ever fit does not depend on the master's groups; what --dry-run shows does
        seen = dry_cluster(api) if dry_run else read_snapshot(api)
        plan = dry_plan(seen, store.entries([QUEUED, RUNNING]), policy, extra=[group], now=utcnow(),
                        namespace=api.namespace)
    if group.id in plan.rejected:
        raise Unschedulable(f"{experiment.name} can never run here: {describe(plan.rejected[group.id])}",
                            hint="use fewer slots, or --autoscaling if nodes will be added")
    if dry_run:
        _show_dry_run(group.id, experiment.name, plan, output_format)
        return
    scheduler = _scheduler(api, policy, who)
    if (placement or policy.placement) == "native" and scheduler.native_version() is None:
        from ...errors import ClusterError
        from ...live.native import VERSIONS

        raise ClusterError(f"placement native: the cluster serves no PodGroup API (scheduling.k8s.io "
                           f"{' or '.join(VERSIONS)} podgroups); nothing was submitted",
                           hint="an admin enables it (feature gate GenericWorkload on kube-apiserver, kube-scheduler "
                                "and kube-controller-manager, --runtime-config=scheduling.k8s.io/v1beta1=true), or "
                                "use --placement auto or det-k8s")
    # Nothing is written to the queue before the Lease is held: a client that may not schedule (no RBAC on
    # leases, another Lease location in use) leaves no entry behind, and the first pass runs under the same hold.
    with scheduler.lease().held(wait=scheduler.lease_wait):
        entry = store.add(replace(entry_for(experiment, text, settings, group, api.namespace),
                                  placement_mode=placement or ""))
        output.message(f"submitted {experiment.name} as {entry.id} ({group.size} pod(s) x {group.slots_per_pod} "
                       f"slot(s), priority {group.priority}, user {who})")
        first: PassReport | None = scheduler.run_pass()
    deadline = time.monotonic() + seconds
    while True:
        try:
            report = first or scheduler.run_pass()
            first = None
            _print_pass(report, focus=entry.id)
            _require_cleared(report, entry.id)
        except LeaseHeld:
            output.message("another det-k8s client is scheduling right now; the queue keeps the experiment")
        entry = store.get(entry.id)
        if entry.state == RUNNING or not wait or entry.state != QUEUED:
            break
        if time.monotonic() >= deadline:
            raise OperationTimeout(f"{entry.id} is still queued after {format_duration(seconds)}: {entry.reason}",
                                   hint="it stays in the queue; `det-k8s experiment describe` says why it waits")
        with output.spinner(f"{entry.id} waiting: {entry.reason}"):
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
    _show_entry_state(entry, output_format)


def refuse_searches(config: Any, app_version: str, source: str) -> None:
    """A search of several trials is Determined's to run, at once or one after another: det-k8s has no searcher to
    give each trial its hyperparameters and start the next, so it would run copies of one trial, or only the first.
    `det-k8s plan` plans such a search, trial by trial."""
    from ...errors import DetK8sError
    from ...scheduling.searchers import total_trials, trials_at_once

    hint = ("submit the search to Determined (det experiment create); `det-k8s plan` shows where its trials would "
            "run, each as its own gang")
    why_not = "det-k8s runs one trial per experiment and has no searcher to give each its hyperparameters"
    search = trials_at_once(config, app_version)
    if search.trials > 1:
        raise DetK8sError(f"{source}: searcher {search.searcher} runs {search.trials} trials at once ({search.why}); "
                          f"{why_not}", hint=hint)
    total, why = total_trials(config)
    if total is None:
        raise DetK8sError(f"{source}: searcher {search.searcher} is a search ({why}); {why_not}", hint=hint)
    if total > 1:
        raise DetK8sError(f"{source}: searcher {search.searcher} runs {total} trials ({why}), one at a time; "
                          f"{why_not}", hint=hint)
def _require_cleared(report: PassReport, group_id: str | None = None) -> None:
    """A creation whose rollback is not complete ends the command with exit 1, naming what remains."""
    from ...errors import DetK8sError

    found = {gid: text for gid, text in report.uncleared.items() if group_id in (None, gid)}
    if found:
        raise DetK8sError("; ".join(found.values()))


def _sweep(api: KubeApi, entries: list[QueueEntry]) -> None:
    """Delete pods of recorded failed creations in the namespace (live/creation_records.py), saying so."""
    from ...live.create import sweep_failed

    for swept in sweep_failed(api, api.namespace, entries):
        output.warning(swept.message)


def _show_dry_run(group_id: str, name: str, plan: Plan, output_format: OutputFormat) -> None:
    from ...scheduling.explain import describe

    placement = plan.placements.get(group_id, ())
    reason = plan.reason(group_id)
    preempts = list(plan.preempting.get(group_id, ()))
    record = {"name": name, "status": plan.status(group_id), "reason": describe(reason) if reason else "",
              "pods": [{"name": pod, "node": node} for pod, node in placement], "preempts": preempts}
    if output_format is not OutputFormat.table:
        output.data(record, output_format)
        return
    if placement:
        extra = f" after preempting {', '.join(preempts)}" if preempts else ""
        output.message(f"dry run: {name} would start now{extra}, all pods together:")
        output.table(["pod", "node"], [[pod, node] for pod, node in placement])
    else:
        position = _queue_positions(plan).get(group_id)
        output.message(f"dry run: {name} would wait in the queue at position {position}: {record['reason']}")


def _show_entry_state(entry: QueueEntry, output_format: OutputFormat) -> None:
    if output_format is not OutputFormat.table:
        output.data(_entry_data(entry), output_format)
    elif entry.state == "queued":
        output.message(f"{entry.id} is queued" + (f": {entry.reason}" if entry.reason else
                                                  "; the next scheduling pass will consider it"))


def _entry_data(entry: QueueEntry, position: int | None = None, reason: str | None = None) -> dict[str, Any]:
    group = entry.group or {}
    pods = group.get("pods") or []
    return {"id": entry.id, "name": entry.experiment, "user": entry.user, "priority": entry.priority,
            "state": entry.state, "position": position, "slots": int(group.get("slots", 0)), "pods": len(pods),
            "submittedAt": entry.submitted_at, "attempts": entry.attempts, "admissionRejections": entry.rejections,
            "reason": reason if reason is not None else entry.reason, "placement": dict(entry.placement),
            "placedBy": ("kube-scheduler" if entry.pod_group else "det-k8s") if entry.state == "running" else None,
            "podGroup": entry.pod_group.partition("/")[2] or None, "events": list(entry.events)}


def _fresh_plan(api: KubeApi, entries: list[QueueEntry], cluster: DryCluster | None = None) -> Plan:
    """What the next pass will do (the master's groups in it while a loop serves them), writing nothing."""
    from ...live.lease import utcnow
    from ...live.queue import QUEUED, RUNNING
    from ...live.scheduler import dry_cluster, dry_plan
    from ..live import effective_policy

    with output.spinner("reading the cluster"):
        return dry_plan(cluster if cluster is not None else dry_cluster(api),
                        [e for e in entries if e.state in (QUEUED, RUNNING)],
                        effective_policy(api), now=utcnow(), namespace=api.namespace)


@app.command("list")
@with_global_options
def list_(
    all_: Annotated[bool, typer.Option("--all", help="Include completed, failed and killed experiments.")]
    = False,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Experiments in the queue: state, queue position, slots, age, and why each waits."""
    from ...live.queue import ACTIVE_STATES, QueueStore
    from ...scheduling.explain import describe
    from ..live import age

    api = current().connect()
    store = QueueStore(api, api.namespace)
    everything = store.entries()  # failed entries too: their creations' pods are swept whatever is shown
    entries = [e for e in everything if all_ or e.state in ACTIVE_STATES]
    for message in store.skipped:
        output.warning(message)
    _sweep(api, everything)
    plan = _fresh_plan(api, entries)
    positions = _queue_positions(plan)
    records = []
    for entry in entries:
        fresh = plan.reason(entry.id) if entry.state == "queued" else None
        records.append(_entry_data(entry, positions.get(entry.id),
                                   describe(fresh) if fresh else _reclaiming(plan, entry.id, entry.state)))
    if output_format is not OutputFormat.table:
        output.data({"experiments": records}, output_format)
        return
    rows = [[r["id"], r["name"], r["user"], r["state"], r["position"] or "-", r["slots"], r["priority"],
             age(r["submittedAt"]), _short(r["reason"])] for r in records]
    output.table(["id", "name", "user", "state", "position", "slots", "priority", "age", "reason"], rows)
    if not records:
        output.message(f"no experiments in namespace {api.namespace}")


def _reclaiming(plan: Plan, group_id: str, state: str) -> str | None:
    """A queued experiment the next pass places by reclaiming: what it waits to take back, from whom (None when it
    does not, so the entry's own reason stands)."""
    from ...scheduling.explain import reclaiming

    lent = plan.reclaims.get(group_id)
    if state != "queued" or not lent:
        return None
    return reclaiming(lent, plan.preempting.get(group_id, ()))


def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command("describe")
@with_global_options
def describe_(experiment_id: IdArg, output_format: OutputOpt = OutputFormat.table) -> None:
    """One experiment: where its pods run, or exactly why it waits and who is ahead of it."""
    from ...kube.kinds import PODS
    from ...live.queue import QUEUED, QueueStore
    from ...live.scheduler import dry_cluster
    from ...scheduling import labels as L
    from ...scheduling.explain import describe
    from ...scheduling.occupancy import CellKind
    from ..nodemap import group_map

    api = current().connect()
    store = QueueStore(api, api.namespace)
    entry = store.find(experiment_id)
    everything = store.entries()
    _sweep(api, everything)
    with output.spinner("reading the cluster"):
        cluster = dry_cluster(api)
    snapshot = cluster.snapshot
    plan = _fresh_plan(api, everything, cluster)
    rows = group_map(snapshot, entry.id, entry.group, plan)
    reason = plan.reason(entry.id) if entry.state == QUEUED else None
    data = _entry_data(entry, _queue_positions(plan).get(entry.id),
                       describe(reason) if reason else _reclaiming(plan, entry.id, entry.state))
    pods = api.list(PODS, api.namespace, label_selector=f"{L.GROUP}={entry.id}")
    from ...cluster.read import pod_from_object

    read = [pod_from_object(p) for p in pods]  # node: where it is bound, or pinned to until kube-scheduler binds it
    data["pods"] = [{"name": p.name, "node": p.node, "bound": p.node_name is not None, "phase": p.phase}
                    for p in read]
    unbound = [p for p in read if p.node_name is None and not p.deleting]
    if entry.state == "running" and entry.pod_group and unbound:  # kube-scheduler's word, read now
        from ...live.native import unplaced_reason

        data["reason"] = unplaced_reason(api, api.namespace, entry.pod_group, unbound) or data["reason"]
    if reason is not None:
        data["ahead"] = list(reason.ahead)
    if rows is not None:
        data["map"] = rows.to_dict()
    if output_format is not OutputFormat.table:
        output.data(data, output_format)
        return
    output.key_values({"ID": entry.id, "Experiment": entry.experiment, "User": entry.user,
                       "Priority": entry.priority, "State": entry.state,
                       "Slots": f"{data['slots']} ({len(entry.pods)} pod(s))", "Submitted": entry.submitted_at,
                       "Attempts": entry.attempts,
                       **({"Admission rejections": entry.rejections} if entry.rejections else {}),
                       **({"Position": data["position"]} if data["position"] else {}),
                       **({"Placed by": f"kube-scheduler (pod group {data['podGroup']})"} if data["podGroup"]
                          and entry.state == "running" else {}),
                       **({"Why": data["reason"]} if data["reason"] else {})})
    if data["pods"]:
        print()
        output.table(["pod", "node", "phase"], [[p["name"], p["node"] or "-", p["phase"]] for p in data["pods"]])
        known = {node.name for node in snapshot.nodes}
        for gone in sorted({p["node"] for p in data["pods"] if p["node"] and p["node"] not in known}):
            output.warning(f"node {gone} is not in the cluster (deleted or replaced?): the pods bound or pinned to it "
                           "cannot run there")
    if rows is not None:
        from ..mapview import show

        print()
        show(rows, summary=False, after_plan=bool(rows.count(CellKind.PLANNED) or rows.count(CellKind.VICTIM)))
    if entry.events:
        output.text("\nEvents:\n" + "".join(f"  {output.printable(str(event))}\n" for event in entry.events))


def _change(experiment_id: str, action: str) -> None:
    """kill, pause or resume under the scheduling Lease, so no pass races the change.

    The new state is written first and the pods deleted after: if this is interrupted in between,
    the next pass finds a killed or paused entry with pods left and removes them, instead of
    finding a running entry without pods and starting it again.
    """
    from ...kube.kinds import PODS
    from ...live.lease import SchedulingLease, lease_namespace
    from ...live.queue import FAILED, KILLED, PAUSED, QUEUED, RUNNING, QueueStore
    from ...live.submit import delete_group
    from ...scheduling import labels as L
    from ..live import current_user, holder_id

    api = current().connect()
    store = QueueStore(api, api.namespace)
    lease = SchedulingLease(api, lease_namespace(), holder_id(current_user(None)))
    with lease.held(wait=15):
        entry = store.find(experiment_id)
        allowed = {"kill": (QUEUED, RUNNING, PAUSED, FAILED), "pause": (QUEUED, RUNNING), "resume": (PAUSED,)}[action]
        if entry.state not in allowed:
            raise UsageError(f"cannot {action} {entry.id}: it is {entry.state}")
        state = {"kill": KILLED, "pause": PAUSED, "resume": QUEUED}[action]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        store.update(entry.with_event(f"{stamp} {action} by {current_user(None)}", state=state, reason="",
                                      placement={}))
        if action in ("kill", "pause"):  # every pod of the group, whatever state the entry was in
            pods = [str(p["metadata"]["name"])
                    for p in api.list(PODS, api.namespace, label_selector=f"{L.GROUP}={entry.id}")]
            service = str((entry.service or {}).get("metadata", {}).get("name") or "") or None
            leftovers = delete_group(api, api.namespace, pods, service, pod_group=entry.pod_group or None)
            if leftovers:
                output.warning(f"could not delete {', '.join(leftovers)}; run the command again to retry")
    output.success(f"{entry.id}: {state}")


@app.command("kill")
@with_global_options
def kill(
    experiment_id: IdArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accepted as other destructive commands take it: kill "
                                      "never asks (naming the experiment is the consent).")] = False,
) -> None:
    """Stop an experiment for good: its pods are deleted and it leaves the queue."""
    del yes  # kill does what it is asked at once, as `det experiment kill` does
    _change(experiment_id, "kill")


@app.command("pause")
@with_global_options
def pause(experiment_id: IdArg) -> None:
    """Stop an experiment's pods (they get the grace period to checkpoint) and keep it out of scheduling."""
    _change(experiment_id, "pause")


@app.command("resume")
@with_global_options
def resume(experiment_id: IdArg) -> None:
    """Put a paused experiment back in the queue (at its original submission position) and schedule."""
    from ...live.lease import LeaseHeld
    from ..live import current_user, effective_policy

    _change(experiment_id, "resume")
    api = current().connect()
    try:
        report = _scheduler(api, effective_policy(api), current_user(None)).run_pass()
    except LeaseHeld:
        output.message("another det-k8s client is scheduling; the next pass will consider it")
        return
    _print_pass(report)
    _require_cleared(report)
