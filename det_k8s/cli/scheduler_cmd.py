"""`det-k8s scheduler run|policy`: the scheduling loop, and the cluster-wide policy it follows."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

import typer

from ..errors import DetK8sError, InputError, UsageError
from ..tools.duration import HELP as DURATION_HELP
from ..tools.duration import parse_duration
from . import output
from .options import OutputFormat, OutputOpt, current, with_global_options

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
    interval_text: Annotated[str, typer.Option("--interval", metavar="DURATION",
                                               help=f"Time between passes (at least 1s): {DURATION_HELP}.")] = "10s",
    preemption: Annotated[bool, typer.Option("--preemption",
                                             help="Preempt lower-priority groups, even if the policy does not.")]
    = False,
) -> None:
    """Schedule the queue: one pass every --interval seconds until Ctrl-C (or one with --once).

    Each pass takes the cluster's scheduling Lease, so any number of these loops and of
    `experiment create` commands, in any namespaces, can run at once without handing out the
    same GPUs twice.
    """
    from ..kube.lease import LeaseHeld
    from ..kube.scheduler import LiveScheduler
    from ..scheduling.model import Policy
    from .experiment import _print_pass, _require_cleared
    from .live import current_user, effective_policy, holder_id

    interval = interval_seconds(interval_text)
    api = current().connect()
    holder = holder_id(current_user(None))
    output.message(f"scheduling namespace {api.namespace} of {api.target.context} as {holder}"
                   + ("" if once else f", every {interval:g}s; Ctrl-C stops"))
    announced = False
    failures = 0
    # One scheduler for the whole loop: its Lease remembers how long another holder has been silent.
    scheduler = LiveScheduler(api, api.namespace, Policy(), holder, lease_wait=0 if not once else 10)
    while True:
        try:
            scheduler.policy = effective_policy(api, preemption=preemption)  # an admin may change it meanwhile
            report = scheduler.run_pass()
            _print_pass(report)
            if once:
                _require_cleared(report)
            announced, failures = False, 0
        except LeaseHeld as exc:
            if once:
                raise
            if not announced:
                output.message(f"{exc.message}; waiting")
                announced = True
        except DetK8sError as exc:  # a pass that failed changed nothing it could not finish; try again
            if once:
                raise
            failures += 1
            output.error(f"pass failed: {exc.message}", exc.hint)
        except Exception as exc:  # a bug met by one pass must not stop scheduling for everyone: say it, go on
            if once:
                raise
            failures += 1
            output.error(f"pass failed: internal error: {type(exc).__name__}: {exc}",
                         "please report it; the loop keeps going")
        if once:
            return
        time.sleep(min(interval * 2 ** min(failures, 5), 300))  # back off while the cluster misbehaves


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
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Show the namespace's scheduling policy; with options, change it for every client."""
    from dataclasses import replace

    from ..kube.policy import policy_data, read_policy, write_policy
    from ..scheduling.model import Policy

    api = current().connect()
    try:
        current_policy = read_policy(api, api.namespace)
    except InputError as exc:  # the command that repairs a broken policy must not be blocked by it
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
                       "Admission": f"ExtendedResourceToleration {toleration}"})
