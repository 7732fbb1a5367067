"""`det-k8s nodes map` and the map under `plan --map`: reading what the map needs, then drawing it.

The data comes from `scheduling.occupancy` (pure); this module reads the snapshot (live through
the API adapter, or a file), the settings that say what a slot is and which taints Determined's
pods tolerate, and, live, the det-k8s queue, whose starvation guard may hold nodes for a waiting
group. Drawing is `mapview`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import DetK8sError
from . import output
from .output import OutputFormat

if TYPE_CHECKING:
    from ..cluster.model import Pod, Snapshot
    from ..kube.api import KubeApi
    from ..live.scheduler import DryCluster
    from ..scheduling.model import Plan, PodGroup
    from ..scheduling.occupancy import OccupancyMap
    from ..scheduling.queues import QueueTree
    from ..settings import Settings


SvgOpt = Annotated[Path | None, typer.Option(
    "--svg", metavar="FILE", help="Also write the map as an SVG picture (Rich's export).", show_default=False)]
HtmlOpt = Annotated[Path | None, typer.Option(
    "--html", metavar="FILE", help="Also write the map as a standalone HTML page.", show_default=False)]
SummaryOpt = Annotated[bool | None, typer.Option(
    "--summary/--no-summary", show_default=False,
    help="Per pool: nodes by free slots and the largest free blocks, instead of one row per node "
         "(default: when the rows do not fit the width, or beyond 200 nodes).")]
ByOpt = Annotated[str, typer.Option(
    "--by", metavar="holder|queue",
    help="Colour the slots by who holds them (holder: each group and task), or by team queue (queue: the rows "
         "grouped by the queue holding most of each node, unless --group-by is given).")]
QueuesFileOpt = Annotated[Path | None, typer.Option(
    "--policy", metavar="FILE", show_default=False,
    help="With --by queue and --snapshot: the scheduling policy (or queue document) whose queues to use; the live "
         "cluster's policy otherwise.")]
GroupByOpt = Annotated[str | None, typer.Option(
    "--group-by", metavar="LABEL", show_default=False,
    help="Group the rows by this node label (default: the first node-pool or zone label the nodes carry).")]


@dataclass(frozen=True)
class MapRequest:
    """The map options a command was given."""

    selector: str | None = None
    group_by: str | None = None
    summary: bool | None = None
    svg: Path | None = None
    html: Path | None = None
    queues: QueueTree | None = None  # colour and group by these team queues (`nodes map --by queue`)

    def __post_init__(self) -> None:
        """Usage errors before anything is read: a selector kubectl would refuse, a --group-by that is no label key."""
        from ..names import is_label_key, shown

        if self.selector:
            from ..cluster.selector import parse_selector

            parse_selector(self.selector)
        if self.group_by and not is_label_key(self.group_by):
            from ..errors import UsageError

            raise UsageError(f"--group-by {shown(self.group_by)}: not a node label key",
                             hint="e.g. --group-by node.kubernetes.io/instance-type")


def selected_nodes(snapshot: Snapshot, selector: str | None) -> list[str] | None:
    """Names of the nodes a label selector picks (None: no selector, every node)."""
    if not selector:
        return None
    from ..cluster.selector import matches, parse_selector

    requirements = parse_selector(selector)
    return [node.name for node in snapshot.nodes if matches(requirements, node.labels)]


def occupancy(snapshot: Snapshot, settings: Settings | None, request: MapRequest, *, plan: Plan | None = None,
              queue: Sequence[PodGroup] = (), extended_resource_toleration: bool | None = None) -> OccupancyMap:
    from ..scheduling.occupancy import build, default_group_by, slot_unit, task_pod_constraints

    names = selected_nodes(snapshot, request.selector)
    picked = set(names) if names is not None else None
    chosen = snapshot.nodes if picked is None else [n for n in snapshot.nodes if n.name in picked]
    tree = request.queues
    group_by = request.group_by or (None if tree is not None else default_group_by(chosen))
    constraints = task_pod_constraints(settings, snapshot, extended_resource_toleration)  # as planning admits them
    queue_of = None
    if tree is not None:
        from ..scheduling import labels as L

        def queue_of(pod: Pod) -> str:
            return tree.leaf_for(user=pod.labels.get(L.USER, ""), namespace=pod.namespace, labels=pod.labels)

    return build(snapshot, slot_unit(settings), constraints=constraints, group_by=group_by,
                 plan=plan, queue=queue, nodes=names, queue_of=queue_of)


def present(omap: OccupancyMap, request: MapRequest, output_format: OutputFormat) -> None:
    """Print the map (or its data), then write the SVG/HTML files asked for."""
    from . import mapview

    if output_format is OutputFormat.table:
        mapview.show(omap, summary=request.summary)
    else:
        output.data(omap.to_dict(), output_format)
    mapview.write_pictures(omap, svg=request.svg, html=request.html, summary=request.summary)


def _live_settings(api: KubeApi) -> Settings | None:
    """The installed master's settings in the namespace, or None (GPU slots, no tolerations assumed)."""
    from .live import scheduling_settings

    try:
        return scheduling_settings(api, None, None, None)
    except DetK8sError as exc:
        output.message(f"note: {exc.message}; counting GPU slots, and taints as if Determined's pods tolerated "
                       "none (pass -f with your settings)")
        return None


