"""Read the cluster into the pure model: nodes and pods as a Snapshot, with what placement also reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cluster.model import Node, Pod, Snapshot
from ..cluster.quota import quota_from_object
from ..cluster.read import (
    claim_from_object,
    device_class_from_object,
    device_slice_from_object,
    node_from_object,
    pod_from_object,
    storage_class_from_object,
    volume_from_object,
)
from ..errors import DetK8sError, MalformedObject, NotFound
from .api import KubeApi
from .kinds import (
    DEVICECLASSES,
    NAMESPACES,
    NODES,
    PODS,
    PVCS,
    PVS,
    RESOURCEQUOTAS,
    RESOURCESLICES,
    STORAGECLASSES,
    Kind,
)


def read_nodes(api: KubeApi) -> tuple[Node, ...]:
    try:
        return tuple(node_from_object(obj) for obj in api.iter_list(NODES))
    except MalformedObject as exc:  # not from a real API server, but never a traceback either
        raise exc.at(f"cluster {api.target.context}") from exc


# What placement reads besides nodes and pods: claims, volumes and classes (volume binding), namespaces (pod
# affinity's namespace selectors), ResourceQuotas (what pod creation is refused for), by the kind name
# `Snapshot.listed` uses; DeviceClasses and ResourceSlices (DRA, cluster/dra.py) where the API server serves them.
PLACEMENT_KINDS: dict[Kind, str] = {PVCS: "PersistentVolumeClaim", PVS: "PersistentVolume",
                                    STORAGECLASSES: "StorageClass", NAMESPACES: "Namespace",
                                    RESOURCEQUOTAS: "ResourceQuota", DEVICECLASSES: "DeviceClass",
                                    RESOURCESLICES: "ResourceSlice"}
DRA_KINDS = (DEVICECLASSES, RESOURCESLICES)


def unserved(api: KubeApi) -> set[Kind]:
    """The PLACEMENT_KINDS the API server does not serve, by discovery: DRA's resource.k8s.io/v1 before 1.34 (or
    with the API group off). Another failure (a 403 on discovery) says nothing: the kinds are tried, and a kind the
    credentials may not list is left out then."""
    try:
        listing = api.request("GET", DEVICECLASSES.prefix, what="the API server's resource.k8s.io/v1 resources")
    except NotFound:
        return set(DRA_KINDS)
    except DetK8sError:
        return set()
    names = {str(item.get("name")) for item in (listing.get("resources") or () if isinstance(listing, Mapping) else ())
             if isinstance(item, Mapping)}
    return {kind for kind in DRA_KINDS if kind.plural not in names}


def placement_object(kind: Kind, obj: Mapping[str, Any]) -> Any:
    """One object of a PLACEMENT_KINDS kind in the model (a Namespace: its labels)."""
    if kind is PVCS:
        return claim_from_object(obj)
    if kind is PVS:
        return volume_from_object(obj)
    if kind is STORAGECLASSES:
        return storage_class_from_object(obj)
    if kind is RESOURCEQUOTAS:
        return quota_from_object(obj)
    if kind is DEVICECLASSES:
        return device_class_from_object(obj)
    if kind is RESOURCESLICES:
        return device_slice_from_object(obj)
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


def object_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def snapshot_of(nodes: tuple[Node, ...], pods: tuple[Pod, ...], found: Mapping[Kind, Mapping[tuple[str, str], Any]]
                ) -> Snapshot:
    """A Snapshot of nodes, pods and the placement objects `found` (kind -> key -> model); the kinds missing from
    `found` were not listed (planning then warns about the pods that need them instead of guessing)."""
    def models(kind: Kind) -> tuple[Any, ...]:
        return tuple(model for _, model in sorted((found.get(kind) or {}).items()))

    namespaces = {name: labels for (_, name), labels in sorted((found.get(NAMESPACES) or {}).items())}
    return Snapshot(nodes, pods, models(PVCS), models(PVS), models(STORAGECLASSES), namespaces,
                    frozenset({"Node", "Pod", *(PLACEMENT_KINDS[kind] for kind in found)}), models(RESOURCEQUOTAS),
                    models(DEVICECLASSES), models(RESOURCESLICES))


def read_placement_objects(api: KubeApi) -> dict[Kind, dict[tuple[str, str], Any]]:
    """Every object of the PLACEMENT_KINDS the credentials may list (a kind they may not is left out)."""
    found: dict[Kind, dict[tuple[str, str], Any]] = {}
    skip = unserved(api)
    for kind in PLACEMENT_KINDS:
        if kind in skip:
            continue
        try:
            found[kind] = {object_key(obj): placement_object(kind, obj)
                           for obj in api.iter_list(kind, all_namespaces=kind.namespaced)}
        except MalformedObject as exc:
            raise exc.at(f"cluster {api.target.context}") from exc
        except DetK8sError:
            continue
    return found


def read_snapshot(api: KubeApi) -> Snapshot:
    """Every node, and every pod in every namespace that holds or may hold node resources.

    Also the PersistentVolumeClaims, PersistentVolumes, StorageClasses and Namespaces the volume
    and pod affinity rules read, and the ResourceQuotas pod creation must pass; a kind the user may
    not list is left out, and planning then warns about the pods that need it instead of guessing.
    """
    try:
        pods = tuple(
            pod_from_object(obj)
            for obj in api.iter_list(PODS, all_namespaces=True,
                                     field_selector="status.phase!=Succeeded,status.phase!=Failed")
        )
    except MalformedObject as exc:
        raise exc.at(f"cluster {api.target.context}") from exc
    return snapshot_of(read_nodes(api), pods, read_placement_objects(api))
