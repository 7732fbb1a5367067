"""The manifests `install --dry-run` prints, with every Secret's values replaced.

The chart's Secret holds the database password and storage keys in `stringData`; a dry run's
output ends up in terminals, CI logs and tickets, so values are masked (keys stay, so the reader
sees which secrets the release carries). Other documents are printed as helm rendered them,
comments (`# Source: ...`) included.

A secret a chart puts outside a Secret (an official chart's database password in a Deployment's env, 0.17.15) is
redacted by position, never by searching for its text: the manifests shown are rendered from values whose secrets are
placeholders (`placeholder_values`), and each placeholder then reads `<redacted>`. Searching for the value replaced
every `postgres` (the default db.password) in `image: postgres:10.14` too, which broke the manifest and told every
reader the password.
"""

from __future__ import annotations

import re
import secrets as _random
from collections.abc import Mapping, Sequence
from typing import Any

from ..determined import versions
from ..errors import InputError
from ..safe_read import load_yaml
from ..settings import Settings
from ..settings.rules import parse_app_version
from ..settings.secret_settings import holds_secret
from .diff import dump_readable, mask_yaml_document

MASK = "<redacted>"
_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)


def _masked(value: Any, known: Sequence[str]) -> str:
    """A Secret's value as a dry run shows it: a master.yaml with the values of its secret-looking keys masked
    (the file an admin most wants to review), anything else masked whole."""
    shown = mask_yaml_document(value, known, MASK) if isinstance(value, str) else None
    return MASK if shown is None else shown


def redact_secrets(stream: str, known: Sequence[str] = ()) -> str:
    """The manifests with every Secret's values masked; a YAML document in a Secret's stringData (master.yaml
    from Determined 0.26.2) is shown with only its secrets masked. `known` are the settings' secrets."""
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


def placeholder_values(values: Any) -> tuple[Any, dict[str, str]]:
    """`values` (helm values, as det-k8s writes them) with each non-empty string under a secret key replaced by a
    placeholder of its own, and what each placeholder stands for in output (MASK). Rendered from these, a manifest
    holds no secret, and a placeholder marks exactly where a secret goes, whatever the chart does with it; an
    empty one stays empty, so the chart's `required` still refuses it."""
    marks: dict[str, str] = {}

    def walk(node: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(node, dict):
            return {key: walk(item, (*path, str(key))) for key, item in node.items()}
        if isinstance(node, list):
            return [walk(item, (*path, i)) for i, item in enumerate(node)]
        if isinstance(node, str | int | float) and not isinstance(node, bool) and node != "" and path \
                and holds_secret(path):
            mark = f"DetK8sRedacted{len(marks)}x{_random.token_hex(6)}"
            marks[mark] = MASK
            return mark
        return node

    return walk(values, ()), marks


DEFAULT_DB_PASSWORD = "postgres"  # the chart's db.password (settings/schema.py), as in the official charts


def default_passwords(values: Mapping[str, Any], app_version: Any, *, installing: bool) -> list[str]:
    """Warnings for passwords everybody knows that these values would install: the database's default, and (an
    install of Determined before 0.31 without defaultPassword) the admin and determined users' empty password."""
    found = []
    db = values.get("db") if isinstance(values.get("db"), Mapping) else {}
    if isinstance(db, Mapping) and db.get("password") == DEFAULT_DB_PASSWORD:
        where = "the external database (db.hostAddress)" if db.get("hostAddress") else "the bundled database"
        found.append(f"db.password is the chart's default, which every reader of the chart knows, and it protects "
                     f"{where}; set db.password (it is kept in a Secret)")
    version = parse_app_version(app_version)
    if installing and version is not None and not versions.has("master.security.initial_user_password", version) \
            and not values.get("defaultPassword"):
        found.append(f"defaultPassword is unset: Determined {version}'s admin and determined users are installed "
                     "with an empty password; set defaultPassword")
    return found
