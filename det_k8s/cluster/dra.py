"""Dynamic Resource Allocation as det-k8s sees it: which nodes' devices a claim allocation would hand out.

Kubernetes 1.34 made DRA GA (`resource.k8s.io/v1`); 1.37 made DRA-backed extended resources GA (KEP-5004,
feature gate `DRAExtendedResource`, locked on). A DeviceClass with `spec.extendedResourceName` (or any class,
under the implicit name `deviceclass.resource.kubernetes.io/<class>`) lets a pod ask `nvidia.com/gpu: 1` and get a
device of that class through a ResourceClaim *the scheduler* creates and allocates, on every node whose
allocatable does not list the resource (kube-scheduler's `shouldDelegateResourceToDRA`, noderesources/fit.go):
the device plugin serves a node that lists it, DRA one that does not.

det-k8s allocates no claims: a pod it binds (`pods/binding`) without one is refused by the kubelet, and capacity
on a DRA node is not in its allocatable. So this module only tells the two apart, per node: the devices each
node's ResourceSlices publish (the newest generation of each pool), and which requested resource names a
DeviceClass maps to devices on a node that does not list them. The scheduling core makes such groups wait with a
reason that says so (`ReasonCode.DRA`), and the map counts those devices as DRA GPUs.

Which devices a class selects is a CEL expression; det-k8s reads the common `device.driver == "<driver>"` form and
otherwise takes the class to select every driver's devices (it cannot evaluate CEL), which only widens the
nodes a refusal names, never a placement.

Pure: objects in, frozen data out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .model import AMD_GPU, GPU, Node, Term, term_matches

API_VERSION = "resource.k8s.io/v1"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix
# The DRA drivers whose devices are GPUs (NVIDIA's k8s-dra-driver-gpu, AMD's k8s-gpu-dra-driver), for the map when
# no DeviceClass maps them to a GPU resource name.
GPU_DRIVERS = frozenset({"gpu.nvidia.com", "gpu.amd.com"})
GPU_RESOURCES = (GPU, AMD_GPU)
_DRIVER_IS = re.compile(r"""^\s*device\.driver\s*==\s*(?:"([^"]+)"|'([^']+)')\s*$""")


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A DeviceClass: its name, the extended resource name it serves (`spec.extendedResourceName`, "" when
    none) and the drivers its selectors name (None: not read from its CEL, so any driver's devices)."""

    name: str
    extended_resource: str = ""
    drivers: frozenset[str] | None = None

    def serves(self, resource: str) -> bool:
        """Does a pod's request of `resource` become a claim of this class (explicitly, or by the implicit name)?"""
        return resource == self.extended_resource or resource == IMPLICIT_PREFIX + self.name

    def selects(self, driver: str) -> bool:
        return self.drivers is None or driver in self.drivers


@dataclass(frozen=True, slots=True)
class DeviceSlice:
    """One ResourceSlice: the driver, the pool (name, generation, slices in it), where its devices are (a node
    by name, a node selector's terms, all nodes; per device when `perDeviceNodeSelection`), and how many."""

    name: str
    driver: str
    pool: str
    generation: int = 0
    node: str = ""
    node_terms: tuple[Term, ...] = ()  # spec.nodeSelector (ORed terms), when set
    all_nodes: bool = False
    devices: int = 0
    device_nodes: tuple[str, ...] = ()  # perDeviceNodeSelection: the node of each device that names one

    def on(self, node: Node) -> int:
        """How many of its devices are on `node`."""
        if self.node:
            return self.devices if self.node == node.name else 0
        if self.all_nodes:
            return self.devices
        if self.node_terms:
            return self.devices if any(term_matches(term, node) for term in self.node_terms) else 0
        return sum(1 for name in self.device_nodes if name == node.name)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_mapping(obj.get("metadata")).get("name") or "")


def device_class_from_object(obj: Mapping[str, Any]) -> DeviceClass:
    """A DeviceClass object read leniently (a field of another shape reads as absent)."""
    spec = _mapping(obj.get("spec"))
    drivers: set[str] = set()
    unread = False
    selectors = spec.get("selectors")
    for selector in selectors if isinstance(selectors, list) else ():
        expression = str(_mapping(_mapping(selector).get("cel")).get("expression") or "")
        match = _DRIVER_IS.match(expression)
        if match:
            drivers.add(match.group(1) or match.group(2))
        else:
            unread = True  # a selector det-k8s cannot evaluate: the class may select any driver's devices
    name = spec.get("extendedResourceName")
    return DeviceClass(_name(obj), name if isinstance(name, str) else "",
                       None if unread or not drivers else frozenset(drivers))


