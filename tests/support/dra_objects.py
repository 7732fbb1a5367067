"""DRA objects (resource.k8s.io/v1) as the API server returns them, for tests on both backends."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"


def device_class(name: str = "gpu.example.com", *, extended: str | None = "nvidia.com/gpu",
                 expression: str | None = f'device.driver == "{DRIVER}"') -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if expression is not None:
        spec["selectors"] = [{"cel": {"expression": expression}}]
    if extended is not None:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def resource_slice(node: str, devices: int = 8, *, driver: str = DRIVER, generation: int = 1,
                   pool: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}-{generation}"},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}
