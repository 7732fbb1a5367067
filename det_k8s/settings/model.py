"""The typed settings other parts of det-k8s read (scheduler, storage probes, release commands).

Built only from values that passed validation, so its fields have their documented types.
Secret fields are excluded from `repr`, so a settings object in a log or a traceback shows no
password.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..determined.versions import DEFAULT, Version, has, parse_version, value_of
from ..quantity import parse_quantity
from .problems import get_path

_SLOT_TYPES = {"gpu": "gpu", "cuda": "gpu", "cpu": "cpu", "rocm": "rocm"}  # the master reads gpu as cuda


@dataclass(frozen=True)
class CheckpointStorage:
    type: str
    host_path: str | None = None
    bucket: str | None = None
    prefix: str | None = None
    endpoint_url: str | None = None
    container: str | None = None
    account_url: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    connection_string: str | None = field(default=None, repr=False)
    credential: str | None = field(default=None, repr=False)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret strings in use, so error texts built from SDK messages can be scrubbed."""
        return tuple(s for s in (self.access_key, self.secret_key, self.connection_string, self.credential) if s)


@dataclass(frozen=True)
class TaskDefaults:
    cpu_pod_spec: Mapping[str, Any] | None = None
    gpu_pod_spec: Mapping[str, Any] | None = None
    cpu_image: str | None = None
    gpu_image: str | None = None
    force_pull_image: bool = False


@dataclass(frozen=True)
class Settings:
    """Validated settings. `values` is the full effective values mapping (defaults merged in)."""

    values: Mapping[str, Any] = field(repr=False)
    app_version: str
    max_slots_per_pod: int | None
    slot_type: str
    cpu_per_slot: Fraction | None
    default_scheduler: str  # trimmed, as the official chart trims it
    checkpoint: CheckpointStorage
    external_db: str | None
    image_registry: str
    image_pull_secret: str | None
    tls_secret: str | None
    use_node_port: bool
    master_port: int
    task_defaults: TaskDefaults

    @property
    def bundled_db(self) -> bool:
        """True when the chart runs its own Postgres (uninstall then destroys experiment records)."""
        return not self.external_db

    @property
    def version(self) -> Version:
        """The Determined release the settings are for (appVersion; the default when it names none)."""
        return parse_version(self.app_version) or DEFAULT

    def default_task_image(self, gpu: bool) -> str:
        """The task image the release's official chart gives the master when none is set: before 0.23.2 under
        imageRegistry, later defaultImages.cpuImage/gpuImage (the version table's defaults)."""
        key = "chart.image.gpu" if gpu else "chart.image.cpu"
        image = str(value_of(key, self.version) or "")
        if has("chart.image_registry_prefixes_task_images", self.version):
            return f"{self.image_registry}/{image}"
        chosen = get_path(self.values, ("defaultImages", "gpuImage" if gpu else "cpuImage"))
        return str(chosen) if chosen else image

    def max_slots_per_pod_in(self, pool: str | None, slots: int) -> int | None:
        """maxSlotsPerPod for a task of `slots` slots in resource pool `pool` (None: the default compute pool, or
        aux pool for zero slots): the pool's own task_container_defaults.kubernetes.max_slots_per_pod where the
        release reads it, as the master's Kubernetes resource manager does; else maxSlotsPerPod."""
        if not has("master.resource_pools.max_slots_per_pod", self.version):
            return self.max_slots_per_pod
        default = "defaultComputeResourcePool" if slots > 0 else "defaultAuxResourcePool"
        name = pool or get_path(self.values, (default,)) or "default"
        pools = get_path(self.values, ("resourcePools",))
        for entry in pools if isinstance(pools, list) else ():
            if isinstance(entry, Mapping) and entry.get("pool_name") == name:
                own = get_path(entry, ("task_container_defaults", "kubernetes", "max_slots_per_pod"))
                if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
                    return own
        return self.max_slots_per_pod

    @property
    def slot_resource(self) -> str:
        return {"cpu": "cpu", "rocm": "amd.com/gpu"}.get(self.slot_type, "nvidia.com/gpu")

    def slot_request(self, slots: int) -> dict[str, Fraction]:
        """What a pod with `slots` slots asks Kubernetes for."""
        if self.slot_type == "cpu":
            assert self.cpu_per_slot is not None
            return {"cpu": self.cpu_per_slot * slots}
        return {self.slot_resource: Fraction(slots)}


def build_settings(values: Mapping[str, Any], app_version: str) -> Settings:
    """Build typed settings from effective values that passed validation."""
    cs = get_path(values, ("checkpointStorage",)) or {}
    tcd = get_path(values, ("taskContainerDefaults",)) or {}
    cpu = get_path(values, ("slotResourceRequests", "cpu"))
    return Settings(
        values=values,
        app_version=app_version,
        max_slots_per_pod=get_path(values, ("maxSlotsPerPod",)),
        slot_type=_SLOT_TYPES.get(get_path(values, ("slotType",)) or "gpu", "gpu"),
        cpu_per_slot=parse_quantity(cpu) if cpu is not None else None,
        default_scheduler=(get_path(values, ("defaultScheduler",)) or "").strip(),
        checkpoint=CheckpointStorage(
            type=cs.get("type") or "shared_fs",
            host_path=cs.get("hostPath"),
            bucket=cs.get("bucket"),
            prefix=cs.get("prefix"),
            endpoint_url=cs.get("endpointUrl"),
            container=cs.get("container"),
            account_url=cs.get("account_url"),
            access_key=cs.get("accessKey"),
            secret_key=cs.get("secretKey"),
            connection_string=cs.get("connection_string"),
            credential=cs.get("credential"),
        ),
        external_db=get_path(values, ("db", "hostAddress")) or None,
        image_registry=get_path(values, ("imageRegistry",)) or "determinedai",
        image_pull_secret=get_path(values, ("imagePullSecretName",)) or None,
        tls_secret=get_path(values, ("tlsSecret",)) or None,
        use_node_port=bool(get_path(values, ("useNodePortForMaster",))),
        master_port=int(get_path(values, ("masterPort",)) or 8080),
        task_defaults=TaskDefaults(
            cpu_pod_spec=tcd.get("cpuPodSpec"),
            gpu_pod_spec=tcd.get("gpuPodSpec"),
            cpu_image=tcd.get("cpuImage"),
            gpu_image=tcd.get("gpuImage"),
            force_pull_image=bool(tcd.get("forcePullImage")),
        ),
    )
