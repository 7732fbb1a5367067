"""helm's value merging: maps merge key by key, anything else is replaced, null deletes.

`-f a.yaml -f b.yaml` merges b over a (the right-most file wins), then `--set` goes over all
files whatever its position on the command line, then the result goes over the chart's defaults,
where a null removes the key altogether (helm's way to unset a default).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any], *, null_deletes: bool = False) -> dict[str, Any]:
    """Return a new mapping: `override` merged into `base` (neither input is modified)."""
    result: dict[str, Any] = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None and null_deletes:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = deep_merge(result[key], value, null_deletes=null_deletes)
        elif isinstance(value, Mapping) and null_deletes:
            result[key] = strip_nulls(value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def strip_nulls(value: Mapping[str, Any]) -> dict[str, Any]:
    """Drop null entries from nested mappings (what helm does to values with nothing under them)."""
    return {
        key: strip_nulls(item) if isinstance(item, Mapping) else copy.deepcopy(item)
        for key, item in value.items()
        if item is not None
    }
