"""What `det-k8s uninstall` deletes and what it keeps, said before anything is deleted.

The documents' warning: with the bundled Postgres, uninstalling "permanently removes all records
of your experiments". det-k8s's bundled chart marks the database volume
`helm.sh/resource-policy: keep`, so helm leaves it (and the records) behind; a chart without
that annotation deletes it with the release. `--delete-data` deletes the kept volume too, and
then the loss is permanent again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..labels import KEEP_POLICY
from .names import db_pvc


@dataclass(frozen=True)
class LossSummary:
    deleted: tuple[str, ...]
    kept: tuple[str, ...]
    permanent_loss: bool  # experiment records are destroyed
    pvc_kept: bool  # the database volume survives helm uninstall
    volume_fate: str | None = None  # what becomes of the claim's PersistentVolume when the claim is deleted


def _keeps(pvc: Mapping[str, Any]) -> bool:
    return ((pvc.get("metadata") or {}).get("annotations") or {}).get(KEEP_POLICY) == "keep"


def summarize(release: str, namespace: str, objects: Sequence[Mapping[str, Any]], *, bundled_db: bool,
              pvc: Mapping[str, Any] | None, task_pods: int, task_configmaps: int, delete_data: bool,
              keep_pods: bool, task_jobs: int = 0, job_pods: int = 0,
              volume: Mapping[str, Any] | None = None) -> LossSummary:
    """`objects` are the release's namespaced objects (labelled release=<release>), the PVC excluded; the task
    objects are the master's bare pods, its Jobs (0.34+) with the pods they take, and their ConfigMaps."""
    deleted = [f"{obj.get('kind', '?')} {(obj.get('metadata') or {}).get('name', '?')}" for obj in objects
               if obj.get("kind") != "PersistentVolumeClaim"]
    deleted.append(f"the ServiceAccount and cluster RBAC objects determined-master-{release}")
    kept: list[str] = []
    permanent = False
    pvc_kept = False
    pvc_name = db_pvc(release)
    delete_cmd = f"kubectl delete pvc {pvc_name} -n {namespace}"
    if bundled_db:
        if pvc is None:
            deleted.append("the bundled Postgres, which keeps its data inside its pod: ALL EXPERIMENT RECORDS, "
                           "permanently")
            permanent = True
        elif _keeps(pvc) and not delete_data:
            kept.append(f"the database volume {pvc_name} with every experiment record ({KEEP_POLICY}: keep); "
                        f"a later install of release {release} in {namespace} finds them again. To delete them "
                        f"for good: {delete_cmd}, or uninstall with --delete-data")
            pvc_kept = True
        else:
            why = "--delete-data" if _keeps(pvc) else "the chart does not keep it"
            fate = volume_fate(pvc, volume)
            if fate is not None and fate.stays:
                deleted.append(f"the database volume claim {pvc_name} ({why})")
                kept.append(fate.text)
            else:
                deleted.append(f"the database volume {pvc_name} ({why}): ALL EXPERIMENT RECORDS in the bundled "
                               "Postgres, permanently" + (f"; {fate.text}" if fate is not None else ""))
                permanent = True
            return LossSummary(*_tasks(deleted, kept, task_pods, task_configmaps, task_jobs, job_pods, keep_pods),
                               permanent, pvc_kept, fate.text if fate is not None else None)
    else:
        kept.append("experiment records: they live in your external database (db.hostAddress)")
    return LossSummary(*_tasks(deleted, kept, task_pods, task_configmaps, task_jobs, job_pods, keep_pods), permanent,
                       pvc_kept)


def _tasks(deleted: list[str], kept: list[str], task_pods: int, task_configmaps: int, task_jobs: int, job_pods: int,
           keep_pods: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if task_pods or task_configmaps or task_jobs:
        jobs = f"{task_jobs} task Job(s) labelled determined with their {job_pods} pod(s), " if task_jobs else ""
        what = f"{jobs}{task_pods} task pod(s) labelled determined and {task_configmaps} task ConfigMap(s)"
        if keep_pods:
            kept.append(f"{what} (--keep-pods)")
        else:
            deleted.append(f"{what}: running experiments stop")
    return tuple(deleted), tuple(kept)


@dataclass(frozen=True)
class VolumeFate:
    text: str
    stays: bool  # the PersistentVolume and its data outlive the claim


def volume_fate(pvc: Mapping[str, Any], volume: Mapping[str, Any] | None) -> VolumeFate | None:
    """What deleting the database's claim does to its PersistentVolume: reclaimPolicy Retain (every volume made by
    hand, and classes that say so) keeps it, Released, with the data; Delete has the provisioner delete it (and the
    data); None when the claim is bound to none (or it could not be read)."""
    name = str((pvc.get("spec") or {}).get("volumeName") or "")
    if not name or volume is None:
        return None
    policy = str((volume.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "Retain")
    if policy == "Delete":
        return VolumeFate(f"its PersistentVolume {name} (reclaimPolicy Delete) is deleted with it, and the data",
                          False)
    return VolumeFate(f"the PersistentVolume {name} (reclaimPolicy {policy}) with every experiment record on it: "
                      f"it stays, Released, once its claim is deleted; to delete the records for good: kubectl delete "
                      f"pv {name}, then the storage behind it where it lives", True)
