"""What an upgrade or a rollback would change: two manifest streams, object by object, as unified diffs.

The streams are what helm prints: `helm get manifest` plus `helm get hooks` for an installed
revision, `helm template` (helm 3) or `install --dry-run=client` (helm 4) for a new render. As
helm-diff does, objects are matched by namespace, name, kind and API group (`default,
determined-master-deployment-demo, Deployment (apps)`), and each side is diffed as helm rendered
it, so the master configuration (`master.yaml` inside its ConfigMap or, from Determined 0.26.2,
its Secret) shows line by line.

Nothing secret is ever shown:
- every value of a Secret becomes `<secret N bytes, hash H>`; a value that is itself a YAML
  mapping (a `master.yaml`) is shown as YAML with each secret-looking key's value hashed the same
  way, so a changed bucket shows and a changed password shows only as a changed hash;
- values of ConfigMaps that are YAML mappings get the same treatment (older official charts keep
  the database password in the master's ConfigMap);
- in every other object, the `value` of an environment variable whose name looks secret
  (`{name: POSTGRES_PASSWORD, value: ...}`, as the official charts write the database password) is
  hashed the same way;
- any of the `secrets` the caller knows (the settings' passwords and keys, and those the installed
  revisions were given) left anywhere else is hashed too.
The hash is keyed with a random key per run: equal hashes in one output mean an unchanged value,
and no hash can be looked up or compared across runs (a bare SHA-256 of a short password could).

Every document and every value parsed as YAML is bounded (`det_k8s.safe_read`: depth, aliases, numbers)
and read whatever its shape: a document that is no Kubernetes object, too deep, or a Secret's `data`
that is not a mapping is shown as a hash, never a crash.

Pure, except for that random key.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import hashlib
import re
import secrets as _random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from ..errors import InputError
from ..labels import KEEP_POLICY
from ..safe_read import load_yaml
from ..scrub_output import replace_secret
from ..settings.secret_settings import POD_SPEC_KEYS, looks_secret, mask_url

_KEY = _random.token_bytes(32)
_SEPARATOR = re.compile(r"^---\s*$", re.MULTILINE)
ADDED, REMOVED, CHANGED = "added", "removed", "changed"


def secret_token(value: bytes | str) -> str:
    """`<secret 14 bytes, hash 3f2a9c1e0b7d>`: equal within one run for equal values, meaningless outside it."""
    data = value.encode() if isinstance(value, str) else value
    digest = hashlib.blake2b(data, key=_KEY, digest_size=6).hexdigest()
    return f"<secret {len(data)} bytes, hash {digest}>"


@dataclass(frozen=True)
class Manifest:
    """One object of a manifest stream: its identity and its text as shown (secrets already hashed)."""

    key: str
    kind: str
    name: str
    text: str
    keep: bool = False  # helm.sh/resource-policy: keep (helm leaves it when it is gone from the chart)


@dataclass(frozen=True)
class Change:
    key: str
    kind: str
    name: str
    action: str  # added, removed, changed
    lines: tuple[str, ...]  # unified diff lines, without the ---/+++ header

    @property
    def title(self) -> str:
        verb = {ADDED: "has been added", REMOVED: "has been removed", CHANGED: "has changed"}[self.action]
        return f"{self.key} {verb}:"


def _str(dumper: Any, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


# Multi-line strings as block scalars, so a master.yaml inside a ConfigMap stays readable line by line.
_Dumper: Any = type("_Dumper", (yaml.SafeDumper,), {})
_Dumper.add_representer(str, _str)


def _dump(value: Any) -> str:
    """YAML as a person reads it: keys in their order, multi-line strings as block scalars."""
    return str(yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                         width=1 << 16))


def _mask_tree(value: Any, known: Sequence[str], hide: Callable[[str], str] = secret_token,
               names: bool = True) -> Any:
    """A parsed YAML tree with every secret-looking key's value, and every URL's credentials, hidden (`hide`
    gives what shows instead: a keyed hash for diffs, a plain mask for install --dry-run). Within a pod spec
    the names are Kubernetes's (a toleration's `key`), so only known secrets and URLs are hidden there."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if names and isinstance(key, str) and looks_secret(key) and item not in (None, "", {}, []):
                out[key] = hide(_dump(item) if isinstance(item, Mapping | list) else str(item))
            else:
                out[key] = _mask_tree(item, known, hide, names and key not in POD_SPEC_KEYS)
        return out
    if isinstance(value, list):
        return [_mask_tree(item, known, hide, names) for item in value]
    if isinstance(value, str):
        if value in known:
            return hide(value)
        return mask_url(value) if "://" in value else value
    return value


dump_readable = _dump


def mask_yaml_document(text: str, known: Sequence[str], mask: str) -> str | None:
    """A multi-line YAML mapping (a master.yaml) with its secret-looking keys' values, the `known` secrets and
    URL credentials shown as `mask`; None when `text` is not one (then the whole value is to be masked)."""
    parsed = _parse_mapping(text) if "\n" in text.strip() else None
    return None if parsed is None else _dump(_mask_tree(parsed, known, lambda _: mask))


def _load(text: str) -> Any:
    """One YAML document, bounded; None when it is not one (a syntax error, too deep, too many aliases)."""
    try:
        return load_yaml(text, "manifest")
    except InputError:
        return None


def _parse_mapping(text: str) -> Mapping[str, Any] | None:
    parsed = _load(text)
    return parsed if isinstance(parsed, Mapping) and parsed else None


