"""Read the cluster into the pure model: nodes and pods as a Snapshot, with what placement also reads."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..cluster.model import Node, Snapshot
from ..cluster.read import (
    claim_from_object,
    node_from_object,
    pod_from_object,
    storage_class_from_object,
    volume_from_object,
)
from ..errors import DetK8sError, MalformedObject
from .api import KubeApi
from .kinds import NAMESPACES, NODES, PODS, PVCS, PVS, STORAGECLASSES, Kind


def read_nodes(api: KubeApi) -> tuple[Node, ...]:
    try:
        return tuple(node_from_object(obj) for obj in api.iter_list(NODES))
    except MalformedObject as exc:  # not from a real API server, but never a traceback either
        raise exc.at(f"cluster {api.target.context}") from exc


def _optional(api: KubeApi, kind: Kind, read: Callable[[Any], Any]) -> tuple[list[Any], bool]:
    """Every object of a kind placement only sometimes needs; ([], False) when it cannot be listed (RBAC)."""
    try:
        return [read(obj) for obj in api.iter_list(kind, all_namespaces=kind.namespaced)], True
    except DetK8sError:
        return [], False


def read_snapshot(api: KubeApi) -> Snapshot:
    """Every node, and every pod in every namespace that holds or may hold node resources.

    Also the PersistentVolumeClaims, PersistentVolumes, StorageClasses and Namespaces the volume
    and pod affinity rules read; a kind the user may not list is left out, and planning then
    warns about the pods that need it instead of guessing.
    """
    try:
        pods = tuple(
            pod_from_object(obj)
            for obj in api.iter_list(PODS, all_namespaces=True,
                                     field_selector="status.phase!=Succeeded,status.phase!=Failed")
        )
    except MalformedObject as exc:
        raise exc.at(f"cluster {api.target.context}") from exc
    listed = {"Node", "Pod"}
    claims, ok = _optional(api, PVCS, claim_from_object)
    listed |= {"PersistentVolumeClaim"} if ok else set()
    volumes, ok = _optional(api, PVS, volume_from_object)
    listed |= {"PersistentVolume"} if ok else set()
    classes, ok = _optional(api, STORAGECLASSES, storage_class_from_object)
    listed |= {"StorageClass"} if ok else set()
    names: Iterable[Any]
    names, ok = _optional(api, NAMESPACES, lambda obj: obj.get("metadata") or {})
    listed |= {"Namespace"} if ok else set()
    namespaces = {str(meta.get("name") or ""): {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
                  for meta in names}
    return Snapshot(read_nodes(api), pods, tuple(claims), tuple(volumes), tuple(classes), namespaces,
                    frozenset(listed))
