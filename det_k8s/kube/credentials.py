"""kubeconfig exec credential plugins (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`), run by det-k8s.

The kubernetes client runs a context's plugin itself, without a time limit, and when it fails it
only logs the error and carries on without credentials. So det-k8s runs the plugin first, through
the one subprocess helper (a time limit, its own process group ended on timeout or Ctrl-C, an
allow-listed environment), reads its ExecCredential (bounded like every input), and hands the
client a kubeconfig whose user holds the token or client certificate the plugin returned. A plugin
that fails, hangs or prints something else is an error naming the context and the plugin, with its
stderr scrubbed; its token is registered with the scrubber before anything could print it.

Tokens expire (EKS's after 15 minutes): `Credential.expires` says when, and the adapter runs the
plugin again before a request that would otherwise carry an expired token.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ClusterError, InputError, OperationTimeout, ToolNotFound
from ..safe_read import load_json
from ..scrub_output import register, scrub
from ..tools.process import child_env, run, trim_stderr

TIMEOUT = 60.0  # seconds; a plugin that has not answered by then is not going to (det-k8s never prompts)
OUTPUT_LIMIT = 2**20
REFRESH_MARGIN = datetime.timedelta(seconds=30)
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


@dataclass(frozen=True)
class Credential:
    token: str | None = None
    client_certificate: str | None = None  # PEM
    client_key: str | None = None  # PEM
    expires: datetime.datetime | None = None

    def expired(self, now: datetime.datetime | None = None) -> bool:
        if self.expires is None:
            return False
        moment = now or datetime.datetime.now(datetime.UTC)
        return moment >= self.expires - REFRESH_MARGIN

    def user_entry(self) -> dict[str, str]:
        """The kubeconfig `user` fields the client understands, in place of `exec`."""
        entry: dict[str, str] = {}
        if self.token:
            entry["token"] = self.token
        if self.client_certificate and self.client_key:
            entry["client-certificate-data"] = base64.b64encode(self.client_certificate.encode()).decode()
            entry["client-key-data"] = base64.b64encode(self.client_key.encode()).decode()
        return entry


def plugin_of(user: Mapping[str, Any]) -> Mapping[str, Any] | None:
    plugin = user.get("exec")
    return plugin if isinstance(plugin, Mapping) else None


def describe(plugin: Mapping[str, Any]) -> str:
    return str(plugin.get("command") or "?")[:200]


def run_plugin(plugin: Mapping[str, Any], context: str, cluster: Mapping[str, Any] | None = None,
               timeout: float = TIMEOUT) -> Credential:
    """Run the plugin of `context` and return its credential; a clear error when it cannot give one."""
    command = plugin.get("command")
    name = describe(plugin)
    what = f"context {context}: the credential plugin {name}"
    if not isinstance(command, str) or not command:
        raise InputError(f"context {context}: its user's exec section names no command")
    api_version = str(plugin.get("apiVersion") or API_VERSIONS[0])
    args = plugin.get("args") or []
    if not isinstance(args, list):
        raise InputError(f"{what}: exec.args is not a list")
    extra = {str(item.get("name")): str(item.get("value", "")) for item in plugin.get("env") or []
             if isinstance(item, Mapping) and item.get("name")}
    info: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    if plugin.get("provideClusterInfo") and cluster:
        info["spec"]["cluster"] = {k: v for k, v in cluster.items() if k in ("server", "certificate-authority-data",
                                                                          "tls-server-name", "insecure-skip-tls-verify",
                                                                          "proxy-url", "disable-compression")}
    env = child_env(extra={**extra, "KUBERNETES_EXEC_INFO": json.dumps(info)})
    register(*extra.values())  # a plugin's env may carry a secret (a client secret, a password)
    try:
        result = run([command, *map(str, args)], timeout=timeout, tool="credential plugin", env=env, check=False)
    except ToolNotFound as exc:
        hint = str(plugin.get("installHint") or "").strip()[:300] or "install it, or fix the command in the kubeconfig"
        raise ClusterError(f"{what} cannot be run: {exc.message}", hint=scrub(hint)) from exc
    except OperationTimeout as exc:
        raise OperationTimeout(f"{what} did not answer within {timeout:g}s; it was stopped",
                               hint="run it yourself to see what it waits for (a login, a network)") from exc
    if result.returncode != 0:
        detail = trim_stderr(result.stderr) or "no output"
        raise ClusterError(f"{what} failed (exit {result.returncode}): {detail}",
                           hint="run it yourself to see why; det-k8s does not go on without credentials")
    credential = _parse(result.stdout, what, api_version)
    register(credential.token, credential.client_key)
    return credential


def _parse(stdout: str, what: str, api_version: str) -> Credential:
    try:
        data = load_json(stdout, f"{what}'s output", limit=OUTPUT_LIMIT)
    except InputError as exc:
        raise ClusterError(f"{what} printed something that is not an ExecCredential ({_short(exc.message)})",
                           hint="it must print the ExecCredential JSON on stdout") from exc
    status = data.get("status") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("kind") != "ExecCredential" or not isinstance(status, dict):
        raise ClusterError(f"{what} printed JSON that is not an ExecCredential with a status")
    if data.get("apiVersion") not in (api_version, *API_VERSIONS):
        raise ClusterError(f"{what} answered with apiVersion {str(data.get('apiVersion'))[:80]!r}, not {api_version}")
    token = status.get("token")
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if not (isinstance(token, str) and token) and not (isinstance(cert, str) and isinstance(key, str)):
        raise ClusterError(f"{what} returned neither a token nor a client certificate and key")
    register(token if isinstance(token, str) else None, key if isinstance(key, str) else None)
    expires = None
    stamp = status.get("expirationTimestamp")
    if isinstance(stamp, str) and stamp:
        try:
            expires = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            expires = None
        if expires is not None and expires.tzinfo is None:
            expires = expires.replace(tzinfo=datetime.UTC)
    return Credential(token if isinstance(token, str) and token else None,
                      cert if isinstance(cert, str) else None, key if isinstance(key, str) else None, expires)


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."


def with_credential(data: Mapping[str, Any], user_name: str, credential: Credential) -> dict[str, Any]:
    """A copy of the kubeconfig data whose user `user_name` holds `credential` instead of `exec`."""
    users = []
    for entry in data.get("users") or []:
        if isinstance(entry, Mapping) and entry.get("name") == user_name:
            user = {k: v for k, v in dict(entry.get("user") or {}).items() if k != "exec"}
            entry = {**entry, "user": {**user, **credential.user_entry()}}
        users.append(entry)
    return {**data, "users": users}
