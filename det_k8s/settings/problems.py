"""Collecting problems with key paths and locations, shared by every checker of user files.

Settings rules and experiment parsing both walk user YAML and report everything they find at
once, each problem naming its key path and the file:line it came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import Problem, Severity
from .source import Path, SourceMap, format_path


class ProblemCollector:
    """Problems found so far; each new one gets the location of its key (or nearest parent)."""

    def __init__(self, sources: SourceMap) -> None:
        self.sources = sources
        self.problems: list[Problem] = []

    def add(self, severity: Severity, path: Path, message: str, hint: str | None = None) -> None:
        self.problems.append(Problem(severity, format_path(path), message, hint, self.sources.find(path)))

    def error(self, path: Path, message: str, hint: str | None = None) -> None:
        self.add(Severity.ERROR, path, message, hint)

    def warning(self, path: Path, message: str, hint: str | None = None) -> None:
        self.add(Severity.WARNING, path, message, hint)


class HasProblems:
    """`errors` and `warnings` views for a result that carries `problems`."""

    problems: Sequence[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_error]


def get_path(values: Any, path: Sequence[str | int]) -> Any:
    """The value at a key path in nested mappings, or None when any step is missing or not a mapping."""
    node: Any = values
    for part in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node
