"""Experiment files: Determined's experiment-config keys, the ones det-k8s reads checked strictly.

det-k8s reads `name`, `resources.slots_per_trial`, `resources.priority`, `environment.image`,
`environment.environment_variables`, `environment.pod_spec`, `environment.force_pull_image` and
`entrypoint`. Every other key of Determined's config (hyperparameters, searcher, data, ...) is
allowed and ignored, so one file serves both `det experiment create` and det-k8s. Wrong types
in the keys det-k8s reads are errors naming the key path and file:line; keys Determined does
not know are warnings with a suggestion (a typo in `slots_per_trial` must not go unnoticed).
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ExperimentError, Problem, Severity
from ..settings.problems import HasProblems, ProblemCollector
from ..settings.source import Path, format_path, load_yaml_text, type_name
from .model import DEFAULT_PRIORITY

TOP_LEVEL_KEYS = frozenset({
    "bind_mounts", "checkpoint_policy", "checkpoint_storage", "data", "data_layer", "debug", "description",
    "entrypoint", "environment", "hyperparameters", "integrations", "internal", "labels", "log_policies",
    "max_restarts", "min_checkpoint_period", "min_validation_period", "name", "optimizations", "pbs",
    "perform_initial_validation", "preemption_timeout", "profiling", "project", "records_per_epoch",
    "reproducibility", "resources", "retention_policy", "scheduling_unit", "searcher", "security", "slurm",
    "tensorboard_storage", "workspace",
})
RESOURCES_KEYS = frozenset({"agent_label", "devices", "is_single_node", "max_slots", "native_parallel",
                            "priority", "resource_pool", "shm_size", "slots", "slots_per_trial", "weight"})
ENVIRONMENT_KEYS = frozenset({"add_capabilities", "drop_capabilities", "environment_variables",
                              "force_pull_image", "image", "pod_spec", "ports", "proxy_ports",
                              "registry_auth"})
DEVICE_TYPES = ("cpu", "gpu", "cuda", "rocm")  # keys of Determined's per-device image and variable maps
PRIORITY_RANGE = (1, 99)  # Determined's expconf bounds for resources.priority
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_TRIAL_CLASS = re.compile(r"^[\w.]+:\w+$")  # model_def:MyTrial, the legacy Trial API


@dataclass(frozen=True)
class Experiment:
    """What det-k8s needs of an experiment config. Images and variables are per slot type."""

    name: str
    slots_per_trial: int = 1
    priority: int = DEFAULT_PRIORITY
    image_cpu: str | None = None
    image_gpu: str | None = None
    pod_spec: Mapping[str, Any] | None = None
    entrypoint: tuple[str, ...] = ()
    env_cpu: tuple[tuple[str, str], ...] = ()
    env_gpu: tuple[tuple[str, str], ...] = ()
    force_pull_image: bool = False
    source: str = ""
    config: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def image(self, gpu: bool) -> str | None:
        return self.image_gpu if gpu else self.image_cpu

    def environment_variables(self, gpu: bool) -> tuple[tuple[str, str], ...]:
        return self.env_gpu if gpu else self.env_cpu


@dataclass
class ParsedExperiment(HasProblems):
    experiment: Experiment | None
    problems: list[Problem]

    def get(self) -> Experiment:
        """The experiment; raises ExperimentError listing every error when there are any."""
        if self.errors or self.experiment is None:
            raise ExperimentError(self.errors)
        return self.experiment


class _Reader(ProblemCollector):
    """Reads the keys det-k8s uses, collecting a problem for each one of the wrong type."""

    def mapping(self, value: Any, path: Path) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping, found {type_name(value)}")
            return {}
        return value

    def integer(self, value: Any, path: Path, default: int, low: int, high: int | None = None) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            hint = "write it without quotes" if isinstance(value, str) and value.strip().isdigit() else None
            self.error(path, f"expected an integer, found {type_name(value)}", hint)
            return default
        if value < low or (high is not None and value > high):
            bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
            self.error(path, f"must be {bounds}, found {value}")
            return default
        return value

    def string(self, value: Any, path: Path) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.error(path, f"expected a non-empty string, found {type_name(value)}")
            return None
        return value

    def unknown(self, data: Mapping[str, Any], known: frozenset[str], path: Path, what: str) -> None:
        for key in data:
            if key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
                hint = f"did you mean {format_path((*path, close[0]))}?" if close else None
                self.add(Severity.WARNING, (*path, key), f"not a key of Determined's {what}; ignored", hint)


def _variables(reader: _Reader, value: Any, path: Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """Either a list of KEY=VALUE, a mapping per device type of such lists, or a plain mapping."""
    if value is None:
        return {}
    if isinstance(value, dict) and value and all(k in DEVICE_TYPES and (v is None or isinstance(v, list))
                                                 for k, v in value.items()):
        out = {k: _variables(reader, v, (*path, k)).get("all", ()) for k, v in value.items()}
        return {"cpu": out.get("cpu", ()), "gpu": out.get("gpu", ()) + out.get("cuda", ())}
    pairs: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) or item is None:
                reader.error((*path, key), f"expected a string or number, found {type_name(item)}")
            else:
                pairs.append((str(key), str(item).lower() if isinstance(item, bool) else str(item)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if not isinstance(item, str) or "=" not in item:
                reader.error((*path, i), f"expected KEY=VALUE, found {item!r}", "for example NCCL_DEBUG=INFO")
            else:
                key, _, text = item.partition("=")
                pairs.append((key, text))
    else:
        reader.error(path, f"expected a list of KEY=VALUE or a mapping, found {type_name(value)}")
    for key, _ in pairs:
        if not _ENV_NAME.fullmatch(key):
            reader.error(path, f"{key!r} is not a valid environment variable name",
                         "use letters, digits, '_', '-' and '.', not starting with a digit")
    return {"all": tuple(pairs)}


def _images(reader: _Reader, value: Any, path: Path) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, str):
        image = reader.string(value, path)
        return image, image
    if not isinstance(value, dict):
        reader.error(path, f"expected an image name or a mapping with cpu and gpu, found {type_name(value)}")
        return None, None
    for key in value:
        if key not in DEVICE_TYPES:
            reader.error((*path, key), "unknown device type", "use cpu and gpu (or cuda)")
    cpu = reader.string(value.get("cpu"), (*path, "cpu"))
    gpu = reader.string(value.get("gpu") if value.get("gpu") is not None else value.get("cuda"),
                        (*path, "gpu" if value.get("gpu") is not None else "cuda"))
    return cpu, gpu


def _pod_spec(reader: _Reader, value: Any, path: Path) -> Mapping[str, Any] | None:
    spec = reader.mapping(value, path)
    if not spec:
        return None
    if spec.get("kind") not in (None, "Pod"):
        reader.error((*path, "kind"), f"must be Pod, found {spec.get('kind')!r}")
    inner = spec.get("spec")
    if inner is not None and not isinstance(inner, dict):
        reader.error((*path, "spec"), f"expected a mapping, found {type_name(inner)}")
    elif isinstance(inner, dict):
        for key in ("containers", "initContainers", "tolerations", "volumes"):
            if inner.get(key) is not None and not isinstance(inner[key], list):
                reader.error((*path, "spec", key), f"expected a list, found {type_name(inner[key])}")
        selector = inner.get("nodeSelector")
        if selector is not None and not isinstance(selector, dict):
            reader.error((*path, "spec", "nodeSelector"), f"expected a mapping, found {type_name(selector)}")
    return spec


def _entrypoint(reader: _Reader, value: Any, path: Path) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        command = tuple(value)
    elif isinstance(value, str):
        try:
            command = tuple(shlex.split(value))
        except ValueError as exc:
            reader.error(path, f"cannot split into a command: {exc}", "balance the quotes")
            return ()
    else:
        reader.error(path, f"expected a command string or a list of strings, found {type_name(value)}")
        return ()
    if len(command) == 1 and _TRIAL_CLASS.fullmatch(command[0]):
        reader.add(Severity.WARNING, path, f"{command[0]!r} looks like a Trial class; det-k8s runs "
                   "entrypoint as the container command", "use a launcher command, e.g. python3 train.py")
    return command


def parse_experiment(text: str, source: str, *, default_name: str | None = None) -> ParsedExperiment:
    """Read one experiment file. Problems are collected, never raised (`ParsedExperiment.get` raises)."""
    loaded = load_yaml_text(text, source)
    reader = _Reader(loaded.sources)
    reader.problems.extend(loaded.problems)
    data = loaded.data
    if not isinstance(data, dict):
        reader.error((), f"{source}: expected a mapping of experiment config keys, found {type_name(data)}",
                     "an experiment file is YAML with keys such as name, resources and entrypoint")
        return ParsedExperiment(None, reader.problems)
    reader.unknown(data, TOP_LEVEL_KEYS, (), "experiment config")
    resources = reader.mapping(data.get("resources"), ("resources",))
    reader.unknown(resources, RESOURCES_KEYS, ("resources",), "resources")
    environment = reader.mapping(data.get("environment"), ("environment",))
    reader.unknown(environment, ENVIRONMENT_KEYS, ("environment",), "environment")
    name = reader.string(data.get("name"), ("name",)) or default_name or source
    force = environment.get("force_pull_image")
    if force is not None and not isinstance(force, bool):
        reader.error(("environment", "force_pull_image"), f"expected true or false, found {type_name(force)}")
    cpu_image, gpu_image = _images(reader, environment.get("image"), ("environment", "image"))
    variables = _variables(reader, environment.get("environment_variables"),
                           ("environment", "environment_variables"))
    experiment = Experiment(
        name=name,
        slots_per_trial=reader.integer(resources.get("slots_per_trial"), ("resources", "slots_per_trial"),
                                       1, 0),
        priority=reader.integer(resources.get("priority"), ("resources", "priority"), DEFAULT_PRIORITY,
                                *PRIORITY_RANGE),
        image_cpu=cpu_image,
        image_gpu=gpu_image,
        pod_spec=_pod_spec(reader, environment.get("pod_spec"), ("environment", "pod_spec")),
        entrypoint=_entrypoint(reader, data.get("entrypoint"), ("entrypoint",)),
        env_cpu=variables.get("cpu", variables.get("all", ())),
        env_gpu=variables.get("gpu", variables.get("all", ())),
        force_pull_image=force is True,
        source=source,
        config=data,
    )
    return ParsedExperiment(experiment, reader.problems)
