"""Snapshots that cannot be right: what `plan` and `validate --nodes` say before they trust one.

A real cluster always runs pods (kube-system, DaemonSets): a snapshot with nodes and no pods makes
every node look free, which is what `kubectl get nodes` (not `nodes,pods -A`) or the wrong context
gives. A snapshot with no nodes cannot be planned on at all.
"""

from __future__ import annotations

from ..errors import InputError
from .model import Snapshot


def require_nodes(snapshot: Snapshot, origin: str) -> None:
    """Raise InputError (exit 1) for a snapshot without nodes."""
    if not snapshot.nodes:
        raise InputError(f"{origin} lists no nodes: nothing can be planned on it",
                         hint="take it with `kubectl get nodes,pods -A -o json > snapshot.json`")


def snapshot_warnings(snapshot: Snapshot, origin: str, *, pods_expected: bool = True) -> list[str]:
    """Why the snapshot may not show the cluster as it is (empty when nothing looks wrong)."""
    warnings = []
    if pods_expected and snapshot.nodes and not snapshot.pods:
        warnings.append(f"{origin} lists {len(snapshot.nodes)} node(s) and no pods, so every node looks free; a "
                        "real cluster always runs some (kube-system, DaemonSets): take it with "
                        "`kubectl get nodes,pods -A -o json` (-A: all namespaces)")
    bare = [node.name for node in snapshot.nodes if set(node.allocatable) <= {"pods"}]
    if bare:
        warnings.append(f"{origin}: node {bare[0]}{f' and {len(bare) - 1} more' if len(bare) > 1 else ''} "
                        "report no allocatable resources (no status.allocatable): nothing fits there")
    if snapshot.nodes and not any(node.ready for node in snapshot.nodes):
        warnings.append(f"{origin}: all {len(snapshot.nodes)} node(s) are NotReady")
    known = snapshot.nodes_by_name
    lost = sorted({pod.node for pod in snapshot.pods if pod.active and pod.node and pod.node not in known})
    if lost:
        warnings.append(f"{origin}: pods are bound to {len(lost)} node(s) the snapshot does not list "
                        f"(e.g. {lost[0]}): it may mix two clusters or two moments")
    return warnings
