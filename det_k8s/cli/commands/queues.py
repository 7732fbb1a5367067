"""`det-k8s queues`: each team queue's guarantee, use, borrowed and lent amounts, limit, and waiting groups."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import output
from ..options import OutputOpt, current, with_global_options
from ..output import OutputFormat

if TYPE_CHECKING:
    from collections.abc import Mapping


def _amounts(values: Mapping[str, int]) -> str:
    from ...scheduling.queues import unit

    return ", ".join(unit(name, amount) for name, amount in sorted(values.items())) or "-"


@with_global_options
def queues(output_format: OutputOpt = OutputFormat.table) -> None:
    """Show the team queues: guarantee, use, borrowed, lent, limit and waiting groups of each."""
    from ...live.lease import utcnow
    from ...live.queue import QUEUED, QueueStore
    from ...live.scheduler import dry_cluster, dry_plan
    from ...scheduling.plan import holding, running_in
    from ...scheduling.queues import QueueBook, report, unheld
    from ...scheduling.serialize import group_from_dict
    from ..live import effective_policy

    api = current().connect()
    policy = effective_policy(api)
    if policy.queues is None:  # nothing to show is no failure (exit 0), as `det-k8s list` with no release
        if output_format is not OutputFormat.table:
            output.data({"namespace": api.namespace, "default_queue": None, "queues": []}, output_format)
        output.message(f"namespace {api.namespace} has no team queues; set them with `det-k8s scheduler policy "
                       "--queues FILE` (try them first: det-k8s plan --policy)")
        return
    cluster = dry_cluster(api)
    entries = [e for e in QueueStore(api, api.namespace).entries() if e.state == QUEUED]
    plan = dry_plan(cluster, entries, policy, now=utcnow(), namespace=api.namespace)
    running = [*running_in(cluster.snapshot, api.namespace), *cluster.master_running]
    book = QueueBook(policy.queues, holding(cluster.snapshot, running), cluster.snapshot.pods)
    queued = [group_from_dict(e.group) for e in entries] + list(cluster.master_queue)
    rows = report(policy.queues, book, [g for g in queued if g.id not in plan.placements])
    totals: dict[str, int] = {}
    for item in cluster.snapshot.nodes:
        if item.ready and not item.unschedulable:
            for name, amount in item.allocatable.items():
                totals[name] = totals.get(name, 0) + amount
    for line in unheld(policy.queues, totals):
        output.warning(line)
    if output_format is not OutputFormat.table:
        output.data({"namespace": api.namespace, "default_queue": policy.queues.default,
                     "queues": [row.to_dict() for row in rows]}, output_format)
        return
    output.table(["QUEUE", "GUARANTEE", "USE", "BORROWED", "LENT", "LIMIT", "WEIGHT", "RUNNING", "WAITING"],
                 [["  " * row.depth + row.name, _amounts(row.guarantee), _amounts(row.used), _amounts(row.borrowed),
                   _amounts(row.lent), _amounts(row.limit), f"{row.weight:g}", len(row.running), len(row.waiting)]
                  for row in rows])
