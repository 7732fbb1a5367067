"""Read YAML while remembering where every key came from.

Problems must point at `file:line`, so the loader builds plain Python data from PyYAML's node
tree and, on the way, records the line of each key path. Duplicate keys are reported (YAML
allows the last to win silently, which hides typos in long values files).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import InputError, Location, Problem, Severity

Path = tuple[str | int, ...]

try:  # the C loader is several times faster on big snapshot files
    _Loader: type[yaml.SafeLoader] = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - libyaml missing
    _Loader = yaml.SafeLoader


def format_path(path: Path) -> str:
    """Render a key path as users write it: `db.password`, `resourcePools[0].pool_name`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


@dataclass
class SourceMap:
    """Key path -> where it was last set. Later sources overwrite earlier ones, like values do."""

    locations: dict[Path, Location] = field(default_factory=dict)

    def record(self, path: Path, location: Location) -> None:
        self.locations[path] = location

    def update(self, other: SourceMap) -> None:
        self.locations.update(other.locations)

    def find(self, path: Path) -> Location | None:
        """The location of `path`, or of its nearest ancestor that has one."""
        probe = tuple(path)
        while probe:
            if probe in self.locations:
                return self.locations[probe]
            probe = probe[:-1]
        return None


@dataclass
class LoadedYaml:
    data: Any
    sources: SourceMap
    problems: list[Problem]
    built: int = 0  # values constructed so far, aliases counted each time they expand


MAX_VALUES = 1_000_000  # far above any real settings file; stops "billion laughs" alias bombs early


def _construct(node: yaml.Node, loader: yaml.SafeLoader, name: str, path: Path, out: LoadedYaml) -> Any:
    line = node.start_mark.line + 1
    out.built += 1
    if out.built > MAX_VALUES:
        raise InputError(f"{name}: more than {MAX_VALUES:,} values once YAML aliases are expanded",
                         hint="the file repeats aliases (*name) too deeply to be a settings file")
    out.sources.record(path, Location(name, line))
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves `<<:` merge keys
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | bool | float) or key is None:
                out.problems.append(
                    Problem(Severity.ERROR, format_path(path), "mapping keys must be plain strings",
                            location=Location(name, key_node.start_mark.line + 1))
                )
                continue
            key = str(key) if not isinstance(key, str) else key
            if key in result:
                out.problems.append(
                    Problem(Severity.ERROR, format_path((*path, key)), "duplicate key; the later one would win",
                            hint="remove one of them",
                            location=Location(name, key_node.start_mark.line + 1))
                )
            child = (*path, key)
            result[key] = _construct(value_node, loader, name, child, out)
            out.sources.record(child, Location(name, key_node.start_mark.line + 1))
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_construct(item, loader, name, (*path, i), out) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


def load_yaml_text(text: str, name: str) -> LoadedYaml:
    """Parse one YAML document; syntax errors become InputError naming `name:line`."""
    loader = _Loader(text)
    out = LoadedYaml(data=None, sources=SourceMap(), problems=[])
    try:
        node = loader.get_single_node()
        if node is not None:
            out.data = _construct(node, loader, name, (), out)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        reason = exc.problem or exc.context or "invalid YAML"
        raise InputError(f"{where}: YAML syntax error: {reason}",
                         hint="check indentation and quoting on that line") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{name}: YAML error: {exc}") from exc
    finally:
        loader.dispose()
    return out


def require_mapping(loaded: LoadedYaml, name: str) -> Mapping[str, Any]:
    """Settings files hold one mapping (an empty file counts as an empty mapping)."""
    if loaded.data is None:
        return {}
    if not isinstance(loaded.data, dict):
        raise InputError(f"{name}:1: expected a mapping of settings keys, found {type_name(loaded.data)}")
    return loaded.data


def type_name(value: Any) -> str:
    """A user-facing name for a YAML value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
