"""One det-k8s line for a helm or kubectl failure, in the words det-k8s uses for the same failure elsewhere.

helm and kubectl say "cluster unreachable" in a dozen ways, and kubectl's client library adds
klog lines (`E0312 10:00:00.123 12345 memcache.go:265] couldn't get current server API group
list: ...`) before its own message, often twice. A user should read the same sentence whether
det-k8s talked to the API itself or through a tool: "cannot reach the Kubernetes API (context
x)", "no release demo", "the API server refused...", each naming the context and what to do.
What is not recognised keeps the tool's own `Error:` line (helm's "INSTALLATION FAILED: ..." is
the useful part), klog noise removed. The raw stderr is shown only with -v (the caller logs it).
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import ClusterError, ClusterUnreachable, DetK8sError, Forbidden, NotFound, ToolFailed, UsageError
from ..scrub_output import replace_secret

_KLOG = re.compile(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+[\w./-]+:\d+\]\s?")
# `dial tcp 10.0.0.9:6443: connect: connection refused`, also at the end of kubectl's structured klog lines
# (`err="couldn't get ...: connection refused"`), whose closing quote is not part of the reason
_DIAL = re.compile(r'dial tcp (\S+): (?:connect: )?([^:\n"\\]+?)\s*(?:\\?")?\s*$', re.MULTILINE)
# `Get "https://10.0.0.9:6443/version": net/http: TLS handshake timeout`: the address, then Go's chain of causes
_REQUEST = re.compile(r'"https?://([^/"\s]+)[^"\s]*":\s*([^\n]+?)\s*$', re.MULTILINE)
_UNABLE = re.compile(r"Unable to connect to the server: ([^\n]+?)\s*$", re.MULTILINE)
_CONTEXT = re.compile(r'context "([^"]*)" does not exist|context was not found for specified context: (\S+)')
_UNREACHABLE = ("connection refused", "no such host", "i/o timeout", "kubernetes cluster unreachable",
                "did you specify the right host or port", "network is unreachable", "tls handshake timeout",
                "connection reset by peer", "no route to host")  # not "context deadline exceeded": helm's --wait says it
_UNAUTHORIZED = ("unauthorized", "you must be logged in", "provide credentials")
_RELEASE_MISSING = ("release: not found", "has no deployed releases")
LIMIT = 400


def scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = replace_secret(text, secret, "<redacted>")  # a short one only as a whole token
    return text


def meaningful_lines(stderr: str) -> list[str]:
    """The tool's own lines: klog lines, blank lines and `Use --debug` tips removed, duplicates once."""
    out: list[str] = []
    for raw in stderr.splitlines():
        line = raw.strip()
        if not line or _KLOG.match(line) or line.startswith("Use --debug"):
            continue
        if line not in out:
            out.append(line)
    return out


def _detail(stderr: str, stdout: str) -> str:
    lines = meaningful_lines(stderr) or meaningful_lines(stdout)
    first = next((i for i, ln in enumerate(lines) if ln.lower().startswith("error")), None)
    chosen = lines[first:] if first is not None else lines[-2:]  # helm 4 continues an error on indented lines
    joined = " ".join(chosen) or "no output"
    return joined if len(joined) <= LIMIT else joined[: LIMIT - 3] + "..."


def _last_cause(chain: str) -> str:
    """The innermost cause of a Go error chain (`dial tcp: lookup x on 10.0.0.2:53: no such host` -> `no such
    host`; `net/http: TLS handshake timeout` -> `TLS handshake timeout`), without klog's closing quote."""
    return chain.rstrip('"\\ ').rsplit(": ", 1)[-1]


def _subcommand(argv: Sequence[str]) -> str:
    return " ".join(a for a in argv[1:3] if not a.startswith("-"))


def _flag(argv: Sequence[str], *names: str) -> str | None:
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
    return None


def explain(tool: str, argv: Sequence[str], returncode: int, stderr: str, stdout: str = "", *,
            context: str | None = None, secrets: Sequence[str] = ()) -> DetK8sError:
    """The det-k8s error for `tool` (helm or kubectl) having exited `returncode` with `stderr`."""
    stderr, stdout = scrub(stderr, secrets), scrub(stdout, secrets)
    low = stderr.lower()
    sub = _subcommand(argv)
    named = context or _flag(argv, "--kube-context", "--context")
    where = f"context {named}" if named else "the current context"
    missing = _CONTEXT.search(stderr)
    if missing:
        name = missing.group(1) or missing.group(2)
        return UsageError(f"{tool} {sub}: no context {name} in your kubeconfig",
                          hint="kubectl config get-contexts lists them; pass --kube-context NAME")
    if any(marker in low for marker in _UNREACHABLE):
        dial, request, unable = _DIAL.search(stderr), _REQUEST.search(stderr), _UNABLE.search(stderr)
        reason = (f"{dial.group(1)}: {dial.group(2)}" if dial else
                  f"{request.group(1)}: {_last_cause(request.group(2))}" if request else
                  _last_cause(unable.group(1)) if unable else _detail(stderr, stdout))
        hint = "is the cluster up? check --kube-context and your kubeconfig"
        if dial and dial.group(1) in ("127.0.0.1:8080", "[::1]:8080", "localhost:8080"):
            hint = (f"{tool} found no kubeconfig and tried localhost:8080; pass --kubeconfig PATH or set KUBECONFIG")
        return ClusterUnreachable(f"{tool} {sub}: cannot reach the Kubernetes API ({where}): {reason}", hint=hint)
    if "x509:" in low or "certificate signed by unknown authority" in low:
        return ClusterError(f"{tool} {sub}: the API server's TLS certificate was not accepted ({where}): "
                            f"{_detail(stderr, stdout)}",
                            hint="check certificate-authority(-data) for this cluster in your kubeconfig")
    if any(marker in low for marker in _UNAUTHORIZED):
        return Forbidden(f"{tool} {sub}: the API server did not accept the credentials of {where}",
                         hint="log in again (the kubeconfig's token or certificate may have expired)")
    if "forbidden" in low:  # 403 is also admission's answer, not only RBAC's (seen from a real API server)
        namespace = _flag(argv, "--namespace", "-n") or "the namespace"
        if "because it is being terminated" in low:
            hint = (f"{namespace} is being deleted: wait until `kubectl get namespace {namespace}` finds nothing, or "
                    "use another namespace")
        elif "exceeded quota" in low:
            hint = f"a ResourceQuota refuses it: kubectl describe resourcequota -n {namespace}"
        elif "violates podsecurity" in low:
            hint = (f"the Pod Security level of {namespace} refuses it (its label "
                    "pod-security.kubernetes.io/enforce)")
        else:
            hint = "ask a cluster admin for the RBAC permission, or use another --kube-context"
        return Forbidden(f"{tool} {sub}: {_detail(stderr, stdout)} ({where})", hint=hint)
    if any(marker in low for marker in _RELEASE_MISSING):
        words = [a for a in argv[1:] if not a.startswith("-")]
        position = 2 if words[:1] == ["get"] else 1  # `get manifest demo`, `history demo`, `rollback demo 3`
        release = words[position] if len(words) > position else "?"
        namespace = _flag(argv, "--namespace", "-n") or "the current namespace"
        return NotFound(f"no release {release} in {'namespace ' if namespace != 'the current namespace' else ''}"
                        f"{namespace} ({where})", hint="det-k8s list -A shows the releases")
    return ToolFailed(f"{tool} {sub} failed (exit {returncode}): {_detail(stderr, stdout)}", returncode=returncode,
                      stderr=stderr)
