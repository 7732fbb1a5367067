"""Read the cluster into the pure model: nodes and pods as a Snapshot."""

from __future__ import annotations

from ..cluster.model import Node, Snapshot
from ..cluster.read import node_from_object, pod_from_object
from ..errors import MalformedObject
from .api import KubeApi
from .kinds import NODES, PODS


def read_nodes(api: KubeApi) -> tuple[Node, ...]:
    try:
        return tuple(node_from_object(obj) for obj in api.iter_list(NODES))
    except MalformedObject as exc:  # not from a real API server, but never a traceback either
        raise exc.at(f"cluster {api.target.context}") from exc


def read_snapshot(api: KubeApi) -> Snapshot:
    """Every node, and every pod in every namespace that holds or may hold node resources."""
    try:
        pods = tuple(
            pod_from_object(obj)
            for obj in api.iter_list(PODS, all_namespaces=True,
                                     field_selector="status.phase!=Succeeded,status.phase!=Failed")
        )
    except MalformedObject as exc:
        raise exc.at(f"cluster {api.target.context}") from exc
    return Snapshot(read_nodes(api), pods)
