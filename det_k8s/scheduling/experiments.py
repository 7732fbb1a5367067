"""Experiment files: Determined's experiment-config keys, the ones det-k8s reads checked strictly.

det-k8s reads `name`, `resources.slots_per_trial`, `resources.priority`, `environment.image`,
`environment.environment_variables`, `environment.pod_spec`, `environment.force_pull_image`,
`entrypoint`, and `workspace` and `resources.resource_pool` (its pods carry them as the master's carry
theirs, `determined.ai/workspace` and `determined.ai/resource_pool`, so team queues match it by them).
Every other key of Determined's config (hyperparameters, searcher, data, ...) is
checked only for its name and otherwise ignored, so one file serves both `det experiment create` and
det-k8s. Wrong types in the keys det-k8s reads are errors naming the key path and file:line. Every key
is checked against the experiment-config keys of the Determined release in use (`check_keys`, with
`det_k8s/determined/expconf.py`): a key that release does not know is an error, as its master refuses
such an experiment, with the closest key it does know (`resources.slot_per_trial` must never become a
1-GPU plan).
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..determined import expconf
from ..determined.versions import DEFAULT, Version
from ..errors import ExperimentError, Problem, Severity
from ..labels import MASTER_LABELS
from ..names import is_label_value
from ..safe_read import type_name
from ..settings.podspec import check_pod_spec
from ..settings.problems import HasProblems, ProblemCollector
from ..settings.source import Path, SourceMap, format_path, load_yaml_text
from .model import DEFAULT_PRIORITY
from .searchers import searcher_problems

DEVICE_TYPES = ("cpu", "gpu", "cuda", "rocm")  # the keys of per-device image and variable maps (expconf.DEVICE_KEYS)
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
    workspace: str | None = None  # `workspace`: a team queue's member, as the master's pods' label names it
    resource_pool: str | None = None  # `resources.resource_pool`: likewise
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
        reader.add(Severity.WARNING, path, "a mapping of names to values is det-k8s's own form: Determined's master "
                   "refuses it (environment-variables.json takes a list, or a mapping of cpu, cuda and rocm to lists)",
                   "write a list of KEY=VALUE, e.g. [NCCL_DEBUG=INFO], so the file also runs with det experiment create")
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
    reader.problems.extend(check_pod_spec(spec, path, reader.sources))  # the Kubernetes Pod schema
    meta = spec.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    for key in (k for k in MASTER_LABELS if isinstance(labels, Mapping) and k in labels):
        reader.error((*path, "metadata", "labels", key), "a label the Determined master acts on (it deletes pods "
                     "labelled determined when it starts, preempts those labelled determined-preemption, counts "
                     "determined-system pods as its own); det-k8s's pods must not carry it",
                     "remove it, or use another label")
    return spec or None


def _member(reader: _Reader, value: Any, path: Path, what: str) -> str | None:
    """A workspace or resource pool name, which det-k8s's pods carry as the master's carry theirs
    (`determined.ai/workspace`, `determined.ai/resource_pool`): team queues name their members by it."""
    name = reader.string(value, path)
    if name is not None and not is_label_value(name):
        reader.add(Severity.WARNING, path, f"{what} {name!r} cannot be a Kubernetes label value, so det-k8s's pods "
                   f"cannot carry it and no team queue's {what}s match this experiment",
                   "use at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit")
        return None
    return name


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


def parse_experiment(text: str, source: str, *, default_name: str | None = None,
                     version: Version | None = None) -> ParsedExperiment:
    """Read one experiment file, its keys checked against Determined `version` (default: the newest release).
    Problems are collected, never raised (`ParsedExperiment.get` raises)."""
    loaded = load_yaml_text(text, source)
    reader = _Reader(loaded.sources)
    reader.problems.extend(loaded.problems)
    data = loaded.data
    if not isinstance(data, dict):
        reader.error((), f"{source}: expected a mapping of experiment config keys, found {type_name(data)}",
                     "an experiment file is YAML with keys such as name, resources and entrypoint")
        return ParsedExperiment(None, reader.problems)
    reader.problems.extend(check_keys(data, loaded.sources, version or DEFAULT))
    for path, message in searcher_problems(data):  # values Determined's schema refuses, that plan would count with
        reader.error(path, message, "Determined's master refuses the experiment")
    resources = reader.mapping(data.get("resources"), ("resources",))
    environment = reader.mapping(data.get("environment"), ("environment",))
    name = reader.string(data.get("name"), ("name",)) or default_name or source
    force = environment.get("force_pull_image")
    if force is not None and not isinstance(force, bool):
        reader.error(("environment", "force_pull_image"), f"expected true or false, found {type_name(force)}")
    cpu_image, gpu_image = _images(reader, environment.get("image"), ("environment", "image"))
    variables = _variables(reader, environment.get("environment_variables"),
                           ("environment", "environment_variables"))
    slots_per_trial = reader.integer(resources.get("slots_per_trial"), ("resources", "slots_per_trial"), 1, 0)
    max_slots = resources.get("max_slots")
    if isinstance(max_slots, int) and not isinstance(max_slots, bool) and max_slots < slots_per_trial:
        reader.error(("resources", "max_slots"), f"{max_slots} is below resources.slots_per_trial {slots_per_trial}: "
                     "the Determined master never starts a trial of this experiment (it keeps an experiment's running "
                     "trials within max_slots)", f"raise max_slots to at least {slots_per_trial}, or remove it")
    experiment = Experiment(
        name=name,
        slots_per_trial=slots_per_trial,
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
        workspace=_member(reader, data.get("workspace"), ("workspace",), "workspace"),
        resource_pool=_member(reader, resources.get("resource_pool"), ("resources", "resource_pool"),
                              "resource pool"),
    )
    return ParsedExperiment(experiment, reader.problems)


# -- keys against the release's experiment schema ------------------------------------------------------------


def check_keys(data: Mapping[str, Any], sources: SourceMap, version: Version) -> list[Problem]:
    """Every key of an experiment config against the schema of Determined `version` (`expconf.release`).

    A key the release does not know is an error (its master refuses the experiment), naming the key, its
    file:line and the closest key the release has, or the release that has it. A key only one of the two
    releases read around `version` has is a warning. Also the union keys (`searcher.name`,
    `checkpoint_storage.type`): a value the release does not know is an error, and the keys of the variant
    it names are checked (`searcher.max_trials` with `name: single`).
    """
    collector = ProblemCollector(sources)
    _check_level(collector, expconf.release(version), "", (), data)
    return collector.problems


_CHOICE_NAMES = {"searcher": ("searcher", "the {} searcher"),
                 "checkpoint_storage": ("checkpoint storage type", "{} checkpoint storage")}


def _check_level(out: ProblemCollector, release: expconf.Release, level: str, path: Path, value: Any) -> None:
    verdict = release.keys(level)
    if verdict is None or not isinstance(value, dict):
        return
    variant_level, variant, variant_name = _variant(out, release, level, path, value)
    for key, item in value.items():
        where = (*path, key)
        if key not in verdict:
            _unknown(out, release, level, where, f"Determined {release.version}'s experiment config", verdict)
            continue
        if variant is not None and key not in variant:
            _unknown(out, release, variant_level, where, f"{variant_name} in Determined {release.version}", variant,
                     list_allowed=True)
            continue
        if key in verdict.maybe:
            _maybe(out, release, where, level, str(key))
        elif variant is not None and key in variant.maybe:
            _maybe(out, release, where, variant_level, str(key))
        child = f"{level}.{key}" if level else str(key)
        if isinstance(item, list):
            for index, element in enumerate(item):
                _check_level(out, release, f"{child}[]", (*where, index), element)
        else:
            _check_level(out, release, child, where, item)


def _variant(out: ProblemCollector, release: expconf.Release, level: str, path: Path,
             value: Mapping[str, Any]) -> tuple[str, expconf.Verdict | None, str]:
    """(level, keys, name) of the union variant `value` chooses; keys None when `level` is not a union, `value`
    names no variant or an unknown one (reported here), or the variant takes any key its union's level allows."""
    union = release.choices(level)
    chosen = value.get(union[0]) if union is not None else None
    if union is None or not isinstance(chosen, str):
        return "", None, ""
    key, values = union
    noun, name = _CHOICE_NAMES.get(level, (f"{level}.{key}", f"{level} {key} {{}}"))
    where = (*path, key)
    if chosen not in values:
        if not _in_another_release(out, release, where, level, key, chosen, f"{noun} {chosen!r}", "choose another"):
            close = difflib.get_close_matches(chosen, sorted(values.known), n=1, cutoff=0.6)
            out.error(where, f"Determined {release.version} has no {noun} {chosen!r}: its master refuses the "
                      "experiment", f"did you mean {close[0]}?" if close else
                      f"use one of {', '.join(sorted(values.known))}")
        return "", None, ""
    if chosen in values.maybe:
        _maybe(out, release, where, level, key, chosen)
    variant_level = f"{level}[{key}={chosen}]"
    return variant_level, release.keys(variant_level), name.format(chosen)


