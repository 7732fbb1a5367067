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


def read_kubeconfig(paths: Sequence[Path]) -> tuple[Path, dict[str, Any]]:
    """The first kubeconfig file that exists, parsed; a missing one is one clear error."""
    for path in paths:
        if path.is_file():
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise InputError(f"{path}: cannot read kubeconfig: {exc}") from exc
            if not isinstance(data, dict):
                raise InputError(f"{path}: not a kubeconfig file")
            return path, data
    shown = ", ".join(str(p) for p in paths)
    raise InputError(f"no kubeconfig found ({shown})",
                     hint="pass --kubeconfig PATH or set KUBECONFIG; a cluster is needed for this command")


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
        raise UsageError(f"--kube-context {name}: no such context in {path} (contexts: {known})")
    ctx = contexts[name]
    clusters = {c.get("name"): c.get("cluster") or {} for c in data.get("clusters") or [] if isinstance(c, dict)}
    server = str(clusters.get(ctx.get("cluster"), {}).get("server") or "")
    ns = namespace or env.get("HELM_NAMESPACE") or ctx.get("namespace") or "default"
    return Target(path, str(name), str(ns), server), data
