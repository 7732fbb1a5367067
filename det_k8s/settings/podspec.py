"""Pod specs checked against the Kubernetes OpenAPI schema, as the API server would check them.

`taskContainerDefaults.cpuPodSpec`/`gpuPodSpec` in settings and an experiment's
`environment.pod_spec` are Pods the Determined master (or det-k8s) merges into its task pods. A
typo there (`operater`, `efect`, `nodeselector`) or a key dedented out of `spec` is silently
dropped by nothing and rejected by nobody until a pod is created, or worse, accepted and ignored.
So each is validated against the Pod schema of a Kubernetes version, from the `kubernetes-validate`
package (the strict schemas: unknown fields are errors): det-k8s does not write a pod schema of its
own. Every finding names the key path and file:line, with a did-you-mean when a field of that name
(or a close one) exists, here or at another level of the Pod.

Which Kubernetes version: the cluster's when the command talks to one, else `--kube-version`,
else the newest version kubernetes-validate knows; `checking_against` sets it for a command and
every message says which it was. A version older than the oldest schema is checked against the
oldest one (and says so).

Determined merges a pod spec into its own pod, so a spec without `containers` (only tolerations,
say) is complete here although a bare Pod would need them; `apiVersion: v1` and `kind: Pod` may be
left out. Values are never echoed: a pod spec may carry secrets in its environment variables.

jsonschema is imported, and the schemas read, only when a pod spec is checked.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path as PathType
from typing import Any

from ..errors import DetK8sError, Problem, Severity
from ..safe_read import type_name
from .podvalues import check_pod_values
from .source import Path, SourceMap, format_path

_API_VERSION = "v1"
_KIND = "Pod"
_INDEX_DEPTH = 5  # deep enough for spec.containers[].securityContext.capabilities.add
_NOT_REQUIRED = frozenset({("spec", "containers")})  # Determined adds its own container


@dataclass(frozen=True)
class KubeVersion:
    """The Kubernetes version pod specs are checked against, and where that version came from."""

    wanted: str | None  # "1.31" (as asked for or found); None: the newest schema
    origin: str  # CLUSTER, OPTION or the default's own words

    @property
    def schema(self) -> str:
        """The schema version used: `wanted`'s minor, clamped into what kubernetes-validate has."""
        known = schema_versions()
        if self.wanted is None:
            return known[-1]
        wanted = _minor(self.wanted)
        older = [v for v in known if _minor(v) <= wanted]
        return older[-1] if older else known[0]

    def describe(self) -> str:
        """`Kubernetes 1.31 (the cluster's)`; says so when the schema is not the version asked for."""
        used = self.schema
        if self.wanted is not None and _minor(used) != _minor(self.wanted):
            nearest = "oldest" if _minor(used) > _minor(self.wanted) else "newest"
            return f"Kubernetes {used} (the {nearest} det-k8s has; {self.origin} is {self.wanted})"
        return f"Kubernetes {used} ({self.origin})"


DEFAULT = KubeVersion(None, "the default; --kube-version to change")
CLUSTER = "the cluster's"
OPTION = "--kube-version"
_TARGET: contextvars.ContextVar[KubeVersion] = contextvars.ContextVar("det_k8s_kube_version", default=DEFAULT)


def current() -> KubeVersion:
    return _TARGET.get()


@contextlib.contextmanager
def checking_against(version: KubeVersion) -> Iterator[None]:
    """Pod specs checked inside this block use `version`."""
    token = _TARGET.set(version)
    try:
        yield
    finally:
        _TARGET.reset(token)


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?$")


def parse_kube_version(text: str) -> str | None:
    """`v1.31.2-eks-1234` or `1.31` -> `1.31`; None when it is not a Kubernetes version."""
    match = _VERSION.match(text.strip())
    return f"{int(match[1])}.{int(match[2])}" if match else None


def cluster_version(answer: Mapping[str, Any]) -> KubeVersion | None:
    """The version an API server's /version answer names, as the cluster's; None when it names none."""
    text = str(answer.get("gitVersion") or "")
    found = parse_kube_version(text) if text else None
    if found is None:
        found = parse_kube_version(f"{answer.get('major')}.{re.sub(r'[^0-9].*$', '', str(answer.get('minor')))}")
    return KubeVersion(found, CLUSTER) if found else None


def _minor(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor.split(".")[0])


_STRICT_DIR = re.compile(r"^v(\d+)\.(\d+)\.\d+-local-strict$")


@functools.cache
def _schema_dirs() -> dict[str, PathType]:
    """`1.31` -> the strict schema directory kubernetes-validate ships for it.

    The package's data is read where the package is installed, without importing it (its module imports
    cost more than the check itself); its own `validate` reads the same `kubernetes-json-schema/` tree.
    """

    spec = importlib.util.find_spec("kubernetes_validate")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    root = PathType(locations[0]) / "kubernetes-json-schema" if locations else None
    found = {f"{int(m[1])}.{int(m[2])}": entry for entry in (root.iterdir() if root and root.is_dir() else ())
             if (m := _STRICT_DIR.match(entry.name))}
    if not found:
        raise DetK8sError("the Kubernetes schemas of kubernetes-validate are not installed",
                          hint="reinstall det-k8s (pip install det-k8s) so its dependencies come with it")
    return found


