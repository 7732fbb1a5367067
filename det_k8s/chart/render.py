"""Render values.yaml and Chart.yaml from the Jinja2 templates in `templates/`.

Rendering is pure: effective values in, text out. The templates write every key with a comment,
and unset optional keys as commented-out examples, so the result reads like a hand-kept values
file while still loading back into exactly the effective values (a test checks the round trip).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import jinja2
import yaml

from .. import __version__
from ..determined import versions
from ..quantity import parse_quantity
from ..settings import schema
from ..settings.schema import Kind

CHART_VERSION = "0.1.0"


def templates_dir() -> Path:
    """The `templates/` directory: inside the installed package, or at the top of a checkout."""
    installed = Path(__file__).resolve().parent.parent / "_templates"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parent.parent.parent / "templates"


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # YAML, not HTML
    )
    env.globals.update(field=_field, block=_block, scalar=_scalar, inline=_inline)
    return env


class _Dumper(yaml.SafeDumper):  # type: ignore[misc]
    """Block style, insertion order, and lists indented under their key like hand-written YAML."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


# Strings some YAML reader would take for something else. PyYAML follows YAML 1.1 and leaves `1e3` or
# `0o17` bare, but helm's Go parser reads them as numbers: a password `8e7438` would fail the schema.
_NOT_A_PLAIN_STRING = re.compile(
    r"^(?:[-+]?(?:\.?[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+"
    r"|[0-9][0-9_]*(?::[0-5]?[0-9])+|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))"
    r"|y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|null|Null|NULL|~|)$")


# Line breaks YAML knows beyond \n: PyYAML writes them as they are inside single quotes, where a reader folds them
# into a space; double quotes escape them (\N, \L, \P).
_UNICODE_BREAKS = re.compile("[\x85\u2028\u2029]")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = '"' if _UNICODE_BREAKS.search(value) else "'" if _NOT_A_PLAIN_STRING.match(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def _scalar(value: Any) -> str:
    text = str(yaml.dump(value, Dumper=_Dumper, default_flow_style=True, width=10**6, allow_unicode=True))
    return text.removesuffix("\n...\n").rstrip("\n")


def _inline(value: Any) -> str:
    return _scalar(value)


def _block(value: Any, indent: int) -> str:
    text = yaml.dump(value, Dumper=_Dumper, default_flow_style=False, sort_keys=False, width=120,
                     allow_unicode=True)
    pad = " " * indent
    return "\n".join(pad + line if line else line for line in text.rstrip("\n").split("\n"))


def _field(name: str, value: Any, example: Any = None, indent: int = 0) -> str:
    """One key at column `indent` (the template already wrote the leading spaces)."""
    if value is None:
        return f"# {name}:" + (f" {_scalar(example)}" if example is not None else "")
    if isinstance(value, Mapping | list):
        if not value:
            return f"{name}: {_scalar(value)}"
        return f"{name}:\n{_block(value, indent + 2)}"
    return f"{name}: {_scalar(value)}"


def _full_view(values: Mapping[str, Any], keys: Mapping[str, schema.Key]) -> dict[str, Any]:
    """Every schema key present (None when unset), so templates can name any key."""
    out: dict[str, Any] = dict(values)
    for name, key in keys.items():
        if key.kind is Kind.SECTION:
            inner = values.get(name)
            out[name] = _full_view(inner if isinstance(inner, Mapping) else {}, key.children)
        else:
            out.setdefault(name, None)
    return out


def normalise(values: Mapping[str, Any]) -> dict[str, Any]:
    """Values as the chart should see them: CPU quantities such as "7910m" become numbers (7.91)."""
    out = copy.deepcopy(dict(values))
    for path, key in schema.walk():
        if key.kind is not Kind.CPU:
            continue
        node: Any = out
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(path[-1]), str):
            amount: Fraction = parse_quantity(node[path[-1]])
            node[path[-1]] = int(amount) if amount.denominator == 1 else float(amount)
    return out


