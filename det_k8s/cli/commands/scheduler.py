"""`det-k8s scheduler run|policy`: the scheduling loop, and the cluster-wide policy it follows."""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...errors import DetK8sError, InputError, PolicyError, UsageError
from ...tools.duration import HELP as DURATION_HELP
from ...tools.duration import parse_duration
from .. import output
from ..options import OFFLINE, OutputOpt, current, with_global_options, with_options
from ..output import OutputFormat

if TYPE_CHECKING:
    from ...health import Health
    from ...live.scheduler import PassReport
    from ...scheduling.queues import QueueTree

MAX_RESERVE_AFTER = 7 * 86400.0
app = typer.Typer(name="scheduler", no_args_is_help=True,
                  help="Run det-k8s's gang scheduler, and set the policy every client follows.")


def interval_seconds(text: str) -> float:
    seconds = parse_duration(text, "--interval")
    if seconds < 1:
        raise UsageError(f"--interval {text!r}: at least 1s between passes")
    return seconds


def reserve_after_seconds(text: str | None) -> float | None:
    """--reserve-after as seconds: a duration like every other, or 0 for at once; at most a week."""
    if text is None:
        return None
    seconds = 0.0 if text.strip() in ("0", "0s") else parse_duration(text, "--reserve-after")
    if seconds > MAX_RESERVE_AFTER:
        raise UsageError(f"--reserve-after {text!r}: at most 7 days ({MAX_RESERVE_AFTER:g}s)")
    return seconds


@app.command("run")
@with_global_options
def run(
    once: Annotated[bool, typer.Option("--once", help="Run one pass and exit.")] = False,
    interval_text: Annotated[str, typer.Option(
        "--interval", metavar="DURATION",
        help=f"Time between passes when nothing changes (at least 1s): {DURATION_HELP}.")] = "10s",
    preemption: Annotated[bool, typer.Option("--preemption",
                                             help="Preempt lower-priority groups, even if the policy does not.")]
    = False,
    scheduler_name: Annotated[str, typer.Option(
        "--scheduler-name", metavar="NAME",
        help="Also schedule the Determined master's task pods that name this scheduler (its defaultScheduler); "
             "'' for det-k8s's own queue only.")] = "coscheduler",
    health_port: Annotated[int, typer.Option(
        "--health-port", metavar="PORT", min=0, max=65535,
        help="Answer Kubernetes probes on this port: /readyz (the first pass is done; not while stopping) and "
             "/healthz (the loop moves), on every address (DET_K8S_HEALTH_ADDRESS names one). 0: off.")] = 0,
    force: Annotated[bool, typer.Option(
        "--force", help="Run even though another component serves --scheduler-name (both would bind the same "
        "pods).")] = False,
    preemption_grace_text: Annotated[str, typer.Option(
        "--preemption-grace", metavar="DURATION",
        help="How long a preempted trial of the master may take to checkpoint and stop; then its pods are deleted "
             f"and Determined restarts it from its latest checkpoint (one of its max_restarts): {DURATION_HELP}.")]
    = "30m",
) -> None:
    """Schedule the queue and the Determined master's pods: a pass on every change until Ctrl-C (or one with --once).

    Each pass takes the cluster's scheduling Lease, so any number of these loops and of
    `experiment create` commands, in any namespaces, can run at once without handing out the
    same GPUs twice. The loop keeps nodes and pods from a watch and runs a pass when something
    relevant changes (a pod of the master arrives, a pod ends, a node changes), or every
    --interval seconds; it reads the policy (`scheduler policy`) again that often (up to twice
    that while the master's gangs keep coming).
    """
    from ...kube.watch import ClusterView
    from ...live.loop import live_scheduler
    from ...live.loop import serve as serve_loop
    from ..live import current_user, effective_policy, holder_id

    interval = interval_seconds(interval_text)
    preemption_grace = parse_duration(preemption_grace_text, "--preemption-grace")
    api = current().connect()
    holder = holder_id(current_user(None))
    serve = scheduler_name.strip() or None
    output.message(f"scheduling namespace {api.namespace} of {api.target.context} as {holder}"
                   + (f", and the pods of scheduler {serve} in every namespace" if serve else "")
                   + ("" if once else f"; a pass on every change, at least every {interval:g}s; Ctrl-C stops"))
    if serve:
        from ...live.rivals import rival_schedulers

        rivals = rival_schedulers(api, serve)
        for rival in rivals:
            namespace, name = rival.split("/", 1)[0], rival.split("/", 1)[1].split(" ")[0]
            text = (f"Deployment {rival} also serves scheduler {serve}: two schedulers bind the same pods, and "
                    "det-k8s deletes the gangs the other leaves partly bound")
            hint = (f"scale it to 0 (kubectl scale deployment -n {namespace} {name} --replicas=0), or run det-k8s "
                    "with another --scheduler-name")
            if not force:
                raise DetK8sError(text, hint=hint + "; --force runs anyway")
            output.warning(f"{text} (--force); {hint}")
    health = _serve_health(health_port, interval)  # (before the first listing, which may take a while)
    view = None
    if not once:
        view = ClusterView(api.clone(), serve, queue_namespace=api.namespace).start()
        with output.spinner("listing nodes and pods"):
            if not view.wait_synced(timeout=120.0):
                raise DetK8sError("could not list the cluster's nodes and pods within 2 minutes: "
                                  + ("; ".join(view.problems[-3:]) or "no answer"))
    # One scheduler for the whole loop (live/loop.py): its Lease remembers how long another holder has been silent.
    scheduler = live_scheduler(api, holder, serve, view, once=once, interval=interval,
                               preemption_grace=preemption_grace)
    serve_loop(scheduler, view, lambda: effective_policy(api, preemption=preemption), interval, once, health,
               _LoopOutput())


