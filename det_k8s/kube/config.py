"""Which cluster, as kubectl and helm decide it: --kubeconfig, KUBECONFIG, ~/.kube/config; a context.

The kubeconfig files are read through the bounded reading layer (regular files only, size and
depth limits); the rest are pure functions over the kubeconfig *data*. The namespace follows helm:
-n, then HELM_NAMESPACE, then the context's namespace, then `default`, and whichever wins must be a
valid namespace name (a DNS-1123 label), checked as a whole string and named by where it came from.
The context's credentials are registered with the scrubber, and the server URL is shown without
the user:password@ some kubeconfigs carry in it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import InputError, UsageError
from ..names import check_namespace
from ..safe_read import load_yaml, read_file, type_name
from ..scrub_output import register
from ..settings.secret_settings import mask_url

KUBECONFIG_LIMIT = 16 * 2**20


@dataclass(frozen=True)
class Target:
    """The cluster a command talks to."""

    kubeconfig: Path
    context: str
    namespace: str
    server: str  # as shown in messages: without user:password@ or a query string


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
    """File paths inside an entry made absolute against the kubeconfig that names them (as kubectl does).

    A credential plugin's command is resolved the same way when it is a relative path (it names a
    directory); a bare command name is looked up on PATH.
    """
    inner = dict(entry.get(section) or {}) if isinstance(entry.get(section), dict) else {}
    for key in PATH_KEYS[section]:
        value = inner.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            inner[key] = str(base / value)
    plugin = inner.get("exec")
    if section == "user" and isinstance(plugin, dict):
        command = plugin.get("command")
        if isinstance(command, str) and os.sep in command and not Path(command).is_absolute():
            inner["exec"] = {**plugin, "command": str(base / command)}
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


_SECTIONS: dict[str, tuple[str, dict[str, type]]] = {
    "clusters": ("cluster", {"server": str, "certificate-authority": str, "certificate-authority-data": str,
                             "insecure-skip-tls-verify": bool, "tls-server-name": str, "proxy-url": str}),
    "contexts": ("context", {"cluster": str, "user": str, "namespace": str}),
    "users": ("user", {"token": str, "tokenFile": str, "client-certificate": str, "client-key": str,
                       "client-certificate-data": str, "client-key-data": str, "username": str, "password": str,
                       "exec": dict, "auth-provider": dict}),
}


def checked(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """The kubeconfig, its fields of the shapes kubectl expects; one InputError naming the first that is not."""
    def fail(where: str, expected: type, value: Any) -> InputError:
        kind = {str: "a string", bool: "true or false", dict: "a mapping", list: "a list"}[expected]
        return InputError(f"{path}: {where}: expected {kind}, found {type_name(value)}",
                          hint="fix the kubeconfig (kubectl config view shows how kubectl reads it)")

    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise fail("current-context", str, current)
    for plural, (section, fields) in _SECTIONS.items():
        items = data.get(plural)
        if items is None:
            continue
        if not isinstance(items, list):
            raise fail(plural, list, items)
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise fail(f"{plural}[{i}]", dict, item)
            if not isinstance(item.get("name"), str):
                raise fail(f"{plural}[{i}].name", str, item.get("name"))
            inner = item.get(section)
            if inner is None:
                continue
            if not isinstance(inner, dict):
                raise fail(f"{plural}[{i}] ({item['name']}).{section}", dict, inner)
            for key, expected in fields.items():
                if inner.get(key) is not None and not isinstance(inner[key], expected):
                    raise fail(f"{plural}[{i}] ({item['name']}).{section}.{key}", expected, inner[key])
    return data


def read_kubeconfig(paths: Sequence[Path]) -> tuple[Path, dict[str, Any]]:
    """Every kubeconfig file that exists, merged; none at all is one clear error."""
    documents: list[tuple[Path, dict[str, Any]]] = []
    for path in paths:
        if os.path.lexists(path):  # a missing file in KUBECONFIG is skipped, as kubectl does; anything else is read
            data = load_yaml(read_file(path, "kubeconfig", KUBECONFIG_LIMIT), str(path)) or {}
            if not isinstance(data, dict):
                raise InputError(f"{path}: not a kubeconfig file (expected a mapping)")
            documents.append((path, checked(data, path)))
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
    contexts = {c.get("name"): c.get("context") for c in _entries(data, "contexts")}
    name = context or env.get("HELM_KUBECONTEXT") or data.get("current-context")
    if not name:
        raise UsageError(f"{path}: no current context", hint="pass --kube-context NAME")
    if not isinstance(name, str) or name not in contexts:
        known = ", ".join(sorted(str(c) for c in contexts))[:500] or "none"
        where = path if len(kubeconfig_paths(kubeconfig, env)) == 1 else "your kubeconfig files"
        origin = "--kube-context" if context else "HELM_KUBECONTEXT" if env.get("HELM_KUBECONTEXT") else (
            "current-context")
        raise UsageError(f"{origin} {str(name)[:100]}: no such context in {where} (contexts: {known})")
    ctx = contexts[name] or {}
    if not isinstance(ctx, dict):
        raise InputError(f"{path}: context {name}: expected a mapping with cluster, user and namespace")
    clusters = {c.get("name"): c.get("cluster") for c in _entries(data, "clusters")}
    cluster = clusters.get(ctx.get("cluster")) or {}
    server = str(cluster.get("server") or "") if isinstance(cluster, dict) else ""
    if namespace:
        ns = check_namespace(namespace, "--namespace")
    elif env.get("HELM_NAMESPACE"):
        ns = check_namespace(env["HELM_NAMESPACE"], "HELM_NAMESPACE")
    elif ctx.get("namespace"):
        ns = check_namespace(str(ctx["namespace"]), f"the namespace of context {name} in {path}")
    else:
        ns = "default"
    register_credentials(data, ctx)
    return Target(path, name, ns, mask_url(server) if server else server), data


def _entries(data: dict[str, Any], plural: str) -> list[dict[str, Any]]:
    items = data.get(plural)
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def user_of(data: dict[str, Any], ctx: dict[str, Any]) -> dict[str, Any]:
    """The user entry a context names ({} when it names none)."""
    users = {u.get("name"): u.get("user") for u in _entries(data, "users")}
    user = users.get(ctx.get("user")) or {}
    return user if isinstance(user, dict) else {}


SECRET_USER_KEYS = ("token", "password", "client-key-data")


def register_credentials(data: dict[str, Any], ctx: dict[str, Any]) -> None:
    """The context's credentials go to the scrubber before anything can print them (and the server's user-info)."""
    user = user_of(data, ctx)
    values = [user.get(key) for key in SECRET_USER_KEYS]
    provider = user.get("auth-provider")
    if isinstance(provider, dict) and isinstance(provider.get("config"), dict):
        values += [v for k, v in provider["config"].items() if k in ("access-token", "refresh-token", "id-token",
                                                                     "client-secret")]
    clusters = {c.get("name"): c.get("cluster") for c in _entries(data, "clusters")}
    cluster = clusters.get(ctx.get("cluster"))
    server = cluster.get("server") if isinstance(cluster, dict) else None
    if isinstance(server, str) and "@" in server:
        try:
            password = urlsplit(server).password
        except ValueError:
            password = None
        values += [password, unquote(password) if password else None]
    register(*values)
