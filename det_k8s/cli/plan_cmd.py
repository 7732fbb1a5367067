"""`det-k8s plan`: the scheduler's answer for experiments on a cluster snapshot, offline.

Only the options live here, so `--help` imports nothing of the scheduler; the work is in
`planning.py`. Exit 0 whenever the plan was made, even if some experiments would wait or be
rejected: that is the answer, not a failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .inputs import SetOpt, SetStringOpt, ValuesOpt
from .options import OutputFormat, OutputOpt, with_global_options


@with_global_options
def plan(
    experiments: Annotated[list[Path], typer.Argument(
        metavar="EXPERIMENT", show_default=False,
        help="Experiment config files (Determined's keys), taken as submitted at once, in this order.")],
    snapshot_file: Annotated[Path, typer.Option(
        "--snapshot", metavar="FILE", show_default=False,
        help="Nodes and pods as `kubectl get nodes,pods -A -o json` (or -o yaml, far slower to read) prints them.")],
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    preemption: Annotated[bool, typer.Option(
        "--preemption", help="Let a group evict whole lower-priority det-k8s groups (also on with "
        "defaultScheduler: preemption).")] = False,
    autoscaling: Annotated[bool, typer.Option(
        "--autoscaling",
        help="Nodes will be added: groups larger than the cluster wait instead of being rejected.")] = False,
    user: Annotated[str | None, typer.Option(
        "--user", metavar="NAME", help="Submit as this user, for fair share (default: $USER).")] = None,
    topology_key: Annotated[str, typer.Option(
        "--topology-key", metavar="LABEL",
        help="Node label whose values are topology domains (zones, racks, NVLink domains): a group is kept "
        "within one when it fits there; \"\" turns it off.")] = "topology.kubernetes.io/zone",
    require_topology: Annotated[bool, typer.Option(
        "--require-topology", help="Place a group only within one domain of --topology-key.")] = False,
    extended_resource_toleration: Annotated[bool | None, typer.Option(
        "--extended-resource-toleration/--no-extended-resource-toleration",
        help="Whether the API server adds tolerations of nvidia.com/gpu taints to GPU pods (the "
        "ExtendedResourceToleration admission plugin; GKE, EKS and AKS run it). Default: detected "
        "from the snapshot.", show_default=False)] = None,
    output_format: OutputOpt = OutputFormat.table,
) -> None:
    """Show where experiments would run on a cluster snapshot, or why they would wait. Offline."""
    from .planning import run

    run(experiments, snapshot_file, values, set_, set_string, preemption=preemption, autoscaling=autoscaling,
        user=user, output_format=output_format, topology_key=topology_key, require_topology=require_topology,
        extended_resource_toleration=extended_resource_toleration)