class _LoopOutput:
    """What the loop (live/loop.py) says, printed: a pass's changes, the Lease held by another, a failed pass."""

    def __init__(self) -> None:
        self.shown: dict[str, str] = {}
        self.said: dict[str, float] = {}  # problem -> when it was last printed: one that lasts is said every 10 min

    def pass_done(self, report: PassReport, once: bool) -> None:
        from .experiment import _print_pass, _require_cleared

        if once:
            _print_pass(report)
            _require_cleared(report)
        else:
            _print_changes(report, self.shown, self.said)

    def lease_held(self, message: str) -> None:
        output.message(f"{message}; waiting")

    def pass_failed(self, exc: Exception) -> None:
        if isinstance(exc, DetK8sError):
            output.error(f"pass failed: {exc.message}", exc.hint)
        else:
            output.error(f"pass failed: internal error: {type(exc).__name__}: {exc}",
                         "please report it; the loop keeps going")

    def warning(self, text: str) -> None:
        output.warning(text)


def _serve_health(port: int, interval: float) -> Health:
    """The probes' answers (`det_k8s/health.py`), served on `port` unless it is 0. The loop beats at least every
    300 s of back-off plus a pass; twice that without a beat is a stuck loop."""
    from ... import stopping
    from ...health import Health, serve

    health = Health(stale_after=2 * (300 + max(interval, 60.0)), stopping=lambda: stopping.received() is not None)
    if port:
        # every address, for the kubelet's probes; DET_K8S_HEALTH_ADDRESS names one (127.0.0.1 outside a pod)
        address = os.environ.get("DET_K8S_HEALTH_ADDRESS", "").strip() or "0.0.0.0"
        serve(health, port, address)
        output.message(f"answering probes on port {port} (/readyz, /healthz)")
    return health


REPEAT_PROBLEMS_AFTER = 600.0  # seconds: the loop says again a problem that lasts this long


def _print_changes(report: PassReport, shown: dict[str, str], said: dict[str, float]) -> None:
    """The loop's output: what each pass did, and why a group waits only when that changed (its headline,
    the text before the first "; ": free capacity and queue positions change every pass); a problem that lasts
    (no RBAC to fence nodes, say) is printed when it appears and then every REPEAT_PROBLEMS_AFTER, not every pass."""
    from ...live.binder import headline
    from .experiment import _print_pass

    waiting = dict(report.waiting)
    report.waiting = {}
    now = time.monotonic()
    fresh = [p for p in report.problems if now - said.get(p, -math.inf) >= REPEAT_PROBLEMS_AFTER]
    said.update({p: now for p in fresh})
    report.problems = fresh
    _print_pass(report)
    for gid, why in waiting.items():
        if shown.get(gid) != headline(why):
            output.message(f"{gid}: waiting: {why}")
    shown.clear()
    shown.update({gid: headline(why) for gid, why in waiting.items()})