def _reservation(api: KubeApi, snapshot: Snapshot | DryCluster) -> tuple[Plan | None, list[PodGroup]]:
    """Nodes the starvation guard holds now for a waiting group of this namespace's queue, if any (planned with
    the master's groups while a loop serves them, as that loop's next pass plans)."""
    from ..live.lease import utcnow
    from ..live.queue import QUEUED, RUNNING, QueueStore
    from ..live.scheduler import DryCluster, dry_plan
    from ..scheduling.model import Plan
    from ..scheduling.serialize import group_from_dict
    from .live import effective_policy

    master = list(snapshot.master_queue) if isinstance(snapshot, DryCluster) else []
    try:
        entries = QueueStore(api, api.namespace).entries([QUEUED, RUNNING])
        if not master and not any(e.state == QUEUED for e in entries):
            return None, []
        plan = dry_plan(snapshot, entries, effective_policy(api), now=utcnow(), namespace=api.namespace)
    except DetK8sError as exc:  # no right to read the queue: the map is still worth drawing
        output.message(f"note: the det-k8s queue in namespace {api.namespace} was not read ({exc.message}); "
                       "nodes reserved for a waiting group are shown as free")
        return None, []
    if not plan.reservations:
        return None, []
    queue = [group_from_dict(e.group) for e in entries if e.state == QUEUED] + master
    return Plan({}, {}, {}, reservations=plan.reservations), queue


def queues_for_map(by: str, snapshot_file: Path | None, policy_file: Path | None) -> QueueTree | None:
    """The team queues `nodes map --by queue` colours by: the policy file's, or the live cluster's policy's."""
    from ..errors import UsageError

    if by not in ("holder", "queue"):
        raise UsageError(f"--by {by!r}: expected holder or queue")
    if by == "holder":
        if policy_file is not None:
            raise UsageError("--policy is read only with --by queue")
        return None
    if policy_file is not None:
        from ..scheduling.model import Policy
        from .inputs import with_policy_file

        tree = with_policy_file(Policy(), policy_file).queues
        where = str(policy_file)
    elif snapshot_file is not None:
        raise UsageError("--by queue with --snapshot needs --policy FILE (the policy or queue document whose "
                         "queues to use)")
    else:
        from ..live.policy import read_policy
        from .options import current

        api = current().connect()
        tree = read_policy(api, api.namespace).queues
        where = f"the scheduling policy of namespace {api.namespace}"
    if tree is None:
        raise DetK8sError(f"--by queue: {where} has no team queues",
                          hint="set them with `det-k8s scheduler policy --queues FILE`")
    return tree


