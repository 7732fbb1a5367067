"""`det-k8s doctor`: find partly-started groups (the deadlock the documents warn about) and queue trouble."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import DetK8sError, Forbidden
from ...labels import APP_INSTANCE, APP_NAME, QUEUE_ENTRY
from .. import output
from ..options import OutputOpt, current, with_global_options
from ..output import OutputFormat

if TYPE_CHECKING:
    from ...cluster.model import Snapshot
    from ...kube.api import KubeApi
    from ...live.queue import QueueEntry
    from ...scheduling.model import Policy


def _failed_creations(api: KubeApi, namespace: str, entries: list[QueueEntry]) -> list[dict[str, Any]]:
    """Pods of failed creations recorded in the namespace's queue (live/creation_records.py): deleted, and reported."""
    from ...live.create import sweep_failed

    return [{"pod": s.pod.name, "namespace": namespace, "group": s.pod.group, "attempt": s.pod.attempt,
             "deleted": s.deleted, "message": s.message} for s in sweep_failed(api, namespace, entries)]


def _unfinished(snapshot: Snapshot, namespace: str, entries: list[QueueEntry], prefix: str) -> list[dict[str, Any]]:
    """Creations recorded as under way (intent records, live/creation_records.py): in flight now, or their process died.
    Not deleted here (only the holder of the scheduling Lease may), reported."""
    from ...live.creation_records import ATTEMPT_LABEL, unfinished
    from ...scheduling import labels as L

    out = []
    for entry, mark in unfinished(entries):
        attempt = str(mark.get("attempt"))
        present = sorted(p.name for p in snapshot.pods if p.namespace == namespace
                         and p.labels.get(L.GROUP) == entry.id and p.labels.get(ATTEMPT_LABEL) == attempt)
        found = f"{len(present)} of its {len(mark.get('pods') or ())} pods exist ({', '.join(present)})" if present \
            else "none of its pods exists"
        out.append({"group": prefix + entry.id, "attempt": attempt, "since": str(mark.get("at", "")), "present": present,
                    "message": f"{prefix}{entry.id}: a creation begun at {mark.get('at')} (attempt {attempt}) did not "
                               f"finish: {found}; unless it is still under way, its process stopped, and the next "
                               "det-k8s pass under the scheduling lease deletes what it left (det-k8s scheduler run "
                               "--once)"})
    return out


def _queue_namespaces(api: KubeApi, all_namespaces: bool) -> list[str]:
    """The namespace of the command, and with -A every namespace holding a det-k8s queue entry (one list call)."""
    if not all_namespaces:
        return [api.namespace]
    from ...kube.kinds import CONFIGMAPS

    found = {api.namespace}
    try:
        objects = list(api.iter_list(CONFIGMAPS, all_namespaces=True, label_selector=QUEUE_ENTRY))
    except Forbidden as exc:
        output.warning(f"cannot list queue entries in every namespace, so only namespace {api.namespace}'s are "
                       f"checked: {exc.message}")
        objects = []
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        if isinstance(namespace, str) and namespace:
            found.add(namespace)
    return sorted(found)


def _scheduler_components(api: KubeApi) -> list[dict[str, str]]:
    """Deployments running a scheduler (`--scheduler-name NAME`, or a known scheduler image), and the name each
    serves ("" when not on its command line)."""
    from ...live.rivals import scheduler_deployments

    return [{"deployment": name, "serves": serves} for name, serves in scheduler_deployments(api)]