@app.command("policy")
@with_global_options
def policy(
    preemption: Annotated[bool | None, typer.Option("--preemption/--no-preemption",
                                                    help="Let higher-priority groups evict lower ones.")] = None,
    weight: Annotated[list[str] | None, typer.Option("--weight", metavar="USER=WEIGHT",
                                                     help="Fair-share weight of a user (repeatable; 0 removes).")]
    = None,
    autoscaling: Annotated[bool | None, typer.Option(
        "--autoscaling/--no-autoscaling", help="Nodes may be added: groups larger than the cluster wait.")] = None,
    backfill: Annotated[bool | None, typer.Option(
        "--backfill/--strict-order", help="Let smaller groups start where they cannot delay the head.")] = None,
    reserve_after_text: Annotated[str | None, typer.Option(
        "--reserve-after", metavar="DURATION",
        help=f"How long a group waits before nodes are reserved for it (default 5m; 0: at once; at most 7 days): "
             f"{DURATION_HELP}.")] = None,
    topology_key: Annotated[str | None, typer.Option(
        "--topology-key", metavar="LABEL", help="Node label of the topology domains a group is kept within "
        "(default topology.kubernetes.io/zone; \"\" turns it off).")] = None,
    require_topology: Annotated[bool | None, typer.Option(
        "--require-topology/--prefer-topology", help="Place a group only within one domain, or prefer one.")] = None,
    extended_resource_toleration: Annotated[str | None, typer.Option(
        "--extended-resource-toleration", metavar="on|off|detect",
        help="Whether the API server's ExtendedResourceToleration admission plugin runs (default: detect).")] = None,
    queues_file: Annotated[Path | None, typer.Option(
        "--queues", metavar="FILE", show_default=False,
        help="Team queues (version, defaultQueue, queues: name, guarantee, limit, weight, members, children), "
             "checked like settings; - reads stdin. Try a change first: det-k8s plan --policy.")] = None,
    no_queues: Annotated[bool, typer.Option("--no-queues", help="Remove the team queues.")] = False,
    placement: Annotated[str | None, typer.Option(
        "--placement", metavar="auto|native|det-k8s",
        help="Who places an experiment's pods once det-k8s releases its group: kube-scheduler's own gang scheduling "
             "(native: a PodGroup; needs the PodGroup API), det-k8s (pods pinned to the planned nodes), or native "
             "where the cluster serves it (auto, the default).")] = None,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Show the namespace's scheduling policy; with options, change it for every client."""
    from dataclasses import replace

    from ...live.policy import policy_data, read_policy, write_policy
    from ...names import check_label_key
    from ...scheduling.model import PLACEMENTS, Policy

    if topology_key:  # "" turns it off
        check_label_key(topology_key, "--topology-key")
    api = current().connect()
    try:
        current_policy = read_policy(api, api.namespace)
    except (InputError, PolicyError) as exc:  # the command that repairs a broken policy must not be blocked by it
        output.warning(f"{exc.message}; starting again from the defaults")
        current_policy = Policy()
    weights = dict(current_policy.weights)
    for item in weight or ():
        user, sep, value = item.partition("=")
        try:
            amount = float(value)
        except ValueError:
            amount = -1.0
        if not sep or not user or not math.isfinite(amount) or amount < 0:
            raise UsageError(f"--weight {item!r}: expected USER=WEIGHT with a weight >= 0", hint="e.g. --weight alice=2")
        if amount == 0:
            weights.pop(user, None)
        else:
            weights[user] = amount
    reserve_after = reserve_after_seconds(reserve_after_text)
    given: dict[str, bool | float | str | None] = {
        "preemption": preemption, "autoscaling": autoscaling, "backfill": backfill, "reserve_after": reserve_after,
        "topology_key": topology_key, "topology_required": require_topology}
    changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if extended_resource_toleration is not None:
        choices = {"on": True, "off": False, "detect": None}
        if extended_resource_toleration not in choices:
            raise UsageError(f"--extended-resource-toleration {extended_resource_toleration!r}: expected on, off "
                             "or detect")
        changes["extended_resource_toleration"] = choices[extended_resource_toleration]
    if placement is not None:
        if placement not in PLACEMENTS:
            raise UsageError(f"--placement {placement!r}: expected {', '.join(PLACEMENTS)}")
        changes["placement"] = placement
    if queues_file is not None and no_queues:
        raise UsageError("--queues and --no-queues contradict each other")
    if queues_file is not None:
        changes["queues"] = read_queues(queues_file)
    elif no_queues:
        changes["queues"] = None
    new = replace(current_policy, weights=weights, **changes)
    if new != current_policy:
        write_policy(api, api.namespace, new)
        output.success(f"scheduling policy of namespace {api.namespace} updated")
    data = policy_data(new)
    if output_format is not OutputFormat.table:
        output.data(data, output_format)
        return
    toleration = {True: "on", False: "off", None: "detect"}[new.extended_resource_toleration]
    output.key_values({"Preemption": data["preemption"], "Backfill": data["backfill"],
                       "Autoscaling": data["autoscaling"], "Reserve after": f"{new.reserve_after:g}s",
                       "Weights": ", ".join(f"{u}={w:g}" for u, w in sorted(new.weights.items())) or "all 1",
                       "Topology": (f"{new.topology_key} ({'required' if new.topology_required else 'preferred'})"
                                    if new.topology_key else "off"),
                       "Admission": f"ExtendedResourceToleration {toleration}",
                       "Queues": ", ".join(q.name for q in new.queues.queues) if new.queues else "none",
                       "Placement": new.placement})


def read_queues(path: Path) -> QueueTree:
    """The queue document in a file (YAML or JSON), checked: PolicyError lists every problem with its key path."""
    from ...live.policy import checked_queues
    from ...safe_read import load_yaml
    from ..inputs import read_text, stdin_once

    stdin_once(path)
    shown = "stdin" if str(path) == "-" else str(path)
    return checked_queues(load_yaml(read_text(path, "queues file"), shown), shown)


@app.command("manifest")
@with_options("namespace", *OFFLINE, namespace_help=(  # prints manifests: no cluster is contacted
    "Where the manifests go, and the namespace of det-k8s's own queue (default: HELM_NAMESPACE, then default; no "
    "kubeconfig is read)."))
def manifest(
    image: Annotated[str, typer.Option("--image", metavar="IMAGE", show_default=False,
                                       help="The det-k8s image (built from deploy/Dockerfile).")],
    scheduler_name: Annotated[str, typer.Option("--scheduler-name", metavar="NAME",
                                                help="The scheduler name of the master's pods to serve.")]
    = "coscheduler",
    replicas: Annotated[int, typer.Option("--replicas", min=1, max=5, metavar="N",
                                          help="Scheduler pods (one binds at a time; the others take over).")] = 2,
    lease_namespace: Annotated[str | None, typer.Option(
        "--lease-namespace", metavar="NAME",
        help="Namespace of the scheduling Lease every det-k8s client shares (default: DET_K8S_LEASE_NAMESPACE, "
             "else default).")] = None,
    preemption: Annotated[bool, typer.Option("--preemption",
                                             help="Preempt lower-priority groups, even if the policy does not.")]
    = False,
    image_pull_secret: Annotated[str | None, typer.Option("--image-pull-secret", metavar="NAME",
                                                          help="Secret to pull the image with.")] = None,
) -> None:
    """Print the manifests that run the scheduler in the cluster (`| kubectl apply -f -`): RBAC and a Deployment."""
    import os

    import yaml

    from ...chart.deploy import scheduler_manifests
    from ...live.lease import NAMESPACE_ENV

    namespace = current().namespace or os.environ.get("HELM_NAMESPACE") or "default"
    if not image.strip() or any(c.isspace() for c in image):
        raise UsageError(f"--image {image!r}: not an image reference", hint="e.g. --image registry.example.com/det-k8s:0.4")
    documents = scheduler_manifests(image.strip(), namespace, scheduler_name=scheduler_name, replicas=replicas,
                                    lease_namespace=lease_namespace or os.environ.get(NAMESPACE_ENV) or "default",
                                    preemption=preemption, image_pull_secret=image_pull_secret)
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False))
