"""Keeping secret values out of messages about settings.

Problems name where a value came from, and for `--set` that is the argument itself; a wrong
type is explained by showing the value. Both are fine for `maxSlotsPerPod=3` and wrong for
`db.password=...`: the key table knows which keys are secret, and URLs may carry credentials
(user:password@host) or SAS tokens in their query string.

Which settings are secret, and masking them where a message about settings is composed (a `--set` argument,
a value shown to explain a wrong type). The secret values themselves, wherever they end up in printed text,
are removed by `det_k8s/scrub_output.py` as the last step before anything is printed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from . import schema
from .source import format_path

MASK = "***"
SECRET_NAMES = frozenset(path[-1] for path in schema.secret_paths())
_KEY_SEPARATOR = re.compile(r"(?<!\\)\.")  # an unescaped dot
_ASSIGNMENT = re.compile(r"(?P<key>(?:[^,=\\]|\\.)+)=(?P<value>(?:\{[^}]*\}|(?:[^,\\]|\\.)*))")


# Names that look secret, whatever their spelling: a misspelt `secret_key` (Determined's own master.yaml
# spelling) is an unknown key, but its value is a secret all the same.
_SECRET_LOOKING = re.compile(r"pass|pasw|pwd|secret|key|cred|token|conn|sig|auth|cert", re.IGNORECASE)


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_SECRET_NORMS = [_norm(name) for name in SECRET_NAMES]


def looks_secret(name: str) -> bool:
    """A secret-sounding name, or one close to a secret key's name (`secret_key`, `defaultPasword`)."""
    return bool(_SECRET_LOOKING.search(name)) or bool(
        difflib.get_close_matches(_norm(name), _SECRET_NORMS, n=1, cutoff=0.75))


# Keys holding a Kubernetes pod spec: its field names are Kubernetes's (tolerations' and selectors' `key`,
# `secretKeyRef`, `secretName`) and name no secret: a pod spec holds none (Kubernetes keeps them in Secrets), so
# the name heuristic stops there; a toleration keyed nvidia.com/gpu must not mask every nvidia.com/gpu printed.
POD_SPEC_KEYS = frozenset({"cpuPodSpec", "gpuPodSpec", "checkpointGcPodSpec", "cpu_pod_spec", "gpu_pod_spec",
                           "checkpoint_gc_pod_spec", "pod_spec"})


def is_secret(path: Sequence[str | int]) -> bool:
    """A known secret key, or any key whose name looks like one (misspelt, or unknown to det-k8s), above any pod
    spec it is in."""
    names = tuple(part for part in path if isinstance(part, str))
    if any(names[: len(secret)] == secret for secret in schema.secret_paths()):
        return True
    inside = next((i for i, name in enumerate(names[:-1]) if name in POD_SPEC_KEYS), None)
    return any(looks_secret(name) for name in (names if inside is None else names[: inside + 1]))


def secrets_in(values: Any, path: tuple[str | int, ...] = ()) -> list[str]:
    """Every string under a secret key (known, misspelt or secret-looking) of nested values, for the scrubber.

    Iterative, so hostile nesting cannot overflow it; inputs are depth-bounded before they get here.
    """
    found: list[str] = []
    pending: list[tuple[Any, tuple[str | int, ...]]] = [(values, path)]
    while pending:
        node, where = pending.pop()
        if isinstance(node, dict):
            pending.extend((value, (*where, str(key))) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((value, (*where, i)) for i, value in enumerate(node))
        elif isinstance(node, str) and where and _holds_secret(where):
            found.append(node)
    return found


def plain_in(values: Any) -> list[str]:
    """Every string of nested values that is not under a secret key (hosts, buckets, users), for the scrubber."""
    found: list[str] = []
    pending: list[tuple[Any, tuple[str | int, ...]]] = [(values, ())]
    while pending:
        node, where = pending.pop()
        if isinstance(node, dict):
            pending.extend((value, (*where, str(key))) for key, value in node.items())
        elif isinstance(node, list):
            pending.extend((value, (*where, i)) for i, value in enumerate(node))
        elif isinstance(node, str) and where and not _holds_secret(where):
            found.append(node)
    return found


def holds_secret(path: Sequence[str | int]) -> bool:
    """A path of values under which a string is a secret (what `secrets_in` collects)."""
    return _holds_secret(path)


def _holds_secret(path: Sequence[str | int]) -> bool:
    """A secret key, or one det-k8s does not know whose name looks secret; a known key that only names a
    secret (imagePullSecretName, tlsSecret) holds none."""
    key = schema.lookup(tuple(path))
    if key is not None and key.kind is not schema.Kind.OBJECT:
        return key.secret
    return is_secret(path)


def set_location(flag: str, path: Sequence[str | int], value: Any) -> str:
    """How a --set assignment is named in messages: its key and value, the value masked when secret (a known key
    as the schema says: tlsSecret names a Secret and holds none)."""
    if _holds_secret(path):
        shown = MASK
    elif isinstance(value, str) and any(mark in value for mark in ("://", "?", "@")):
        shown = mask_url(value)
    elif isinstance(value, list):
        shown = "{" + ",".join("null" if v is None else str(v) for v in value) + "}"
    else:
        shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    return f"{flag} {clip(format_path(tuple(path)))}={clip(shown)}"


def clip(text: str, width: int = 80) -> str:
    """A long value shortened for a message (a 5,000-digit number is not worth repeating)."""
    return text if len(text) <= width else f"{text[: width - 20]}...({len(text)} characters)"


def mask_set_expression(expression: str) -> str:
    """A --set argument as it may be shown: from the first secret key on, everything is masked.

    Used for arguments that could not be parsed, so where a value ends is unknown: all of the
    rest is hidden rather than guessed.
    """
    for match in _ASSIGNMENT.finditer(expression):
        last = _KEY_SEPARATOR.split(match["key"])[-1].split("[")[0]
        if last in SECRET_NAMES or looks_secret(last):
            return expression[: match.start("value")] + MASK
    return expression


def mask_url(text: str) -> str:
    """A URL with its user-info and query (credentials, SAS tokens) masked."""
    try:
        parts = urlsplit(text)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = MASK if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)) if parts.scheme or netloc else (
        MASK if "@" in text or "?" in text else text)