def device_slice_from_object(obj: Mapping[str, Any]) -> DeviceSlice:
    """A ResourceSlice object read leniently (a field of another shape reads as absent)."""
    from .read import node_terms

    spec = _mapping(obj.get("spec"))
    pool = _mapping(spec.get("pool"))
    raw_devices = spec.get("devices")
    devices: list[Any] = raw_devices if isinstance(raw_devices, list) else []
    generation = pool.get("generation")
    selector = spec.get("nodeSelector")
    per_device: list[str] = []
    if spec.get("perDeviceNodeSelection") is True:
        for device in devices:
            node = _mapping(device).get("nodeName")
            if isinstance(node, str) and node:
                per_device.append(node)
    terms: tuple[Term, ...] = ()
    if isinstance(selector, Mapping):
        try:
            terms = node_terms(selector)
        except (TypeError, AttributeError, ValueError):  # not a NodeSelector's shape: it selects no node
            terms = ((),)
    node = spec.get("nodeName")
    return DeviceSlice(
        _name(obj), str(spec.get("driver") or ""), str(pool.get("name") or ""),
        generation if isinstance(generation, int) and not isinstance(generation, bool) else 0,
        node if isinstance(node, str) else "", terms,
        spec.get("allNodes") is True, len(devices), tuple(per_device))


def current(slices: Iterable[DeviceSlice]) -> tuple[DeviceSlice, ...]:
    """The slices of each pool's newest generation (older ones are being replaced: the scheduler ignores them)."""
    slices = tuple(slices)
    newest: dict[tuple[str, str], int] = {}
    for item in slices:
        key = (item.driver, item.pool)
        newest[key] = max(newest.get(key, item.generation), item.generation)
    return tuple(item for item in slices if item.generation == newest[(item.driver, item.pool)])


@dataclass(frozen=True)
class DeviceView:
    """Per node, the devices the cluster's ResourceSlices publish, and what DRA serves where."""

    classes: tuple[DeviceClass, ...]
    devices: Mapping[str, Mapping[str, int]]  # node -> driver -> devices
    allocatable: Mapping[str, Mapping[str, int]]  # node -> its allocatable (milli-units)

    def serving(self, resource: str) -> DeviceClass | None:
        """The DeviceClass a request of `resource` maps to (sorted by name; the API server keeps them apart)."""
        for klass in self.classes:
            if klass.serves(resource):
                return klass
        return None

    def dra_nodes(self, resource: str) -> dict[str, int]:
        """Nodes on which kube-scheduler would serve a request of `resource` through DRA (their allocatable lacks
        it, a DeviceClass maps it, and they hold devices of that class), with how many devices."""
        klass = self.serving(resource)
        if klass is None:
            return {}
        found = {}
        for node, drivers in self.devices.items():
            if self.allocatable.get(node, {}).get(resource, 0) > 0:
                continue  # the device plugin serves it there
            count = sum(n for driver, n in drivers.items() if klass.selects(driver))
            if count > 0:
                found[node] = count
        return found

    def gpus(self, node: str) -> int:
        """DRA GPUs on `node`: devices of a class that serves a GPU resource name, or of a known GPU driver."""
        drivers = self.devices.get(node, {})
        gpu_classes = [k for k in self.classes if k.extended_resource in GPU_RESOURCES]
        return sum(n for driver, n in drivers.items()
                   if driver in GPU_DRIVERS or any(k.drivers is not None and driver in k.drivers for k in gpu_classes))

    def gpu_class(self, node: str) -> str:
        """The DeviceClass (or driver) those GPUs are served through, for the map's legend."""
        drivers = self.devices.get(node, {})
        for klass in self.classes:
            if klass.extended_resource in GPU_RESOURCES and any(klass.selects(d) for d in drivers):
                return klass.name
        return next((d for d in sorted(drivers) if d in GPU_DRIVERS), "")


def device_view(nodes: Iterable[Node], classes: Iterable[DeviceClass], slices: Iterable[DeviceSlice]) -> DeviceView:
    nodes = tuple(nodes)
    names = {node.name for node in nodes}
    per_node: dict[str, dict[str, int]] = {}
    for item in current(slices):
        if not item.devices:
            continue
        if item.node:  # the common case: a driver's slice for its own node
            if item.node in names:
                drivers = per_node.setdefault(item.node, {})
                drivers[item.driver] = drivers.get(item.driver, 0) + item.devices
            continue
        for node in nodes:
            count = item.on(node)
            if count:
                drivers = per_node.setdefault(node.name, {})
                drivers[item.driver] = drivers.get(item.driver, 0) + count
    return DeviceView(tuple(sorted(classes, key=lambda k: k.name)), per_node,
                      {node.name: node.allocatable for node in nodes})
