"""The one place det-k8s starts a process.

Every child gets an argv list (never a shell), a timeout, a deliberate environment and captured
output. A non-zero exit becomes `ToolFailed` carrying the tool's own stderr (trimmed, secrets
scrubbed), because that is what tells an admin what went wrong ("Error: INSTALLATION FAILED:
..."). A missing binary is `ToolNotFound`, a hang is `OperationTimeout`; no caller ever sees a
`subprocess` exception.

Each child leads its own session and process group: on a timeout, Ctrl-C or any signal that stops det-k8s
(det_k8s/stopping.py) the whole group is ended (TERM, then KILL), so nothing a tool started (helm's plugins and
post-renderers, a credential plugin's helpers) outlives det-k8s. A det-k8s killed outright (kill -9) cannot do
that; the child then gets SIGTERM from the kernel (PR_SET_PDEATHSIG, Linux).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .. import stopping
from ..errors import OperationTimeout, ToolFailed, ToolNotFound
from ..scrub_output import scrub

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
GRACE_SECONDS = 2.0  # after SIGTERM, before SIGKILL


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
    """The useful part of a tool's stderr on one line: from the first `Error` line on, else the last lines.

    Scrubbed first (every registered secret and `secrets`, in every derived form: base64 as helm
    prints a Secret's data, URL-encoded, the parts of a connection string, a URL's user:password@).
    """
    text = scrub(text, secrets)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip() and not ln.startswith("Use --debug")]
    first = next((i for i, ln in enumerate(lines) if ln.lower().startswith("error")), None)
    chosen = lines[first:] if first is not None else lines[-3:]  # helm 4 continues an error on indented lines
    joined = " ".join(chosen)
    return joined if len(joined) <= limit else joined[: limit - 3] + "..."


def display(argv: Sequence[str]) -> str:
    """An argv as a person would type it (for messages and --dry-run; argv never holds secrets)."""
    return " ".join(shlex.quote(a) for a in argv)


def _end_with_parent() -> Callable[[], None] | None:
    """On Linux, from the main thread: the child gets SIGTERM when det-k8s dies, even by kill -9 (PR_SET_PDEATHSIG),
    so a killed det-k8s leaves no helm running unwatched. (Tied to the forking thread, so only from the main one.)"""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_death_signal() -> None:  # runs in the child between fork and exec: nothing that takes a lock
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # det-k8s died before the line above: go now
            os.kill(os.getpid(), signal.SIGTERM)

    return set_death_signal


def _kill_group(process: subprocess.Popen[str]) -> None:
    """End the child and everything it started: its own process group (it leads a new session).

    TERM first, so helm can release what it holds; KILL for whatever is still there a moment later.
    """
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, GRACE_SECONDS)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return  # the group is gone
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            continue
        if sig is signal.SIGTERM:  # the leader is gone; its children may not be
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        return


def _communicate(process: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """The child's output; on timeout (or Ctrl-C) its whole process group is ended before this returns."""
    try:
        return process.communicate(timeout=timeout)
    except BaseException:  # TimeoutExpired, KeyboardInterrupt: the tool and its children must not outlive us
        with stopping.blocked():  # bounded (TERM, 2 s, KILL): a second signal waits for it, never cuts it
            _kill_group(process)
        with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
            process.communicate(timeout=GRACE_SECONDS)  # reap it; a grandchild that left the group may hold a pipe
        for stream in (process.stdout, process.stderr):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        raise


def _start(argv: tuple[str, ...], tool: str, env: Mapping[str, str] | None) -> subprocess.Popen[str]:
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                env=child_env() if env is None else dict(env), text=True, errors="replace",
                                start_new_session=True, preexec_fn=_end_with_parent())  # noqa: PLW1509
    except FileNotFoundError as exc:
        raise ToolNotFound(f"{tool} not found at {argv[0]}") from exc
    except PermissionError as exc:
        raise ToolNotFound(f"{tool} at {argv[0]} is not executable") from exc
    except OSError as exc:  # not an executable at all (ENOEXEC), a name too long...
        raise ToolNotFound(f"{tool} at {argv[0]} cannot be run: {exc.strerror or exc}") from exc


TIMING = "timing: "  # a `log` line starting so is a duration: the CLI shows those with -vv only


def run(argv: Sequence[str], *, timeout: float, tool: str, env: Mapping[str, str] | None = None,
        check: bool = True, secrets: Sequence[str] = (), log: Callable[[str], None] | None = None,
        timeout_hint: str | None = None) -> Completed:
    """Run argv and return its output; raise ToolFailed/ToolNotFound/OperationTimeout as described above.

    The child leads a new session (its own process group), so a timeout or Ctrl-C ends it and every
    process it started, never leaving helm's or a credential plugin's children behind. `timeout_hint`
    is what the timeout message suggests (only commands that have a --timeout should mention it).
    """
    argv = tuple(str(a) for a in argv)
    if log is not None:
        log(f"+ {display(argv)}")
    process: subprocess.Popen[str] | None = None
    started = time.monotonic()
    try:
        with stopping.shielded():  # a signal now is raised once the child is known, so its group is ended below
            process = _start(argv, tool, env)
            stopping.child_started(process.pid)
        stdout, stderr = _communicate(process, timeout)
    except subprocess.TimeoutExpired as exc:
        subcommand = " ".join(a for a in argv[1:3] if not a.startswith("-"))
        raise OperationTimeout(f"{tool} {subcommand} did not finish within {timeout:g}s; it was stopped",
                               hint=timeout_hint or "check that the cluster answers: det-k8s status, kubectl "
                                                    "get nodes") from exc
    except BaseException:
        if process is not None and process.returncode is None:  # stopped before `_communicate` took charge
            with stopping.blocked():
                _kill_group(process)
        raise
    finally:
        if process is not None:
            stopping.child_ended(process.pid)
    completed = Completed(argv, process.returncode, stdout, stderr)
    if log is not None:
        subcommand = " ".join(a for a in argv[1:3] if not a.startswith("-"))
        log(f"{TIMING}{tool} {subcommand}: {time.monotonic() - started:.2f} s (exit {process.returncode})")
    if check and process.returncode != 0:
        subcommand = " ".join(a for a in argv[1:3] if not a.startswith("-"))
        detail = trim_stderr(stderr, secrets) or trim_stderr(stdout, secrets) or "no output"
        raise ToolFailed(f"{tool} {subcommand} failed (exit {process.returncode}): {detail}",
                         returncode=process.returncode, stderr=scrub(stderr, secrets))
    return completed