# Top-level keys values.yaml.j2 writes in their own place; any other key set goes under "Other settings".
_PLACED = frozenset({
    "imageRegistry", "defaultImages", "enterpriseEdition", "imagePullSecretName", "logLevel", "logColor",
    "createNonNamespacedObjects", "externalCaCertSecretName", "masterPort", "useNodePortForMaster", "tlsSecret",
    "masterService", "loadBalancerSourceRanges", "openshiftRoute", "masterCpuRequest", "masterMemRequest",
    "masterCpuLimit", "masterMemLimit", "db", "checkpointStorage", "maxSlotsPerPod", "slotType",
    "slotResourceRequests", "taskContainerDefaults", "defaultScheduler", "gangScheduler", "detK8sScheduler",
    "initialUserPassword",
    "defaultPassword", "clusterName", "telemetry", "logging",
})


def render_values(values: Mapping[str, Any], app_version: str | None = None) -> str:
    """values.yaml text for the effective values of Determined `app_version` (the default release when None)."""
    version = versions.parse_version(app_version or "") or versions.DEFAULT
    normalised = normalise(values)
    view = _full_view(normalised, {k: v for k, v in schema.SCHEMA.items() if not v.chart_yaml})
    storage = normalised.get("checkpointStorage") or {}
    shown = {
        "shared_fs": {"hostPath"},
        "azure": {"container", "connection_string", "account_url", "credential"},
        "s3": {"bucket", "prefix", "accessKey", "secretKey", "endpointUrl"},
        "gcs": {"bucket", "prefix"},
        "directory": {"containerPath"},
        "hdfs": {"hdfsUrl", "hdfsPath", "user"},
    }.get(str(storage.get("type")), {"bucket", "prefix"})
    shown = shown | ({"mountToServer"} if storage.get("type") == "shared_fs" else set())
    common = {"type", "saveExperimentBest", "saveTrialBest", "saveTrialLatest"}
    other = [k for k in storage if k not in shown and k not in common and storage.get(k) is not None]
    def extra_top(names: list[str]) -> str:
        return "".join("\n" + _field(name, normalised[name]) for name in names if normalised.get(name) is not None)

    def extra_in(section: str, names: list[str]) -> str:
        inner = normalised.get(section) or {}
        return "".join("\n  " + _field(name, inner[name], None, 2) for name in names if inner.get(name) is not None)

    scheduler = str(normalised.get("defaultScheduler") or "coscheduler").strip()
    if scheduler == "preemption" and not versions.has("chart.default_scheduler.passthrough", version):
        scheduler = "coscheduler"
    template = _environment().get_template("values.yaml.j2")
    return template.render(v=view, other_storage_keys=other, logging=normalised.get("logging"),
                           det_k8s_version=__version__, has_secrets=_has_secrets(normalised),
                           v_has=lambda key: versions.has(key, version), extra_top=extra_top, extra_in=extra_in,
                           rest=sorted(set(normalised) - _PLACED), scheduler_name=scheduler)


def render_chart_yaml(app_version: str, base: Mapping[str, Any] | None = None) -> str:
    """Chart.yaml with `app_version`; other fields come from `base` (a user chart) or our defaults."""
    base = dict(base or {})
    known = {"apiVersion", "name", "description", "type", "version", "appVersion"}
    extra = {k: v for k, v in base.items() if k not in known}
    view = _full_view(base, {k: schema.Key(Kind.STRING, "") for k in known})
    template = _environment().get_template("Chart.yaml.j2")
    return template.render(base=view, extra=extra, app_version=str(app_version), chart_version=CHART_VERSION,
                           det_k8s_version=__version__)


def _has_secrets(values: Mapping[str, Any]) -> bool:
    for path in schema.secret_paths():
        node: Any = values
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        if node not in (None, ""):
            return True
    return False
