"""The Kubernetes OpenAPI schema as kubernetes-validate carries it, as a cached validator per kind.

`kubernetes_validate.validate()` reads the 1.3 MB definitions file on every call; the API emulator
validates every object a client sends, so it builds one validator per (apiVersion, kind) once and
keeps it. The schemas are the *strict* ones (an unknown field is an error, as with a real API
server's `fieldValidation=Strict`), and date-time formats are checked, so a misspelt key, a wrong
type or a malformed timestamp in a Binding, an Event or a pod condition fails the request.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jsonschema
from kubernetes_validate import utils
from referencing import Registry, Resource

DEFAULT_VERSION = "1.31"


@cache
def _schema_dir(version: str) -> str:
    known = [v for v in utils.all_versions() if utils.major_minor(v) <= version]
    if not known:
        raise ValueError(f"kubernetes-validate has no schema for Kubernetes {version}")
    return f"kubernetes-json-schema/v{known[-1]}-local-strict"


@cache
def _definitions(version: str) -> Resource:  # type: ignore[type-arg]
    return Resource.from_contents(utils.schema_contents(f"{_schema_dir(version)}/_definitions.json", version))


@cache
def _validator(api_version: str, kind: str, version: str) -> jsonschema.Validator | None:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(f"{_schema_dir(version)}/{kind.lower()}-{group_version}.json", version)
    except FileNotFoundError:
        return None  # a kind the schema does not know (a CRD): not checked
    registry = _definitions(version) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry,
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def problems(obj: Any, version: str = DEFAULT_VERSION) -> list[str]:
    """What the schema refuses in `obj` (`path: message` each), [] when it is valid or its kind unknown."""
    if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str) or not isinstance(obj.get("apiVersion"), str):
        return ["apiVersion and kind are required"]
    validator = _validator(obj["apiVersion"], obj["kind"], version)
    if validator is None:
        return []
    found = []
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        path = ".".join(str(part) for part in error.absolute_path) or "<root>"
        found.append(f"{path}: {error.message}")
    return found