def _unknown(out: ProblemCollector, release: expconf.Release, level: str, where: Path, what: str,
             verdict: expconf.Verdict, *, list_allowed: bool = False) -> None:
    """`where[-1]` is not a key of `level`: the version table's reason, the releases that have it, or the
    closest key this one has."""
    key = str(where[-1])
    if not _in_another_release(out, release, where, level, key, "", "such key", "remove it"):
        allowed = sorted(verdict.known | verdict.maybe)
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.75)
        hint = f"did you mean {format_path((*where[:-1], close[0]))}?" if close else (
            f"it takes {', '.join(allowed)}" if list_allowed else None)
        out.error(where, f"not a key of {what}: its master refuses the experiment", hint)


def _in_another_release(out: ProblemCollector, release: expconf.Release, where: Path, level: str, key: str,
                        choice: str, thing: str, fix: str) -> bool:
    """Report `key` (or the union key's value `choice`) as another release's, when the version table or a schema
    read says which release has it; False when none does."""
    refined = release.refinement(level, key, choice)
    tags = release.elsewhere(level, key, choice)
    if refined is not None:
        out.error(where, *refined)
    elif tags:
        out.error(where, f"Determined {release.version} has no {thing} ({_have(tags)} it): its master refuses the "
                  "experiment", f"set appVersion to a release that has it, or {fix}")
    return refined is not None or bool(tags)


def _maybe(out: ProblemCollector, release: expconf.Release, where: Path, level: str, key: str,
           choice: str = "") -> None:
    has = release.elsewhere(level, key, choice)
    lacks = tuple(tag for tag in release.basis if tag not in has)
    what = f"{key} {choice!r}" if choice else "this key"
    out.warning(where, f"Determined {release.version} may not know {what}: {_have(has)} it, {_have(lacks, 'not')}, "
                "and the master refuses what it does not know",
                "set appVersion to the release you run, or check its documentation")


def _have(tags: tuple[str, ...], verb: str = "") -> str:
    """`the schema of 0.17.15 has`, `the schemas of 0.26.2 and v0.38.1 have` (+ `not`)."""
    names = " and ".join(tags) if len(tags) <= 2 else f"{', '.join(tags[:-1])} and {tags[-1]}"
    text = f"the schema of {names} has" if len(tags) == 1 else f"the schemas of {names} have"
    return f"{text} {verb}".rstrip() if verb else text