def _entries(value: Any) -> list[tuple[Any, Any]]:
    """A Secret's `data`/`stringData` as (key, value) pairs; anything but a mapping is one value, to be hashed."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return list(value.items())
    return [("(not a mapping)", _dump(value))]


def _comments(text: str) -> str:
    return "".join(line + "\n" for line in text.strip("\n").splitlines() if line.startswith("#"))


def _secret_text(obj: dict[str, Any], text: str, known: Sequence[str]) -> str:
    values: dict[str, bytes] = {}
    for key, item in _entries(obj.get("data")):
        try:
            values[str(key)] = base64.b64decode(str(item), validate=True)
        except (binascii.Error, ValueError):
            values[str(key)] = str(item).encode()
    for key, item in _entries(obj.get("stringData")):
        values[str(key)] = ("" if item is None else str(item)).encode()  # the API server merges it into data
    shown: dict[str, str] = {}
    for key in sorted(values):
        raw = values[key]
        try:
            text_value = raw.decode("utf-8")
        except UnicodeDecodeError:
            text_value = ""
        # A multi-line YAML mapping (a master.yaml) is shown with its secret-looking keys hashed; anything else,
        # a password with ": " in it included, is only ever a hash.
        parsed = _parse_mapping(text_value) if "\n" in text_value.strip() else None
        shown[key] = _dump(_mask_tree(parsed, known)) if parsed is not None else secret_token(raw)
    rest = {k: v for k, v in obj.items() if k not in ("data", "stringData")}
    return _comments(text) + _dump({**rest, **({"data": shown} if shown else {})})


def _configmap_text(obj: dict[str, Any], text: str, known: Sequence[str]) -> str:
    data = obj.get("data")
    if not isinstance(data, Mapping):
        return text
    masked = dict(data)
    for key, value in data.items():
        parsed = _parse_mapping(value) if isinstance(value, str) else None
        if parsed is not None:
            hidden = _mask_tree(parsed, known)
            if hidden != parsed:
                masked[key] = _dump(hidden)
        elif isinstance(value, str) and value in known:
            masked[key] = secret_token(value)
    if masked == data:
        return text  # nothing to hide: keep helm's own text
    return _comments(text) + _dump({**obj, "data": masked})


def _mask_env(value: Any) -> Any:
    """`value` with each `{name: <secret-looking>, value: <text>}` entry's value hashed; `value` itself when none
    is (so an object without one keeps helm's own text)."""
    if isinstance(value, list):
        items = [_mask_env(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if not isinstance(value, Mapping):
        return value
    name, text = value.get("name"), value.get("value")
    if isinstance(name, str) and looks_secret(name) and isinstance(text, str) and text:
        return {**value, "value": secret_token(text)}
    items_ = {key: _mask_env(item) for key, item in value.items()}
    return value if all(items_[key] is item for key, item in value.items()) else items_


def _scrub(text: str, known: Sequence[str]) -> str:
    for value in sorted((k for k in known if k), key=len, reverse=True):
        text = replace_secret(text, value, secret_token(value))  # a short one only as a whole token
    return text


def _api_group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else api_version


def parse_manifests(stream: str, namespace: str, secrets: Sequence[str] = ()) -> dict[str, Manifest]:
    """The objects of a manifest stream by key, secrets hashed. A document that is not YAML is kept whole, hashed."""
    known = tuple(s for s in secrets if s)
    out: dict[str, Manifest] = {}
    for number, text in enumerate(d for d in _SEPARATOR.split(stream) if d.strip()):
        obj = _load(text)
        if obj is None and not text.strip().replace("#", "").strip():
            continue  # comments only (a template that rendered nothing)
        if not isinstance(obj, dict):
            key = f"document {number + 1} (not a Kubernetes object)"
            out[key] = Manifest(key, "", key, secret_token(text) + "\n")
            continue
        if obj.get("kind") == "List" and isinstance(obj.get("items"), list):
            for item in obj["items"]:
                out.update(parse_manifests(_dump(item), namespace, known))
            continue
        meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        kind, name = str(obj.get("kind") or "?"), str(meta.get("name") or "?")
        key = f"{meta.get('namespace') or namespace}, {name}, {kind} ({_api_group(str(obj.get('apiVersion') or ''))})"
        if kind == "Secret":
            shown = _secret_text(obj, text, known)
        elif kind == "ConfigMap":
            shown = _configmap_text(obj, text, known)
        else:
            hidden = _mask_env(obj)
            shown = text.strip("\n") + "\n" if hidden is obj else _comments(text) + _dump(hidden)
        annotations = meta.get("annotations")
        keep = isinstance(annotations, Mapping) and annotations.get(KEEP_POLICY) == "keep"
        out[key] = Manifest(key, kind, name, _scrub(shown, known), keep)
    return out


def diff_manifests(old: Mapping[str, Manifest], new: Mapping[str, Manifest], context: int = 3) -> list[Change]:
    """Every object that changes, is added or is removed (kept objects are not removed), in key order."""
    changes = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        if before is not None and after is not None:
            if before.text == after.text:
                continue
            action, shown = CHANGED, after
        elif after is not None:
            action, shown = ADDED, after
        else:
            assert before is not None
            if before.keep:
                continue
            action, shown = REMOVED, before
        a = before.text.splitlines() if before is not None else []
        b = after.text.splitlines() if after is not None else []
        lines = list(difflib.unified_diff(a, b, lineterm="", n=context if action == CHANGED else max(len(a), len(b))))
        changes.append(Change(key, shown.kind, shown.name, action, tuple(lines[2:])))
    return changes


def summary(changes: Iterable[Change]) -> str:
    """`2 changed, 1 added, 0 removed`."""
    counts = {ADDED: 0, CHANGED: 0, REMOVED: 0}
    for change in changes:
        counts[change.action] += 1
    return f"{counts[CHANGED]} changed, {counts[ADDED]} added, {counts[REMOVED]} removed"
