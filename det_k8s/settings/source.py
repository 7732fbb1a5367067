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
from ..safe_read import MAX_VALUES, Loader, check_yaml, number_problem, type_name, yaml_error

Path = tuple[str | int, ...]

_Loader = Loader  # the C loader when libyaml is there (several times faster on big files)


def format_path(path: Path) -> str:
    """Render a key path as users write it: `db.password`, `resourcePools[0].pool_name`; a dot inside a key is
    escaped as --set writes it (`db\\.password`: one key, not password under db)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part.replace(".", "\\.")
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
    try:
        return loader.construct_object(node, deep=True)
    except ValueError as exc:  # an integer of more than 4,300 digits: Python will not convert it
        raise InputError(f"{name}:{line}: {format_path(path) or 'value'}: {number_problem(exc)}") from exc


def load_yaml_text(text: str, name: str) -> LoadedYaml:
    """Parse one YAML document; syntax errors become InputError naming `name:line`.

    The text is checked first (`bounded.check_yaml`: depth and alias expansion on the event
    stream), so the composer below never recurses deeper than `bounded.MAX_DEPTH`.
    """
    check_yaml(text, name)
    loader = _Loader(text)
    out = LoadedYaml(data=None, sources=SourceMap(), problems=[])
    try:
        node = loader.get_single_node()
        if node is not None:
            out.data = _construct(node, loader, name, (), out)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, name, text) from exc
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


