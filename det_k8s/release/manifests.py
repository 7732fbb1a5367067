"""The manifests `install --dry-run` prints, with every Secret's values replaced.

The chart's Secret holds the database password and storage keys in `stringData`; a dry run's
output ends up in terminals, CI logs and tickets, so values are masked (keys stay, so the reader
sees which secrets the release carries). Other documents are printed as helm rendered them,
comments (`# Source: ...`) included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..bounded import load_yaml
from ..errors import InputError
from ..settings import Settings

MASK = "<redacted>"
_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)


def _masked(value: Any, known: Sequence[str]) -> str:
    """A Secret's value as a dry run shows it: a master.yaml with the values of its secret-looking keys masked
    (the file an admin most wants to review), anything else masked whole."""
    from .diff import mask_yaml_document

    shown = mask_yaml_document(value, known, MASK) if isinstance(value, str) else None
    return MASK if shown is None else shown


def redact_secrets(stream: str, known: Sequence[str] = ()) -> str:
    """The manifests with every Secret's values masked; a YAML document in a Secret's stringData (master.yaml
    from Determined 0.26.2) is shown with only its secrets masked. `known` are the settings' secrets."""
    from .diff import dump_readable

    docs = [d for d in _SEPARATOR.split(stream) if d.strip()]
    out = []
    for text in docs:
        try:
            obj = load_yaml(text, "helm's rendered manifests")
        except InputError:
            obj = None
        if obj is None and re.search(r"^kind:\s*Secret\s*$", text, re.MULTILINE):
            text = "# a Secret that could not be parsed: omitted\n"
        elif isinstance(obj, dict) and obj.get("kind") == "Secret":
            comments = "".join(line + "\n" for line in text.strip("\n").splitlines() if line.startswith("#"))
            if isinstance(obj.get("data"), dict):
                obj["data"] = {key: MASK for key in obj["data"]}
            if isinstance(obj.get("stringData"), dict):
                obj["stringData"] = {key: _masked(value, known) for key, value in obj["stringData"].items()}
            text = comments + dump_readable(obj)
        out.append(text.strip("\n") + "\n")
    return "".join(f"---\n{doc}" for doc in out)


def secret_values(settings: Settings) -> tuple[str, ...]:
    """Every password and key in the settings, so messages built from helm's output can be scrubbed."""

    def get(values: Mapping[str, Any], *path: str) -> Any:
        node: Any = values
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        return node

    found = [get(settings.values, "db", "password"), get(settings.values, "defaultPassword"),
             get(settings.values, "initialUserPassword"), get(settings.values, "scim", "auth", "password"),
             get(settings.values, "logging", "security", "password"), *settings.checkpoint.secrets]
    return tuple(str(s) for s in found if s)
