"""`det-k8s plan`: the scheduler's answer for experiments on a cluster snapshot, offline.

Only the options live here, so `--help` imports nothing of the scheduler; the work is in
`planning.py`. Exit 0 whenever the plan was made, even if some experiments would wait or be
rejected: that is the answer, not a failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..inputs import SetOpt, SetStringOpt, ValuesOpt
from ..nodemap import GroupByOpt, HtmlOpt, SummaryOpt, SvgOpt
from ..options import OFFLINE, KubeVersionOpt, OutputOpt, pod_spec_version, with_options
from ..output import OutputFormat


@with_options("namespace", *OFFLINE, namespace_help=(
    "The queue to plan for: its namespace (default: HELM_NAMESPACE, then default; no kubeconfig is read). Only "
    "the snapshot's det-k8s groups of that namespace, and the master's trials, may be preempted."))
def plan(
    experiments: Annotated[list[Path], typer.Argument(
        metavar="EXPERIMENT", show_default=False,
        help="Experiment config files (Determined's keys), taken as submitted at once, in this order; - reads one "
        "from stdin.")],
    snapshot_file: Annotated[Path, typer.Option(
        "--snapshot", metavar="FILE", show_default=False,
        help="Nodes and pods as `kubectl get nodes,pods -A -o json` (or -o yaml, far slower to read) prints them; "
        "- reads stdin (kubectl get nodes,pods -A -o json | det-k8s plan ... --snapshot -).")],
    values: ValuesOpt = None,
    set_: SetOpt = None,
    set_string: SetStringOpt = None,
    preemption: Annotated[bool, typer.Option(
        "--preemption", help="Let a group evict whole lower-priority det-k8s groups and the master's trials (also on "
        "with defaultScheduler: preemption).")] = False,
    scheduler_name: Annotated[str, typer.Option(
        "--scheduler-name", metavar="NAME",
        help="The snapshot's pods of the Determined master that name this scheduler are planned as `scheduler run` "
             "serves them: ready gangs queued, bound ones running (trials may be preempted); '' for none.")]
    = "coscheduler",
    autoscaling: Annotated[bool, typer.Option(
        "--autoscaling",
        help="Nodes will be added: groups larger than the cluster wait instead of being rejected.")] = False,
    user: Annotated[str | None, typer.Option(
        "--user", metavar="NAME", help="Submit as this user, for fair share (default: $USER).")] = None,
    kube_version: KubeVersionOpt = None,
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
    policy_file: Annotated[Path | None, typer.Option(
        "--policy", metavar="FILE", show_default=False,
        help="A scheduling policy to try (as `det-k8s scheduler policy -o yaml` prints it, or a queues file as "
        "`scheduler policy --queues` takes it): a quota change tried offline before it is applied; - reads stdin.")]
    = None,
    output_format: OutputOpt = OutputFormat.table,
    show_map: Annotated[bool, typer.Option(
        "--map", help="Draw the cluster after the plan: one cell per slot, placements highlighted, evictions "
        "struck through, and why each group waits (with -o json: the map's data too).")] = False,
    group_by: GroupByOpt = None,
    summary: SummaryOpt = None,
    svg: SvgOpt = None,
    html: HtmlOpt = None,
) -> None:
    """Show where experiments would run on a cluster snapshot, or why they would wait. Offline."""
    from ...names import check_label_key
    from ...settings.podspec import checking_against
    from ..nodemap import MapRequest
    from ..planning import run

    if topology_key:  # "" turns it off
        check_label_key(topology_key, "--topology-key")
    wanted = show_map or svg is not None or html is not None
    with checking_against(pod_spec_version(kube_version)):
        run(experiments, snapshot_file, values, set_, set_string, preemption=preemption, autoscaling=autoscaling,
            user=user, output_format=output_format,
            map_request=MapRequest(None, group_by, summary, svg, html) if wanted else None, show_map=show_map,
            topology_key=topology_key, require_topology=require_topology,
            extended_resource_toleration=extended_resource_toleration, policy_file=policy_file,
            scheduler_name=scheduler_name.strip())
