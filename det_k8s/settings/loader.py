"""From settings files and `--set` flags to validated settings, the way helm combines values.

Input is text, not paths: the CLI reads the files, so this module stays free of I/O and can be
fed by tests and property checks directly.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..determined import versions
from ..errors import Location, Problem, SettingsError
from . import schema
from .merge import deep_merge
from .model import Settings, build_settings
from .problems import HasProblems
from .rules import check_semantics, check_structure
from .secret_settings import set_location
from .setvalues import apply_assignment, parse_set
from .source import SourceMap, load_yaml_text, require_mapping


@dataclass(frozen=True)
class Document:
    """One settings file's name (for messages) and its text."""

    name: str
    text: str


@dataclass
class LoadedSettings(HasProblems):
    user_values: dict[str, Any]
    """What the user wrote, files and --set merged, before defaults (appVersion included)."""
    values: dict[str, Any]
    """Effective values for values.yaml: chart defaults with the user's values over them."""
    app_version: Any
    sources: SourceMap
    problems: list[Problem] = field(default_factory=list)

    def settings(self) -> Settings:
        """The typed settings; raises SettingsError listing every error when there are any."""
        if self.errors:
            raise SettingsError(self.errors)
        return build_settings(self.values, str(self.app_version))


def combine(documents: Sequence[Document], sets: Sequence[str] = (), set_strings: Sequence[str] = ()) -> tuple[
        dict[str, Any], SourceMap, list[Problem]]:
    """Merge files left to right, then --set, then --set-string (helm's order)."""
    merged: dict[str, Any] = {}
    sources = SourceMap()
    problems: list[Problem] = []
    for doc in documents:
        loaded = load_yaml_text(doc.text, doc.name)
        problems.extend(loaded.problems)
        merged = deep_merge(merged, require_mapping(loaded, doc.name))
        sources.update(loaded.sources)
    for flag, expressions, as_string in (("--set", sets, False), ("--set-string", set_strings, True)):
        for expression in expressions:
            for assignment in parse_set(expression, as_string=as_string, flag=flag):
                apply_assignment(merged, assignment)
                where = Location(set_location(flag, assignment.path, assignment.value))
                for depth in range(1, len(assignment.path) + 1):  # `a.b[0]=x` is also where `a` and `a.b` came from
                    sources.record(assignment.path[:depth], where)
    return merged, sources, problems


def load_settings(documents: Sequence[Document], sets: Sequence[str] = (),
                  set_strings: Sequence[str] = (), *, default_app_version: str | None = None,
                  bundled_chart: bool = True) -> LoadedSettings:
    """Combine and validate; problems are collected, never raised (use `.settings()` for that). Settings that name
    no appVersion are for `default_app_version` (a user's chart's own), else det-k8s's default release.

    `bundled_chart`: the settings are for det-k8s's own chart (not a user's `--chart`, not a master's configuration
    read back), so where it deploys det-k8s's scheduler, defaultScheduler left unset is coscheduler, the name that
    scheduler serves (`schema.deploys_det_k8s_scheduler`), and the rules about that scheduler apply."""
    user, sources, problems = combine(documents, sets, set_strings)
    problems.extend(check_structure(user, sources))
    values_part = {k: v for k, v in user.items() if k != "appVersion"}
    app_version = (user.get("appVersion") if user.get("appVersion") is not None else
                   default_app_version or schema.DEFAULT_APP_VERSION)
    version = versions.parse_version(app_version) if isinstance(app_version, str) else None
    values = deep_merge(schema.defaults(version=version or versions.DEFAULT), values_part, null_deletes=True)
    if bundled_chart and user.get("defaultScheduler") is None and schema.deploys_det_k8s_scheduler(values):
        values["defaultScheduler"] = schema.DET_K8S_SCHEDULER_NAME
    problems.extend(check_semantics(values, user, app_version, sources, bundled_chart=bundled_chart))
    return LoadedSettings(user_values=copy.deepcopy(user), values=values, app_version=app_version,
                          sources=sources, problems=problems)


def redact(values: Mapping[str, Any], mask: str = "<redacted>") -> dict[str, Any]:
    """A copy of values with every secret key masked, for printing."""
    out = copy.deepcopy(dict(values))
    for path in schema.secret_paths():
        node: Any = out
        for part in path[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(path[-1]) not in (None, ""):
            node[path[-1]] = mask
    return out
