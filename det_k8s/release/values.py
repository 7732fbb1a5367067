"""The values a release was installed with, as `det-k8s get values` prints them: every secret masked.

A key det-k8s knows (the settings schema) is masked when the schema marks it secret, and only
then: `imagePullSecretName` and `tlsSecret` name Secrets, they hold no secret themselves. A key it
does not know (an older chart's, a user's own) is masked when its name looks secret, except inside a pod spec,
whose field names are Kubernetes's (a toleration's `key`). An
environment variable in a pod spec (`{name: DB_PASSWORD, value: ...}`) is masked by its name, and
credentials in URLs (`user:password@host`, SAS tokens) are masked wherever they appear. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..settings import schema
from ..settings.secret_settings import POD_SPEC_KEYS, looks_secret, mask_url

MASK = "<redacted>"


def _secret_key(path: tuple[str | int, ...]) -> bool:
    key = schema.lookup(path)
    if key is not None:
        return key.secret
    name = path[-1]
    in_pod_spec = any(part in POD_SPEC_KEYS for part in path[:-1])  # Kubernetes's field names: `key` is no secret
    return isinstance(name, str) and not in_pod_spec and looks_secret(name)


def redact_values(values: Any, path: tuple[str | int, ...] = ()) -> Any:
    """A copy of `values` with every secret replaced by `<redacted>`."""
    if isinstance(values, Mapping):
        named = values.get("name")
        env_secret = isinstance(named, str) and "value" in values and looks_secret(named)
        out: dict[str, Any] = {}
        for key, item in values.items():
            child = (*path, str(key))
            if item not in (None, "") and (_secret_key(child) or (env_secret and key == "value")):
                out[key] = MASK
            else:
                out[key] = redact_values(item, child)
        return out
    if isinstance(values, list):
        return [redact_values(item, (*path, i)) for i, item in enumerate(values)]
    if isinstance(values, str) and ("://" in values or "@" in values and ":" in values):
        return mask_url(values)
    return values
