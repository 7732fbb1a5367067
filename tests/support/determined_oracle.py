"""Determined's own JSON-schema validator, run in its own venv (.tools/determined-oracle: the `determined`
0.17.15 wheel and jsonschema<4, which the project's venv cannot hold). The tests call it through a subprocess.

stdin: {"tag": "0.17.15" | "0.26.2" | "v0.38.1", "schemas": DIR or null, "schema": "checkpoint-storage.json",
        "instances": [...]}
stdout: one list of error messages per instance ([] when the release's schema accepts it).

0.17.15 validates with the schemas inside the wheel (determined/common/schemas/expconf/_gen.py) and its
`_validate` module; later tags with the schema files of the repository at that tag (DIR, read from
../shared/determined/schemas/<tag>) and the wheel's `extensions` module, which implements Determined's custom
keywords (union, checks, compareProperties, disallowProperties, conditional, optionalRef), as the facts
document's section 5.5 shows. Only the sanity validator runs: completeness needs the master's defaults filled.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

V0 = "http://determined.ai/schemas/expconf/v0/"


def _bare_packages() -> None:
    """Import determined.common.schemas without the wheel's heavy __init__ modules."""
    spec = importlib.util.find_spec("determined")
    if spec is None or spec.origin is None:
        raise SystemExit("determined_oracle: the determined wheel is not installed in this interpreter")
    root = os.path.dirname(spec.origin)
    for name, path in [("determined", root), ("determined.common", root + "/common"),
                       ("determined.common.schemas", root + "/common/schemas")]:
        module = types.ModuleType(name)
        module.__path__ = [path]
        sys.modules[name] = module


def _wheel_errors(schema: str, instances: list[Any]) -> list[list[str]]:
    from determined.common.schemas.expconf import _validate

    return [list(_validate.sanity_validation_errors(instance, V0 + schema)) for instance in instances]


def _file_errors(directory: str, schema: str, instances: list[Any]) -> list[list[str]]:
    import jsonschema
    from determined.common.schemas import extensions, util

    schemas = {}
    for path in sorted(Path(directory).glob("*.json")):
        loaded = json.loads(path.read_text())
        schemas[loaded["$id"]] = loaded
    root = schemas[V0 + schema]
    resolver = jsonschema.RefResolver(base_uri=V0 + schema, referrer=root, handlers={"http": lambda url: schemas[url]})
    cls = jsonschema.validators.extend(jsonschema.Draft7Validator, {
        "disallowProperties": extensions.disallowProperties, "union": extensions.union, "checks": extensions.checks,
        "compareProperties": extensions.compareProperties, "conditional": extensions.conditional,
        "optionalRef": extensions.optionalRef})
    validator = cls(schema=root, resolver=resolver)
    return [list(util.format_validation_errors(validator.iter_errors(instance))) for instance in instances]


def main() -> None:
    request = json.load(sys.stdin)
    _bare_packages()
    if request["tag"] == "0.17.15":
        found = _wheel_errors(request["schema"], request["instances"])
    else:
        found = _file_errors(request["schemas"], request["schema"], request["instances"])
    json.dump(found, sys.stdout)


if __name__ == "__main__":
    main()