def _det_k8s_schedulers(api: KubeApi, all_namespaces: bool) -> list[tuple[str, list[Any], list[Any]]]:
    """det-k8s's scheduler pods (the bundled chart's, or `scheduler manifest`'s), by Deployment: its name
    (namespace/name with -A), their states, and what keeps them from running (release/diagnose.py)."""
    from ...chart.deploy import NAME, chart_name
    from ...kube.kinds import PODS
    from ...release.diagnose import pod_state, scheduler_findings
    from ...settings.schema import DEFAULT_SCHEDULER_IMAGE

    try:
        pods = api.list(PODS, api.namespace, all_namespaces=all_namespaces, label_selector=f"{APP_NAME}={NAME}")
    except Forbidden as exc:
        output.warning(f"cannot list pods, so det-k8s's scheduler pods are not checked: {exc.message}")
        return []
    by_deployment: dict[str, list[Any]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        instance = (meta.get("labels") or {}).get(APP_INSTANCE)
        name = chart_name(instance) if instance else NAME
        by_deployment.setdefault(f"{meta.get('namespace')}/{name}" if all_namespaces else name, []).append(
            pod_state(pod))
    return [(name, states, scheduler_findings(name.rpartition("/")[2], states, DEFAULT_SCHEDULER_IMAGE))
            for name, states in sorted(by_deployment.items())]


def _policy(api: KubeApi) -> Policy | None:
    from ...live.policy import read_policy

    try:
        return read_policy(api, api.namespace)
    except DetK8sError as exc:
        output.warning(f"cannot read the scheduling policy, so its queues are not checked: {exc.message}")
        return None


def _unreachable_reclaims(snapshot: Snapshot, namespace: str, entries: list[QueueEntry], policy: Policy,
                          prefix: str) -> list[str]:
    """Queued experiments of the namespace whose queue could reclaim capacity lent to det-k8s experiments of other
    namespaces, which its passes cannot evict (a warning: they wait until those stop)."""
    from ...live.lease import utcnow
    from ...live.queue import QUEUED, RUNNING
    from ...live.scheduler import dry_plan
    from ...scheduling.explain import describe

    if policy.queues is None or not any(e.state == QUEUED for e in entries):
        return []
    plan = dry_plan(snapshot, [e for e in entries if e.state in (QUEUED, RUNNING)], policy, now=utcnow(),
                    namespace=namespace)
    found = []
    for group_id, reason in sorted(plan.waiting.items()):
        if reason.unreachable:
            line = next(part for part in describe(reason).split("; ") if part.startswith("its queue could reclaim"))
            found.append(f"{prefix}{group_id}: {line}")
    return found


def _unheld_guarantees(policy: Policy | None, snapshot: Snapshot) -> list[str]:
    """The namespace's team queues whose guarantees the cluster cannot hold (a warning, not a finding)."""
    from ...scheduling.queues import unheld

    queues = policy.queues if policy is not None else None
    if queues is None:
        return []
    totals: dict[str, int] = {}
    for node in snapshot.nodes:
        if node.ready and not node.unschedulable:
            for name, amount in node.allocatable.items():
                totals[name] = totals.get(name, 0) + amount
    return unheld(queues, totals)


@with_global_options
def doctor(
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Look at every namespace.")]
    = False,
    scheduler_name: Annotated[str, typer.Option(
        "--scheduler-name", metavar="NAME", help="The scheduler name det-k8s serves (as `scheduler run`).")]
    = "coscheduler",
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Find pod groups with some pods running and others stuck, also ones det-k8s did not create.

    Exits 1 when it finds any, so it can guard a cron job or a CI step. Also lists the bindings of the
    master's pods that failed part-way and the groups found partly bound, which det-k8s has already
    torn down (from its Warning events, kept by Kubernetes for an hour).
    """
    from ...kube.kinds import EVENTS
    from ...kube.snapshot import read_snapshot
    from ...live.binder import FAILURE_REASONS
    from ...live.queue import RUNNING, QueueStore
    from ...scheduling import labels as L
    from ...scheduling.doctor import dra_nodes, find_partial_groups, recorded_failures, schedulers_seen

    api = current().connect()
    with output.spinner("reading the cluster"):
        snapshot = read_snapshot(api)
        try:
            events = [e for reason in FAILURE_REASONS for e in api.iter_list(
                EVENTS, api.namespace, all_namespaces=all_namespaces, field_selector=f"reason={reason}")]
        except Forbidden as exc:  # the partly-started groups are still worth reporting
            output.warning(f"cannot list events, so the groups det-k8s tore down are not shown: {exc.message}")
            events = []
    failures = recorded_failures(events, FAILURE_REASONS)
    preempting = _preemptions(api, snapshot, all_namespaces)
    policy = _policy(api)
    unheld = _unheld_guarantees(policy, snapshot)
    unreachable: list[str] = []
    seen = schedulers_seen(snapshot, scheduler_name.strip() or None)
    components = _scheduler_components(api)
    ours = _det_k8s_schedulers(api, all_namespaces)
    broken = [finding for _, _, findings in ours for finding in findings]
    dra = dra_nodes(snapshot)
    diagnosis = find_partial_groups(snapshot)
    groups = [g for g in diagnosis.partial if all_namespaces or g.namespace == api.namespace]
    stale: list[str] = []
    leftovers: list[dict[str, Any]] = []
    skipped: list[str] = []
    intents: list[dict[str, Any]] = []
    for namespace in _queue_namespaces(api, all_namespaces):  # -A: every namespace that holds a queue
        present = {p.labels.get(L.GROUP) for p in snapshot.pods if p.namespace == namespace}
        store = QueueStore(api, namespace)
        everything = store.entries()
        prefix = f"{namespace}/" if all_namespaces else ""
        for entry in everything:
            if entry.state == RUNNING and entry.id not in present:
                stale.append(prefix + entry.id)
        leftovers += _failed_creations(api, namespace, everything)
        intents += _unfinished(snapshot, namespace, everything, prefix)
        if policy is not None:
            unreachable += _unreachable_reclaims(snapshot, namespace, everything, policy, prefix)
        skipped += store.skipped
    records = [{"group": g.key, "owner": g.owner, "namespace": g.namespace, "running": list(g.running),
                "waiting": list(g.waiting), "missing": g.missing, "gpusHeld": g.held_gpus, "advice": g.advice,
                "deadlocked": g.key in diagnosis.deadlocked} for g in groups]
    repaired = [{"namespace": f.namespace, "reason": f.reason, "pods": list(f.pods), "count": f.count,
                 "lastSeen": f.last, "message": f.message} for f in failures]
    if output_format is not OutputFormat.table:
        output.data({"partialGroups": records, "staleRunningEntries": stale, "failedCreationPods": leftovers,
                     "unreadableEntries": skipped, "repairedGroups": repaired, "unheldGuarantees": unheld,
                     "unreachableReclaims": unreachable,
                     "unfinishedIntents": intents,
                     "schedulers": [{"name": row.name, "pending": row.pending, "bound": row.bound,
                                     "otherGangs": dict(row.gangs), "servedByDetK8s": row.served_by_det_k8s,
                                     "pods": list(row.pods)}
                                    for row in seen],
                     "schedulerDeployments": components,
                     "detK8sSchedulerPods": [{"deployment": name, **state.as_dict()} for name, states, _ in ours
                                             for state in states],
                     "detK8sSchedulerProblems": [f.as_dict() for f in broken],
                     "preemptionsInProgress": preempting,
                     "draNodes": [{"node": n, "gpus": g, "deviceClass": k} for n, g, k in dra.nodes],
                     "draAdvice": dra.advice if dra.nodes else None}, output_format)
    else:
        if groups:
            output.table(["group", "owner", "namespace", "running", "waiting", "gpus held", "advice"],
                         [[g.key, g.owner, g.namespace, len(g.running), len(g.waiting) + g.missing, g.held_gpus,
                           g.advice] for g in groups],
                         title="Partly-started groups (their running pods hold resources while waiting)")
        if diagnosis.deadlocked:
            output.warning(f"deadlock: {', '.join(diagnosis.deadlocked)} each wait for resources the others hold; "
                           "stop one of them to let the others start")
        if failures:
            output.table(["namespace", "reason", "pods", "times", "last", "what det-k8s did"],
                         [[f.namespace, f.reason, len(f.pods), f.count, f.last, f.message] for f in failures],
                         title="Groups det-k8s tore down (a binding failed part-way, found partly bound, or bound to a node "
                               "that no longer exists)")
        if preempting:
            output.table(["victim", "namespace", "pods left", "marked", "preempted by"],
                         [[p["allocation"], p["namespace"], p["pods"], p["marked"] or "?", p["by"] or "?"]
                          for p in preempting], title="Preemptions in progress (Determined checkpoints the victims)")
            for item in preempting:
                if item["minutes"] is not None and item["minutes"] >= SLOW_PREEMPTION_MINUTES:
                    output.warning(f"preemption of {item['namespace']}/{item['allocation']} is taking longer than "
                                   f"expected ({item['minutes']:.0f} min): its trial has not checkpointed and stopped; "
                                   "`scheduler run` deletes its pods at --preemption-grace (30m by default), and "
                                   "Determined then restarts it from its latest checkpoint")
        for entry_id in stale:
            output.warning(f"{entry_id} is recorded as running but has no pods; the next pass "
                           "(`det-k8s scheduler run --once`) requeues it")
        for item in leftovers:
            output.warning(item["message"])
        for item in intents:
            output.warning(item["message"])
        for message in skipped:
            output.warning(message)
        for message in unheld:
            output.warning(f"team queues: {message}")
        for message in unreachable:
            output.warning(f"team queues: {message}")
        if seen or components:
            output.table(["scheduler", "pending pods", "bound pods", "other gang mechanisms", "served by", "pods"],
                         [[row.name, row.pending, row.bound,
                           ", ".join(f"{m} {n}" for m, n in row.gangs) or "-",
                           "det-k8s" + (" (not their gangs' pods)" if row.gangs else "") if row.served_by_det_k8s
                           else ", ".join(c["deployment"] for c in components if c["serves"] == row.name) or "?",
                           ", ".join(row.pods) + (", ..." if row.pending + row.bound > len(row.pods) else "")]
                          for row in seen]
                         + [[c["serves"], 0, 0, "-", c["deployment"], "-"] for c in components
                            if c["serves"] not in {row.name for row in seen}],
                         title="Schedulers (by the schedulerName of pending and bound pods, and scheduler Deployments)")
        if ours:
            output.table(["deployment", "pod", "phase", "ready", "reason", "restarts", "node"],
                         [[name, p.name, p.phase, "yes" if p.ready else "no", p.reason or "-", p.restarts, p.node or "-"]
                          for name, states, _ in ours for p in states],
                         title="det-k8s's scheduler pods")
        if broken:
            output.text("".join(f"Problem: {finding.problem}\n" + "".join(f"  - {check}\n" for check in finding.checks)
                                for finding in broken))
        if dra.nodes:
            output.warning(f"{len(dra.nodes)} node(s) hold {dra.gpus} GPU(s) managed by DRA ("
                           + ", ".join(f"{n} {g} via {k}" for n, g, k in dra.nodes[:5])
                           + (", ..." if len(dra.nodes) > 5 else "") + f"): {dra.advice}")
    if groups or stale or leftovers or intents or broken:
        idle = sum(g.held_gpus for g in groups)
        raise DetK8sError(f"{len(groups)} partly-started group(s) holding {idle} GPU(s)"
                          + (f", {len(stale)} stale queue entr{'y' if len(stale) == 1 else 'ies'}" if stale else "")
                          + (f", {len(leftovers)} pod(s) of failed creations" if leftovers else "")
                          + (f", {len(intents)} unfinished creation(s)" if intents else "")
                          + (f"; det-k8s's scheduler cannot run ({len(broken)} problem{'s' * (len(broken) > 1)} "
                             "above)" if broken else ""))
    if output_format is OutputFormat.table:
        output.success("no partly-started groups" + ("" if all_namespaces else f" in namespace {api.namespace}"))


SLOW_PREEMPTION_MINUTES = 10  # a trial that checkpoints takes minutes; beyond this `doctor` says so


def _preemptions(api: Any, snapshot: Any, all_namespaces: bool) -> list[dict[str, Any]]:
    """The master's victims still there: pods det-k8s labelled determined-preemption, by allocation, with when the
    first was marked and by whom (their Preempted events)."""
    import contextlib
    import datetime

    from ...kube.kinds import EVENTS
    from ...live.binder import PREEMPTED
    from ...scheduling.master import ALLOCATION, PREEMPTION

    victims: dict[tuple[str, str], list[str]] = {}
    for pod in snapshot.pods:
        if PREEMPTION in pod.labels and pod.labels.get(ALLOCATION) and (all_namespaces or
                                                                        pod.namespace == api.namespace):
            victims.setdefault((pod.namespace, pod.labels[ALLOCATION]), []).append(pod.name)
    if not victims:
        return []
    try:
        events = list(api.iter_list(EVENTS, api.namespace, all_namespaces=all_namespaces,
                                    field_selector=f"reason={PREEMPTED}"))
    except DetK8sError:
        events = []
    now = datetime.datetime.now(datetime.UTC)
    out = []
    for (namespace, allocation), pods in sorted(victims.items()):
        mine = [e for e in events if (e.get("involvedObject") or {}).get("name") in pods]
        stamps = sorted(str(e.get("firstTimestamp") or e.get("eventTime") or "") for e in mine if
                        e.get("firstTimestamp") or e.get("eventTime"))
        minutes = None
        if stamps:
            with contextlib.suppress(ValueError):
                first = datetime.datetime.fromisoformat(stamps[0].replace("Z", "+00:00"))
                minutes = (now - first).total_seconds() / 60
        by = next((str(e.get("message") or "").split("preempted by ", 1)[-1].split(" ", 1)[0] for e in mine), "")
        out.append({"namespace": namespace, "allocation": allocation, "pods": len(pods),
                    "marked": stamps[0] if stamps else "", "minutes": minutes, "by": by})
    return out
