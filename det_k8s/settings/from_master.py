"""Scheduling settings read back from an installed master's configuration.

A researcher submitting an experiment should not need the admin's settings file: the installed
chart's ConfigMap holds the master's `master.yaml`, whose `resource_manager` and
`task_container_defaults` sections carry exactly what a pod group is built from
(max_slots_per_pod, slot_type, slot_resource_requests, the default pod specs and images). This
turns that text back into chart values keys.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..safe_read import load_yaml


def values_from_master_config(text: str, where: str) -> dict[str, Any]:
    """Chart values (maxSlotsPerPod, slotType, ...) from a master.yaml; missing parts are left out."""
    config = load_yaml(text, f"{where}: master.yaml") or {}
    if not isinstance(config, dict):
        raise InputError(f"{where}: master.yaml is not a mapping")
    rm = config.get("resource_manager") or {}
    tcd = config.get("task_container_defaults") or {}
    values: dict[str, Any] = {}
    if rm.get("max_slots_per_pod") is not None:
        values["maxSlotsPerPod"] = rm["max_slots_per_pod"]
    if rm.get("slot_type"):
        values["slotType"] = rm["slot_type"] if rm["slot_type"] in ("cpu", "rocm") else "gpu"  # cuda is gpu
    cpu = (rm.get("slot_resource_requests") or {}).get("cpu")
    if cpu is not None:
        values["slotResourceRequests"] = {"cpu": cpu}
    if rm.get("default_scheduler"):
        values["defaultScheduler"] = rm["default_scheduler"]
    defaults: dict[str, Any] = {}
    image = tcd.get("image") or {}
    if isinstance(image, dict) and image.get("cpu") and image.get("gpu"):
        defaults.update(cpuImage=image["cpu"], gpuImage=image["gpu"])
    for ours, theirs in (("cpuPodSpec", "cpu_pod_spec"), ("gpuPodSpec", "gpu_pod_spec")):
        if isinstance(tcd.get(theirs), dict):
            defaults[ours] = tcd[theirs]
    if tcd.get("force_pull_image") is not None:
        defaults["forcePullImage"] = bool(tcd["force_pull_image"])
    if defaults:
        values["taskContainerDefaults"] = defaults
    return values