def run_map(snapshot_file: Path | None, values: Sequence[str] | None, sets: Sequence[str] | None,
            set_strings: Sequence[str] | None, request: MapRequest, output_format: OutputFormat) -> None:
    """`det-k8s nodes map`: read the cluster (or the snapshot file), draw who holds each slot."""
    from .inputs import load_settings_from_cli, load_snapshot, no_gc, stdin_once
    from .options import current, timed

    stdin_once(snapshot_file, values)
    given = bool(values or sets or set_strings)
    settings = load_settings_from_cli(values, sets, set_strings, required=False).settings() if given else None
    plan: Plan | None = None
    queue: list[PodGroup] = []
    with no_gc():  # a snapshot is millions of acyclic objects: see inputs.no_gc
        if snapshot_file is not None:
            with timed(f"reading the snapshot {snapshot_file}"):
                snapshot = load_snapshot(snapshot_file)
        else:
            from ..live.scheduler import dry_cluster

            api = current().connect()
            with output.spinner("reading the cluster"), timed("reading the cluster"):
                cluster = dry_cluster(api)
                snapshot = cluster.snapshot
                if settings is None:
                    settings = _live_settings(api)
                plan, queue = _reservation(api, cluster)
        with timed("the map"):
            omap = occupancy(snapshot, settings, request, plan=plan, queue=queue)
    if request.selector and not omap.rows and not omap.without_slots:
        output.warning(f"no node matches the selector {request.selector!r}")
    if snapshot_file is not None and settings is None:
        tainted = [row.name for row in omap.rows if any(state.startswith("taint ") for state in row.states)]
        if tainted:
            output.warning(f"no settings file given: Determined's task pods are taken to tolerate no taint, so "
                           f"{len(tainted)} of {len(omap.rows)} nodes show a taint that keeps them off; pass -f with your "
                           "settings (their pod specs' tolerations), as plan does")
    present(omap, request, output_format)


def group_map(snapshot: Snapshot, group_id: str, group_data: Mapping[str, Any] | None,
              plan: Plan) -> OccupancyMap | None:
    """The rows one det-k8s group touches: where its pods run, or where the next pass would start them
    (with the groups it would evict), or the nodes reserved for it. None when it touches no node."""
    from ..cluster.model import NO_CONSTRAINTS
    from ..scheduling import labels as L
    from ..scheduling.model import Plan
    from ..scheduling.occupancy import GPU_SLOTS, build, group_unit
    from ..scheduling.serialize import group_from_dict

    try:
        group = group_from_dict(group_data) if group_data else None
    except (KeyError, TypeError, ValueError):  # an entry written by another version: draw GPUs
        group = None
    victims = plan.preempting.get(group_id, ())
    nodes = {pod.node for pod in snapshot.pods if pod.active and pod.node
             and pod.labels.get(L.GROUP) in {group_id, *victims}}
    placed = plan.placements.get(group_id, ())
    reserved = plan.reservations.get(group_id, ())
    nodes |= {node for _, node in placed} | set(reserved)
    nodes &= {node.name for node in snapshot.nodes}  # a pod pinned to a node since deleted: no row to draw
    if not nodes:
        return None
    mine = Plan({group_id: placed} if placed else {}, {}, {}, victims=victims,
                preempting={group_id: victims} if victims else {},
                reservations={group_id: reserved} if reserved else {})
    unit = group_unit(group) if group is not None else GPU_SLOTS
    constraints = group.pods[0].constraints if group is not None and group.pods else NO_CONSTRAINTS
    if group is not None and group.pods:  # as planning takes its pods: admitted (tolerations the API server adds)
        from ..cluster.admission import detect

        constraints = detect(snapshot).admit(constraints, group.pods[0].requests)
    return build(snapshot, unit, constraints=constraints, plan=mine, queue=[group] if group is not None else [],
                 nodes=nodes)