def schema_versions() -> tuple[str, ...]:
    """The Kubernetes versions kubernetes-validate has schemas for, oldest first (`1.25` ... `1.37`)."""
    return tuple(sorted(_schema_dirs(), key=_minor))


@dataclass(frozen=True)
class _Schema:
    validator: Any  # a jsonschema validator for the strict Pod schema
    names: Mapping[int, str]  # id(definition) -> its short name (Toleration, Container...)
    fields: Mapping[str, tuple[tuple[str, ...], ...]]  # normalised field name -> where it is in a Pod


@functools.cache
def _schema(version: str) -> _Schema:
    import jsonschema
    from referencing import Registry, Resource

    directory = _schema_dirs()[version]
    pod = json.loads((directory / "pod-v1.json").read_text(encoding="utf-8"))
    definitions = json.loads((directory / "_definitions.json").read_text(encoding="utf-8"))
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(pod) @ Registry())
    validator = jsonschema.Draft202012Validator(pod, registry=registry)
    defs = definitions.get("$defs") or definitions.get("definitions") or {}
    names = {id(body): name.rsplit(".", 1)[-1] for name, body in defs.items()}
    names[id(pod)] = _KIND
    return _Schema(validator, names, _field_index(pod, defs))


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return defs.get(ref.rsplit("/", 1)[-1]) or {}
    for key in ("allOf", "anyOf", "oneOf"):  # `$ref` wrapped with a description
        for option in schema.get(key) or ():
            if isinstance(option, Mapping) and option.get("$ref"):
                return _resolve(option, defs)
    return schema


