"""The one place det-k8s starts a process.

Every child gets an argv list (never a shell), a timeout, a deliberate environment and captured
output. A non-zero exit becomes `ToolFailed` carrying the tool's own stderr (trimmed, secrets
scrubbed), because that is what tells an admin what went wrong ("Error: INSTALLATION FAILED:
..."). A missing binary is `ToolNotFound`, a hang is `OperationTimeout`; no caller ever sees a
`subprocess` exception.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import OperationTimeout, ToolFailed, ToolNotFound

# What a child may inherit. helm and kubectl need their own settings (HELM_*, KUBECONFIG), a home
# for their caches, proxies and CA bundles to reach the API server, and the variables of the
# credential plugins a kubeconfig may run (aws eks get-token, gke-gcloud-auth-plugin, kubelogin).
# Everything else (our own DET_K8S_*, unrelated tokens, DET_* passwords) stays behind.
KEEP_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "TZ", "TMPDIR", "KUBECONFIG", "NO_COLOR", "SSL_CERT_FILE",
    "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
})
KEEP_PREFIXES = ("HELM_", "LC_", "XDG_", "AWS_", "GOOGLE_", "CLOUDSDK_", "AZURE_", "KUBECTL_")
STDERR_LIMIT = 600


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def child_env(environ: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a tool runs with: an allow-list of the caller's, plus `extra`."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if k in KEEP_NAMES or k.startswith(KEEP_PREFIXES)}
    env.update(extra or {})
    return env


def trim_stderr(text: str, secrets: Sequence[str] = (), limit: int = STDERR_LIMIT) -> str:
    """The useful part of a tool's stderr on one line: from the first `Error` line on, else the last lines."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<redacted>")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("Use --debug")]
    first = next((i for i, ln in enumerate(lines) if ln.lower().startswith("error")), None)
    chosen = lines[first:] if first is not None else lines[-3:]  # helm 4 continues an error on indented lines
    joined = " ".join(chosen)
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def display(argv: Sequence[str]) -> str:
    """An argv as a person would type it (for messages and --dry-run; argv never holds secrets)."""
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


def run(argv: Sequence[str], *, timeout: float, tool: str, env: Mapping[str, str] | None = None,
        check: bool = True, secrets: Sequence[str] = (), log: Callable[[str], None] | None = None) -> Completed:
    """Run argv and return its output; raise ToolFailed/ToolNotFound/OperationTimeout as described above."""
    argv = tuple(str(a) for a in argv)
    if log is not None:
        log(f"+ {display(argv)}")
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                env=child_env() if env is None else dict(env), stdin=subprocess.DEVNULL,
                                check=False, errors="replace")
    except FileNotFoundError as exc:
        raise ToolNotFound(f"{tool} not found at {argv[0]}") from exc
    except PermissionError as exc:
        raise ToolNotFound(f"{tool} at {argv[0]} is not executable") from exc
    except subprocess.TimeoutExpired as exc:
        subcommand = " ".join(a for a in argv[1:3] if not a.startswith("-"))
        raise OperationTimeout(f"{tool} {subcommand} did not finish within {timeout:g}s",
                               hint="raise --timeout, or check the cluster with det-k8s status") from exc
    completed = Completed(argv, result.returncode, result.stdout, result.stderr)
    if check and result.returncode != 0:
        subcommand = " ".join(a for a in argv[1:3] if not a.startswith("-"))
        detail = trim_stderr(result.stderr, secrets) or trim_stderr(result.stdout, secrets) or "no output"
        raise ToolFailed(f"{tool} {subcommand} failed (exit {result.returncode}): {detail}",
                         returncode=result.returncode, stderr=result.stderr)
    return completed
