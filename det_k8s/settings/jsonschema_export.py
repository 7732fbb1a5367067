"""The chart's `values.schema.json`, generated from the settings table.

helm checks values against this file on `install`, `upgrade`, `template` and `lint`, so a user
who edits the rendered values.yaml by hand and runs helm directly still gets the type checks.
Cross-key rules (s3 needs a bucket) stay in det-k8s's own validation, where the messages are
better than a schema validator's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .schema import SCHEMA, Key, Kind

_QUANTITY_PATTERN = r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"


def _key_schema(key: Key) -> dict[str, Any]:
    out: dict[str, Any] = {"description": key.doc}
    if key.kind is Kind.SECTION:
        out.update(_section_schema(key.children))
        out["type"] = ["object", "null"]
        return out
    if key.kind is Kind.STRING:
        out["type"] = ["string", "null"]
    elif key.kind is Kind.INTEGER:
        out["type"] = ["integer", "null"]
        if key.minimum is not None:
            out["minimum"] = key.minimum
        if key.maximum is not None:
            out["maximum"] = key.maximum
    elif key.kind is Kind.BOOLEAN:
        out["type"] = ["boolean", "null"]
    elif key.kind in (Kind.QUANTITY, Kind.CPU):
        out["anyOf"] = [
            {"type": "number", "minimum": 0} if key.kind is Kind.CPU else {"type": "number"},
            {"type": "string", "pattern": _QUANTITY_PATTERN},
            {"type": "null"},
        ]
    elif key.kind is Kind.ENUM and key.trim:
        choices = "|".join(re.escape(c) for c in key.choices if c)
        out["type"] = ["string", "null"]
        out["pattern"] = rf"^\s*({choices})?\s*$"
    elif key.kind is Kind.ENUM:
        out["enum"] = [*key.choices, None]
    elif key.kind is Kind.OBJECT:
        out["type"] = ["object", "null"]
    elif key.kind is Kind.LIST:
        out["type"] = ["array", "null"]
    return out


def _section_schema(children: Mapping[str, Key]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: _key_schema(key) for name, key in children.items() if not key.chart_yaml},
    }


def values_json_schema() -> dict[str, Any]:
    """A draft-07 JSON Schema for the chart's values."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Values of the det-k8s Determined chart",
        **_section_schema(SCHEMA),
    }
    # helm passes `global` to every chart; allow it so the schema never rejects helm itself.
    schema["properties"]["global"] = {"type": "object"}
    # The one key the chart cannot run without (its templates `fail` without it too).
    schema["required"] = ["maxSlotsPerPod"]
    return schema