def _field_index(pod: Mapping[str, Any], defs: Mapping[str, Any]) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Every field name reachable from a Pod (a few levels deep) and the paths it sits at."""
    found: dict[str, list[tuple[str, ...]]] = {}
    queue: list[tuple[Mapping[str, Any], tuple[str, ...]]] = [(pod, ())]
    while queue:
        schema, path = queue.pop(0)
        for name, child in (schema.get("properties") or {}).items():
            here = (*path, name)
            found.setdefault(_norm(name), []).append(here)
            if len(here) >= _INDEX_DEPTH or not isinstance(child, Mapping):
                continue
            child = _resolve(child, defs)
            items = child.get("items")
            if isinstance(items, Mapping):
                queue.append((_resolve(items, defs), (*here, "[]")))
            elif child.get("properties"):
                queue.append((child, here))
    return {name: tuple(paths) for name, paths in found.items()}


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def _shape(path: Sequence[str | int]) -> tuple[str, ...]:
    return tuple("[]" if isinstance(p, int) else p for p in path)


def _suggest(key: str, where: Sequence[str | int], allowed: Sequence[str], schema: _Schema) -> str | None:
    """A did-you-mean for `key` found at `where`: same name here, the same field elsewhere, or a close name."""
    for name in allowed:
        if _norm(name) == _norm(key):
            return f"did you mean {name}?"
    here = _shape(where)
    elsewhere = schema.fields.get(_norm(key), ())
    if elsewhere:
        def shared(candidate: tuple[str, ...]) -> int:
            count = 0
            for a, b in zip(candidate[:-1], here, strict=False):
                if a != b:
                    break
                count += 1
            return count

        best = max(elsewhere, key=lambda c: (shared(c), -len(c)))
        parent = format_path(tuple(p for p in best[:-1] if p != "[]")) or "the top level"
        return f"did you mean {_show(best)}? ({best[-1]} belongs under {parent}: check its indentation)"
    close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.7) or difflib.get_close_matches(
        key.lower(), [a.lower() for a in allowed], n=1, cutoff=0.7)
    if close:
        match = next(a for a in allowed if a.lower() == close[0].lower())
        return f"did you mean {match}?"
    return None


def _show(shape: Sequence[str]) -> str:
    out = ""
    for part in shape:
        out += "[]" if part == "[]" else ("." if out else "") + part
    return out


_TYPES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "object": "a mapping", "array": "a list"}


def _expected(types: Any) -> str:
    names = [types] if isinstance(types, str) else list(types or ())
    shown = [_TYPES.get(t, t) for t in names if t != "null"]
    return " or ".join(dict.fromkeys(shown)) or "something else"


def _type_options(error: Any) -> list[str]:
    """The types a oneOf/anyOf accepts (int-or-string quantities and ports)."""
    types: list[str] = []
    for sub in error.context or ():
        if sub.validator == "type":
            value = sub.validator_value
            types += [value] if isinstance(value, str) else list(value)
    return types


@dataclass(frozen=True)
class _Finding:
    path: tuple[str | int, ...]
    message: str
    hint: str | None = None


def _findings(error: Any, schema: _Schema, version: KubeVersion) -> list[_Finding]:
    path = tuple(error.absolute_path)
    what = schema.names.get(id(error.schema), "this object")
    in_version = version.describe()
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = sorted((error.schema.get("properties") or {}).keys())
        patterns = [re.compile(p) for p in (error.schema.get("patternProperties") or {})]
        unknown = [k for k in error.instance if k not in allowed and not any(p.search(str(k)) for p in patterns)]
        return [_Finding((*path, key), f"not a field of {what} in {in_version}",
                         _suggest(str(key), path, allowed, schema)) for key in unknown]
    if error.validator == "type":
        return [_Finding(path, f"expected {_expected(error.validator_value)}, found {type_name(error.instance)}")]
    if error.validator in ("oneOf", "anyOf") and _type_options(error):
        return [_Finding(path, f"expected {_expected(_type_options(error))}, found {type_name(error.instance)}")]
    if error.validator == "required":
        missing = [k for k in error.validator_value if isinstance(error.instance, Mapping) and k not in error.instance]
        return [_Finding(path, f"{what} needs {key} ({in_version})") for key in missing
                if (*_shape(path), key) not in _NOT_REQUIRED]
    if error.validator == "enum":
        choices = [str(c) for c in error.validator_value if c is not None]
        found = repr(error.instance) if isinstance(error.instance, str) else type_name(error.instance)
        wanted = choices[0] if len(choices) == 1 else "one of " + ", ".join(choices)
        return [_Finding(path, f"must be {wanted}, found {found}")]  # an enum's value is never a secret
    return [_Finding(path, f"invalid in {in_version}: {error.validator} {error.validator_value!r} not met")]


def check_pod_spec(spec: Any, path: Path, sources: SourceMap, version: KubeVersion | None = None) -> list[Problem]:
    """Every problem of the pod spec at `path` (a Pod, `apiVersion`/`kind` optional), as errors with file:line.

    Anything but a mapping gives no problem here: the caller's type check of the key reports it.
    """
    if not isinstance(spec, Mapping):
        return []  # not a mapping at all: the caller's own type check says so
    version = version or current()
    schema = _schema(version.schema)
    document = {"apiVersion": _API_VERSION, "kind": _KIND, **spec}
    problems: list[Problem] = []
    seen: set[tuple[tuple[str | int, ...], str]] = set()
    errors = sorted(schema.validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    reported: set[tuple[str | int, ...]] = set()
    for error in errors:
        for finding in _findings(error, schema, version):
            if (finding.path, finding.message) in seen:
                continue
            seen.add((finding.path, finding.message))
            reported.add(finding.path)
            full = (*path, *finding.path)
            problems.append(Problem(Severity.ERROR, format_path(full), finding.message, finding.hint,
                                    sources.find(full)))
    for value in check_pod_values(document, _minor(version.wanted or version.schema)):  # what the schema cannot say
        if value.path in reported:
            continue  # the schema's own finding there says it (a container without a name, say)
        full = (*path, *value.path)
        problems.append(Problem(Severity.ERROR, format_path(full), value.message, value.hint, sources.find(full)))
    return problems


_POOL_POD_SPECS = ("cpu_pod_spec", "gpu_pod_spec", "checkpoint_gc_pod_spec")


def settings_pod_specs(values: Mapping[str, Any]) -> list[tuple[Path, Any]]:
    """The pod specs in settings values, (key path, spec): taskContainerDefaults.cpuPodSpec/gpuPodSpec and
    checkpointGcPodSpec, and each resource pool's task_container_defaults.cpu_pod_spec/gpu_pod_spec/
    checkpoint_gc_pod_spec (the master builds that pool's task pods from them)."""
    found: list[tuple[Path, Any]] = []
    defaults = values.get("taskContainerDefaults")
    if isinstance(defaults, Mapping):
        found += [(("taskContainerDefaults", name), defaults.get(name))
                  for name in ("cpuPodSpec", "gpuPodSpec", "checkpointGcPodSpec") if defaults.get(name) is not None]
    pools = values.get("resourcePools")
    for index, pool in enumerate(pools if isinstance(pools, list) else ()):
        tcd = pool.get("task_container_defaults") if isinstance(pool, Mapping) else None
        if isinstance(tcd, Mapping):
            found += [(("resourcePools", index, "task_container_defaults", name), tcd.get(name))
                      for name in _POOL_POD_SPECS if tcd.get(name) is not None]
    return found


def check_settings_pod_specs(values: Mapping[str, Any], sources: SourceMap,
                             version: KubeVersion | None = None) -> list[Problem]:
    """Every problem of the settings' default pod specs."""
    return [p for path, spec in settings_pod_specs(values) for p in check_pod_spec(spec, path, sources, version)]


def recheck_settings(values: Mapping[str, Any], sources: SourceMap, used: KubeVersion,
                     cluster: KubeVersion | None) -> list[Problem]:
    """The settings' pod specs against the cluster's version, when that is not the schema they were checked with."""
    if cluster is None or cluster.schema == used.schema:
        return []
    return check_settings_pod_specs(values, sources, cluster)
