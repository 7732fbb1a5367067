"""Which cluster, as kubectl and helm decide it: --kubeconfig, KUBECONFIG, ~/.kube/config; a context.

Pure functions over the kubeconfig *data*; reading the file is left to the caller. The
namespace follows helm: -n, then HELM_NAMESPACE, then the context's namespace, then `default`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError, UsageError


@dataclass(frozen=True)
class Target:
    """The cluster a command talks to."""

    kubeconfig: Path
    context: str
    namespace: str
    server: str


def kubeconfig_paths(explicit: str | None, environ: Mapping[str, str] | None = None) -> list[Path]:
    """--kubeconfig wins; else every file in KUBECONFIG (':'-separated); else ~/.kube/config."""
    env = os.environ if environ is None else environ
    if explicit:
        return [Path(explicit).expanduser()]
    if env.get("KUBECONFIG"):
        return [Path(p).expanduser() for p in env["KUBECONFIG"].split(os.pathsep) if p]
    return [Path(env.get("HOME", "~")).expanduser() / ".kube" / "config"]


PATH_KEYS = {"cluster": ("certificate-authority",), "user": ("client-certificate", "client-key", "tokenFile")}


def _absolute_paths(entry: dict[str, Any], section: str, base: Path) -> dict[str, Any]:
    """File paths inside an entry made absolute against the kubeconfig that names them (as kubectl does)."""
    inner = dict(entry.get(section) or {})
    for key in PATH_KEYS[section]:
        value = inner.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            inner[key] = str(base / value)
    return {**entry, section: inner}


def merge_kubeconfigs(documents: Sequence[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """kubectl's merge of several kubeconfig files: the first to define a name or current-context wins."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "contexts": [], "users": []}
    seen: dict[str, set[str]] = {"clusters": set(), "contexts": set(), "users": set()}
    for path, data in documents:
        if not merged.get("current-context") and data.get("current-context"):
            merged["current-context"] = data["current-context"]
        for plural, section in (("clusters", "cluster"), ("contexts", "context"), ("users", "user")):
            for entry in data.get(plural) or ():
                if not isinstance(entry, dict) or entry.get("name") in seen[plural]:
                    continue
                seen[plural].add(str(entry.get("name")))
                fixed = _absolute_paths(entry, section, path.parent) if section in PATH_KEYS else entry
                merged[plural].append(fixed)
    return merged


def read_kubeconfig(paths: Sequence[Path]) -> tuple[Path, dict[str, Any]]:
    """Every kubeconfig file that exists, merged; none at all is one clear error."""
    documents: list[tuple[Path, dict[str, Any]]] = []
    for path in paths:
        if path.is_file():
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise InputError(f"{path}: cannot read kubeconfig: {exc}") from exc
            if not isinstance(data, dict):
                raise InputError(f"{path}: not a kubeconfig file")
            documents.append((path, data))
    if not documents:
        shown = ", ".join(str(p) for p in paths)
        raise InputError(f"no kubeconfig found ({shown})",
                         hint="pass --kubeconfig PATH or set KUBECONFIG; a cluster is needed for this command")
    return documents[0][0], merge_kubeconfigs(documents)


def resolve(kubeconfig: str | None, context: str | None, namespace: str | None,
            environ: Mapping[str, str] | None = None) -> tuple[Target, dict[str, Any]]:
    """Pick the kubeconfig, the context and the namespace; return the target and the parsed file."""
    env = os.environ if environ is None else environ
    path, data = read_kubeconfig(kubeconfig_paths(kubeconfig, env))
    contexts = {c.get("name"): c.get("context") or {} for c in data.get("contexts") or [] if isinstance(c, dict)}
    name = context or env.get("HELM_KUBECONTEXT") or data.get("current-context")
    if not name:
        raise UsageError(f"{path}: no current context", hint="pass --kube-context NAME")
    if name not in contexts:
        known = ", ".join(sorted(str(c) for c in contexts)) or "none"
        where = path if len(kubeconfig_paths(kubeconfig, env)) == 1 else "your kubeconfig files"
        origin = "--kube-context" if context else "HELM_KUBECONTEXT" if env.get("HELM_KUBECONTEXT") else (
            "current-context")
        raise UsageError(f"{origin} {name}: no such context in {where} (contexts: {known})")
    ctx = contexts[name]
    clusters = {c.get("name"): c.get("cluster") or {} for c in data.get("clusters") or [] if isinstance(c, dict)}
    server = str(clusters.get(ctx.get("cluster"), {}).get("server") or "")
    ns = namespace or env.get("HELM_NAMESPACE") or ctx.get("namespace") or "default"
    return Target(path, str(name), str(ns), server), data
