"""Kubernetes label selectors (`-l`), parsed as the API server parses them, matched offline.

The grammar is kubectl's: comma-separated requirements, each `key`, `!key`, `key=value`,
`key==value`, `key!=value`, `key in (a,b)` or `key notin (a,b)`. Every requirement must hold.
A requirement is the model's `Requirement`, so a selector matches exactly as a node affinity
term of the same requirements does. Keys and values are checked as the API server checks them
(`names.is_label_key`/`is_label_value`: a DNS-1123 subdomain prefix, at most 63 characters each),
and `in`/`notin` need at least one value, so a selector det-k8s accepts is one kubectl would send.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import UsageError
from ..names import is_label_key, is_label_value, shown
from .model import Requirement

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EQUALITY = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_ONLY = re.compile(rf"^{_VALUE}$")


def _split(selector: str) -> list[str]:
    """Requirements split at the commas outside parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _requirement(text: str, selector: str) -> Requirement:
    requirement = _parse(text, selector)
    if not is_label_key(requirement.key):
        raise UsageError(f"label selector {shown(selector)}: {shown(requirement.key)} is not a label key",
                         hint="a key is a name of at most 63 letters, digits, '-', '_' and '.', optionally after a "
                              "lower-case DNS prefix and '/', e.g. node.kubernetes.io/instance-type")
    for value in requirement.values:
        if not is_label_value(value):
            raise UsageError(f"label selector {shown(selector)}: {shown(value)} is not a label value",
                             hint="a value is at most 63 letters, digits, '-', '_' and '.'")
    if requirement.operator in ("In", "NotIn") and len(requirement.values) == 1 and not requirement.values[0] \
            and _SET.match(text):
        raise UsageError(f"label selector {shown(selector)}: {shown(text.strip())} names no value",
                         hint="in and notin need at least one value: key in (a,b)")
    return requirement


def _parse(text: str, selector: str) -> Requirement:
    if match := _EQUALITY.match(text):
        key, op, value = match.groups()
        return Requirement(key, "NotIn" if op == "!=" else "In", (value,))
    if match := _SET.match(text):
        key, op, raw = match.groups()
        values = tuple(v.strip() for v in raw.split(","))
        if not all(_VALUE_ONLY.match(v) for v in values):
            raise UsageError(f"label selector {shown(selector)}: bad value in {shown(text.strip())}",
                             hint="values are letters, digits, '-', '_' and '.'")
        return Requirement(key, "In" if op == "in" else "NotIn", values)
    if match := _EXISTS.match(text):
        negate, key = match.groups()
        return Requirement(key, "DoesNotExist" if negate else "Exists")
    raise UsageError(f"label selector {shown(selector)}: cannot parse {shown(text.strip())}",
                     hint="use key=value, key!=value, key in (a,b), key notin (a,b), key or !key, "
                          "comma-separated")


def parse_selector(selector: str) -> tuple[Requirement, ...]:
    """The requirements of a label selector; raises UsageError naming the part it cannot read."""
    if not selector.strip():
        return ()
    return tuple(_requirement(part, selector) for part in _split(selector))


def matches(requirements: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    return all(requirement.matches(labels) for requirement in requirements)
