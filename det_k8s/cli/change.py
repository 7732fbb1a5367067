"""After helm changed a release (`install`, `upgrade`, `rollback`): det-k8s's own wait, and its verdict in helm's record.

- ready: the revision is labelled as one det-k8s saw ready (release/record.py), what `rollback` without a revision
  goes back to;
- not ready in time: the revision is marked failed in helm's record (so `helm history`, `helm status` and
  `helm rollback` see it), and with --rollback-on-failure (--atomic) undone: rolled back to the last revision det-k8s
  saw ready, or, for a first install, uninstalled;
- stopped (SIGINT, SIGTERM, SIGHUP) while helm ran or while det-k8s waited: the revision is marked failed when helm
  left it claiming more than it did, undone with --rollback-on-failure, and the last line states where the release
  stands (read back from helm's record and the cluster) and the command that restores service.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .. import stopping
from ..errors import DetK8sError
from ..kube.api import KubeApi
from ..release import live
from ..release.record import State
from ..tools.helm import Helm, KubeFlags, rollback_argv, uninstall_argv
from . import output

UNDO_TIMEOUT = 600.0  # seconds: a rollback or uninstall of --rollback-on-failure (no wait of helm's)
SETTLE_SECONDS = 8.0  # after a stop's rollback: how long the last line waits for the old master to be served again


def _mark_failed(api: KubeApi, release: str, namespace: str, why: str) -> str:
    """Mark the latest revision failed; what was done, as a phrase for a message."""
    try:
        marked = live.mark_failed(api, release, namespace, f"det-k8s: {why}")
    except DetK8sError as exc:
        return f"helm's record could not be marked failed ({exc.message})"
    return f"revision {marked.revision} marked failed in helm's record" if marked else "helm keeps no record of it"


def _undo(api: KubeApi, tool: Helm, command: str, release: str, namespace: str, kube: KubeFlags, *,
          timeout: float, warn: bool = False) -> str:
    """--rollback-on-failure: an install uninstalled (helm's --atomic does the same), an upgrade or rollback rolled
    back to the last revision det-k8s saw ready (else the last one helm deployed, else the previous one); what was
    done, as a phrase."""
    restore = live.release_state(api, release, namespace).restore or ""
    if command == "install":
        argv, what, doing = uninstall_argv(tool.major, release, kube), "uninstalled it", "uninstalling it"
    elif restore.startswith(f"det-k8s rollback {release} "):
        back = restore.split()[3]
        argv = rollback_argv(tool.major, release, int(back), kube)
        what, doing = f"rolled back to revision {back}", f"rolling back to revision {back}"
    else:  # no record det-k8s can read: what helm's --atomic does
        argv = rollback_argv(tool.major, release, 0, kube)
        what, doing = "rolled back to the previous revision", "rolling back to the previous revision"
    if warn:
        output.warning(f"{release} did not become ready: {doing} (--rollback-on-failure)")
    try:
        tool.run(argv, timeout=timeout)
    except DetK8sError as exc:
        return f"{doing} failed ({exc.message})"
    return f"{what} (--rollback-on-failure)"


def said_state(api: KubeApi, release: str, namespace: str) -> State | None:
    try:
        return live.release_state(api, release, namespace)
    except DetK8sError:
        return None


@dataclass
class Phase:
    """Where a change is, for the last line of a stop (`helm_changing`)."""

    waiting: bool = False


def wait_and_record(api: KubeApi, tool: Helm, command: str, release: str, namespace: str, kube: KubeFlags,
                    seconds: float, shown: str, *, rollback: bool, phase: Phase) -> None:
    """det-k8s's wait for the master after helm `command`, and its verdict written into helm's record; called inside
    `helm_changing`, which says where the release stands if a signal stops it."""
    from ..release.observe import wait_until_ready

    phase.waiting = True
    try:
        with output.spinner(f"waiting for the master and database of {release} (up to {shown})"):
            wait_until_ready(api, release, namespace, seconds, shown, report=output.message)
    except BaseException as exc:
        if stopping.received() is not None:  # the signal's exception, or a request it cut short: helm_changing's
            raise
        if not isinstance(exc, DetK8sError):
            raise
        done = [_mark_failed(api, release, namespace, f"{command} not ready: {exc.message}")]
        if rollback:
            done.append(_undo(api, tool, command, release, namespace, kube, timeout=UNDO_TIMEOUT, warn=True))
        state = said_state(api, release, namespace)
        output.warning("; ".join(done) + (f"; now {state.line}" if state else ""))
        raise
    try:
        live.mark_ready(api, release, namespace)
    except DetK8sError as exc:  # the release is ready all the same; only `rollback`'s default cannot find it
        output.warning(f"the revision could not be labelled as seen ready in helm's record: {exc.message}")


def _stopped(api: KubeApi, tool: Helm, command: str, release: str, namespace: str, kube: KubeFlags, *,
             rollback: bool, waiting: bool) -> None:
    """A signal stopped the change: a revision helm recorded deployed whose master does not serve is marked failed
    (helm marks its own stopped changes failed or leaves them pending-*, which det-k8s leaves as they are), undone
    when asked, and the last line (stopping.note) says where the release stands and the command that restores
    service."""
    done: list[str] = []
    try:
        state = live.release_state(api, release, namespace)
        if state.status == "deployed" and state.restore is not None:
            how = "while det-k8s waited for the master" if waiting else "before its master served"
            done.append(_mark_failed(api, release, namespace, f"{command} stopped by {stopping.name()} {how}"))
        if rollback and state.restore is not None and not stopping.hurried():
            done.append(_undo(api, tool, command, release, namespace, kube, timeout=max(1.0, stopping.remaining())))
        final = live.release_state(api, release, namespace)
        settle = time.monotonic() + min(SETTLE_SECONDS, stopping.remaining())  # a rollback's master, back at once
        while rollback and final.restore is not None and final.revision is not None and time.monotonic() < settle:
            time.sleep(0.5)
            final = live.release_state(api, release, namespace)
    except (DetK8sError, KeyboardInterrupt) as exc:  # a second signal, or the cluster not answering: say so
        why = exc.message if isinstance(exc, DetK8sError) else "a second signal"
        stopping.note("; ".join([*done, f"where release {release} stands could not be read back ({why}); "
                                 f"`det-k8s status {release} -n {namespace}` says it and names the command that "
                                 "restores service"]))
        return
    stopping.note("; ".join([*done, final.line]))


@contextlib.contextmanager
def helm_changing(api: KubeApi, tool: Helm, command: str, release: str, namespace: str, kube: KubeFlags, *,
                  rollback: bool) -> Iterator[Phase]:
    """helm changing the release, then det-k8s waiting for it and saying so: stopped anywhere in between, helm may
    have left the release pending-<command> or failed, or deployed with the old master already replaced; the last
    line reads back where it stands and names the fix (or says the master serves)."""
    phase = Phase()
    try:
        yield phase
    except BaseException:  # the signal's exception, or a failure a signal caused (helm stopped, a request cut)
        if stopping.received() is not None:
            _stopped(api, tool, command, release, namespace, kube, rollback=rollback, waiting=phase.waiting)
        raise
